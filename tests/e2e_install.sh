#!/usr/bin/env bash
# e2e_install.sh: `cmake --install` into a temporary prefix installs the calf program,
# libcalf (static and shared, the shared one exporting only calf_*, none of them
# test-only), the public headers (not the test-only calf/testing.h), calf.pc and the
# CMake package; a project outside the tree builds against it with
# pkg-config and cc, and with find_package (shared and static), and each of its programs
# trains the checkpoint the calf program writes, byte for byte, and plays it.
# Needs CALF_BUILD_DIR (the build to install; CMake sets it) and may get
# CALF_CONSUMER_FLAGS (what a program linking this build needs, e.g. the sanitizers).
. "$(dirname "$0")/lib_e2e.sh"

BUILD=${CALF_BUILD_DIR:?CALF_BUILD_DIR: the build directory to install}
FLAGS=${CALF_CONSUMER_FLAGS:-}
P="$WORK/prefix with space"
ARGS=(TrainerConfig.num_iterations=3 TrainerConfig.num_env_steps=0 TrainerConfig.evaluate=False)

expect_exit 0 cmake --install "$BUILD" --prefix "$P"
for f in bin/calf include/calf/train.h include/calf/version.h include/calf/env.h \
         include/calf/config.h include/calf/error.h; do
    if [ -f "$P/$f" ]; then ok; else bad "not installed: $f"; fi
done
# only the public headers: nothing from src/, and not calf's test-only API
if [ -e "$P/include/calf/nn.h" ] || [ -e "$P/include/nn.h" ]; then bad "internal header installed"; else ok; fi
if [ -e "$P/include/calf/testing.h" ]; then bad "test-only header installed: calf/testing.h"; else ok; fi
if grep -rlE 'calf_testing_|_for_testing' "$P/include" >"$WORK/test_decls"; then
    bad "installed headers declare test-only functions: $(tr '\n' ' ' <"$WORK/test_decls")"; else ok; fi
LIBA=$(find "$P" -name libcalf.a | head -1)
LIBSO=$(find "$P" -name 'libcalf.so.*.*.*' | head -1)
PC=$(find "$P" -name calf.pc | head -1)
CONFIG=$(find "$P" -name calfConfig.cmake | head -1)
for v in LIBA LIBSO PC CONFIG; do
    if [ -n "${!v}" ]; then ok; else bad "not installed: $v"; fi
done
LIBDIR=$(dirname "$LIBSO")
VERSION=$("$P/bin/calf" --version | sed -n 's/^calf \([0-9.]*\) .*/\1/p')
expect_eq "$(basename "$LIBSO")" "libcalf.so.$VERSION" "shared library file name"
if [ -L "$LIBDIR/libcalf.so.${VERSION%.*}" ] && [ -L "$LIBDIR/libcalf.so" ]; then ok; else
    bad "soname links libcalf.so.${VERSION%.*} and libcalf.so missing"; fi
# the shared library exports the public API and nothing else
nm -D --defined-only "$LIBSO" | awk '$2 ~ /[TDBRW]/ {print $3}' | sort -u >"$WORK/exported"
expect_in "$WORK/exported" "calf_train"
expect_in "$WORK/exported" "calf_version"
if grep -v '^calf_' "$WORK/exported" >"$WORK/internal"; then
    bad "libcalf.so exports non-API symbols: $(head -5 "$WORK/internal" | tr '\n' ' ')"; else ok; fi
for f in calf_testing_set calf_context_reset_for_testing calf_play_for_testing; do
    expect_not_in "$WORK/exported" "$f"
done

# the calf program from the prefix writes the reference checkpoint
expect_exit 0 "$P/bin/calf" train --quiet --root_dir "$WORK/ref" --conf "$SRC/examples/ppo_cartpole.gin" \
    $(printf -- '--conf_param %s ' "${ARGS[@]}")
REF="$WORK/ref/train/algorithm/ckpt-3"
if [ -f "$REF" ]; then ok; else bad "installed calf wrote no ckpt-3"; fi

# consumer_run NAME PROGRAM [LD_LIBRARY_PATH]: the program trains and plays; its
# checkpoint is the reference's
consumer_run() {
    expect_exit 0 env ${3:+LD_LIBRARY_PATH="$3"} "$2" "$WORK/run_$1" "$SRC/examples/ppo_cartpole.gin" "${ARGS[@]}"
    expect_in "$WORK/out" "consumer: calf $VERSION"
    expect_in "$WORK/out" "average return over 2 episodes"
    expect_same_file "$REF" "$WORK/run_$1/train/algorithm/ckpt-3"
}

# pkg-config and cc
if command -v pkg-config >/dev/null; then
    export PKG_CONFIG_PATH
    PKG_CONFIG_PATH=$(dirname "$PC")
    expect_exit 0 pkg-config --exists calf
    expect_eq "$(pkg-config --modversion calf)" "$VERSION" "pkg-config --modversion"
    # README's route: its program, built with its command (-rpath to pkg-config's libdir),
    # runs with no LD_LIBRARY_PATH. pkg-config escapes blanks in paths with a backslash,
    # for a shell (make's) to read, in its --variable output too.
    RPATH=$(pkg-config --variable=libdir calf)
    awk '/^```$/ && on { exit } on { print } /^```c$/ { on = 1 }' "$SRC/README.md" > "$WORK/readme_prog.c"
    expect_in "$WORK/readme_prog.c" "int main(void)"
    for prog in "$SRC/tests/consumer/main.c" "$WORK/readme_prog.c"; do
        out=$WORK/consumer_pc
        [ "$prog" = "$WORK/readme_prog.c" ] && out=$WORK/readme_prog
        expect_exit 0 eval "cc -std=c11 -Wall -Wextra -Werror $FLAGS $(pkg-config --cflags calf) \
            $(printf %q "$prog") -o $(printf %q "$out") $(pkg-config --libs calf) \
            -Wl,-rpath,$RPATH"
    done
    # examples/embed.c, the three handles of the embedding API, against the installed calf
    expect_exit 0 eval "cc -std=c11 -Wall -Wextra -Werror $FLAGS $(pkg-config --cflags calf) \
        $(printf %q "$SRC/examples/embed.c") -o $(printf %q "$WORK/embed") $(pkg-config --libs calf) \
        -Wl,-rpath,$RPATH"
    if [ -x "$WORK/embed" ]; then
        expect_exit 0 env -u LD_LIBRARY_PATH "$WORK/embed" "$WORK/embed_run"
        expect_in "$WORK/out" "iteration 10  env steps 10240"
        expect_in "$WORK/out" "embed example OK"
    fi
    if [ -x "$WORK/consumer_pc" ]; then
        env -u LD_LIBRARY_PATH ldd "$WORK/consumer_pc" >"$WORK/ldd" 2>&1
        expect_in "$WORK/ldd" "libcalf.so.${VERSION%.*} => ${RPATH//\\ / }"
        env -u LD_LIBRARY_PATH ldd "$WORK/readme_prog" >"$WORK/ldd" 2>&1
        expect_not_in "$WORK/ldd" "not found"
        consumer_run pc "$WORK/consumer_pc"
    fi
else
    echo "skipped the pkg-config build: no pkg-config here (Debian: apt-get install pkgconf)"
fi

# CMake: find_package(calf) -> calf::calf and calf::calf_static
expect_exit 0 cmake -S "$SRC/tests/consumer" -B "$WORK/consumer_build" -DCMAKE_PREFIX_PATH="$P" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$FLAGS" -DCMAKE_EXE_LINKER_FLAGS="$FLAGS"
expect_exit 0 cmake --build "$WORK/consumer_build"
for kind in shared static; do
    if [ -x "$WORK/consumer_build/consumer_$kind" ]; then ok; else bad "consumer_$kind not built"; continue; fi
    consumer_run "cmake_$kind" "$WORK/consumer_build/consumer_$kind" "$LIBDIR"
done
# the static program carries the library: no libcalf.so in it
ldd "$WORK/consumer_build/consumer_static" >"$WORK/ldd_static" 2>&1
expect_not_in "$WORK/ldd_static" "libcalf"

report e2e_install
