#!/usr/bin/env bash
# e2e_layers.sh: the include arrows of src/ run down the layers docs/DESIGN.md's module map
# names, never up: base; records and envs; numerics, parallel and render; training;
# algorithms; tools (a folder includes its own files and any lower folder's). cli/ and
# python/ include only the public headers (calf/...) and their own. The checker is shown
# to reject a planted arrow from algorithms/ up to tools/, as export.h was before it moved.
. "$(dirname "$0")/lib_e2e.sh"

rank() {
    case $1 in
    calf) echo -1 ;; # include/calf: the public API, below everything
    base) echo 0 ;;
    records | envs) echo 1 ;;
    numerics | parallel | render) echo 2 ;;
    training) echo 3 ;;
    algorithms) echo 4 ;;
    tools) echo 5 ;;
    *) echo 99 ;;
    esac
}

# The arrows that run up today, each with its reason; nothing else may.
known_up() {
    case "$1 $2" in
    # calf --version names the kernel variant the CPU chose
    "src/base/version.c numerics/kernels.h") return 0 ;;
    esac
    return 1
}

# check_tree ROOT: print every include that runs up (FILE -> HEADER), exit 1 if any
check_tree() {
    local root=$1 up=0 f dir inc to
    for f in "$root"/src/*/*.[ch]; do
        [ -f "$f" ] || continue
        dir=$(basename "$(dirname "$f")")
        while read -r inc; do
            to=${inc%%/*}
            [ "$to" = "$inc" ] && continue # a system header or a same-folder name
            [ "$to" = "$dir" ] && continue
            if [ "$(rank "$to")" -ge "$(rank "$dir")" ] && ! known_up "${f#"$root"/}" "$inc"; then
                echo "  ${f#"$root"/} includes $inc (${dir} is below ${to})"
                up=1
            fi
        done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
    done
    for f in "$root"/cli/*.[ch] "$root"/python/calf/*.[ch]; do
        [ -f "$f" ] || continue
        while read -r inc; do
            case $inc in calf/* | */*) ;; *) continue ;; esac
            case $inc in calf/*) continue ;; esac
            echo "  ${f#"$root"/} includes $inc (only the public API, calf/...)"
            up=1
        done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
    done
    return $up
}

check_tree "$SRC" >"$WORK/arrows" && ok || { bad "includes that run up a layer:"; cat "$WORK/arrows" >&2; }
# every folder of src/ has a rank: a new one is placed in the map and here
for d in "$SRC"/src/*/; do
    d=$(basename "$d")
    [ "$(rank "$d")" != 99 ] && ok || bad "src/$d has no layer here (add it to rank() and to DESIGN.md's map)"
done

# the checker catches a planted arrow: algorithms/obs_norm.h including tools/play.h
mkdir -p "$WORK/tree/src/algorithms" "$WORK/tree/src/tools"
printf '#include "tools/play.h"\n' >"$WORK/tree/src/algorithms/obs_norm.h"
printf '#include "algorithms/obs_norm.h"\n' >"$WORK/tree/src/tools/play.c"
check_tree "$WORK/tree" >"$WORK/planted" && bad "the checker passed algorithms/ -> tools/" || ok
expect_in "$WORK/planted" "src/algorithms/obs_norm.h includes tools/play.h"
expect_not_in "$WORK/planted" "src/tools/play.c"
# and a program file reaching into src/
mkdir -p "$WORK/tree2/cli"
printf '#include "calf/train.h"\n#include "training/trainer.h"\n' >"$WORK/tree2/cli/calf.c"
check_tree "$WORK/tree2" >"$WORK/planted2" && bad "the checker passed cli/ -> training/" || ok
expect_in "$WORK/planted2" "cli/calf.c includes training/trainer.h"

report e2e_layers
