"""setup.py: builds the Python package calf (python/calf) with setuptools, offline.

The extension calf._calf is compiled from the sources CMakeLists.txt compiles (src/*/*.c,
the generated embeds, the extension's own C files and the calf program's but for its
main) with the same flags and the same optional parts: MPI when an MPI compiler wrapper
or pkg-config knows one, MuJoCo when its header and library are found, videos when
cairo, giflib and FFmpeg's headers and libraries are (and EGL/OpenGL for MuJoCo's
renderer). The hot files (KERNELS_SOURCES of src/numerics/kernels.h) are compiled once per
kernel variant as CMake compiles them, the variant chosen at run time. The environment
variables CALF_WITH_MPI=0, CALF_WITH_MUJOCO=0 and CALF_WITH_VIDEO=0 turn those parts off
as CMake's -D...=OFF do, and CALF_NATIVE=1 compiles everything for this machine's CPU as
-DCALF_NATIVE=ON does; the same choices give the same bits as the CMake build. Install (README, "Use calf from
Python"):  python3 -m pip install --no-build-isolation --no-index .
"""

from __future__ import annotations

import ctypes.util
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
COMPILER_DIRS = ("/usr/include", "/usr/local/include")  # searched by the compiler itself


def rel(*parts: str) -> str:
    """A path under the source tree, relative to it (setuptools wants relative sources)."""
    return os.path.join(*parts)


def version() -> str:
    """CALF_VERSION_STRING of include/calf/version.h, the one place it is written."""
    with open(os.path.join(HERE, "include", "calf", "version.h"), encoding="utf-8") as f:
        m = re.search(r'^#define CALF_VERSION_STRING "([0-9.]+)"', f.read(), re.M)
    if not m:
        sys.exit("setup.py: include/calf/version.h has no CALF_VERSION_STRING")
    return m.group(1)


def dispatched_sources() -> list[str]:
    """KERNELS_SOURCES of src/numerics/kernels.h: the files compiled once per kernel variant."""
    with open(os.path.join(HERE, "src", "numerics", "kernels.h"), encoding="utf-8") as f:
        m = re.search(r'^#define KERNELS_SOURCES "([^"]*)"', f.read(), re.M)
    if not m:
        sys.exit('setup.py: src/numerics/kernels.h has no #define KERNELS_SOURCES "..."')
    return [rel("src", *path.split("/")) for path in m.group(1).split()]


def native() -> bool:
    """CALF_NATIVE, off unless set to 1/ON/YES/TRUE (CMake's OFF default)."""
    return os.environ.get("CALF_NATIVE", "0").strip().upper() in ("1", "ON", "YES", "TRUE")


def wanted(name: str) -> bool:
    """An optional part is built unless its variable says 0/OFF/NO/FALSE (CMake's ON default)."""
    return os.environ.get(name, "1").strip().upper() not in ("0", "OFF", "NO", "FALSE", "")


def say(msg: str) -> None:
    print(f"calf: {msg}", file=sys.stderr)


def run_flags(cmd: list[str]) -> list[str] | None:
    """The words a flag-printing command prints, or None when it is absent or fails."""
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return shlex.split(out)


def find_mpi() -> tuple[list[str], list[str]] | None:
    """(compile flags, link flags) of the MPI C library: pkg-config's mpi-c, else the
    compiler wrapper's (Open MPI's -showme, MPICH's -compile-info), else None."""
    cflags = run_flags(["pkg-config", "--cflags", "mpi-c"])
    libs = run_flags(["pkg-config", "--libs", "mpi-c"])
    if cflags is not None and libs is not None:
        return cflags, libs
    cflags = run_flags(["mpicc", "-showme:compile"])
    libs = run_flags(["mpicc", "-showme:link"])
    if cflags is not None and libs is not None:
        return cflags, libs
    compile_info = run_flags(["mpicc", "-compile-info"])
    link_info = run_flags(["mpicc", "-link-info"])
    if compile_info and link_info:
        return compile_info[1:], link_info[1:]
    return None


def include_dirs_with(header: str, suffixes: tuple[str, ...] = ("",)) -> str | None:
    """The include directory (or its subdirectory in suffixes, e.g. cairo/) holding header,
    among the compiler's (CPATH, Python's prefix, /usr/local/include, /usr/include and
    Debian's multiarch /usr/include/TRIPLET), or None."""
    dirs = [d for d in os.environ.get("CPATH", "").split(os.pathsep) if d]
    dirs += [sysconfig.get_config_var("INCLUDEDIR") or "", "/usr/local/include", "/usr/include"]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        dirs.append(os.path.join("/usr/include", multiarch))
    for d in dirs:
        for sub in suffixes:
            if d and os.path.isfile(os.path.join(d, sub, header)):
                return os.path.normpath(os.path.join(d, sub))
    return None


def find_mujoco() -> str | None:
    """The include directory holding mujoco/mujoco.h when libmujoco is installed too."""
    d = include_dirs_with(os.path.join("mujoco", "mujoco.h"))
    return d if d and ctypes.util.find_library("mujoco") else None




def find_video(mujoco: bool) -> tuple[list[str], list[str], bool] | None:
    """CMakeLists.txt's video search: (include dirs, libraries to link, EGL too) when
    cairo, giflib and FFmpeg's headers and libraries are found (FFmpeg's are loaded at
    run time, not linked), else None; EGL and OpenGL only with MuJoCo."""
    incs = [include_dirs_with("cairo.h", ("", "cairo")), include_dirs_with("gif_lib.h"),
            include_dirs_with(os.path.join("libavcodec", "avcodec.h"))]
    libs = ["cairo", "gif", "avformat", "avcodec", "swscale", "avutil"]
    if None in incs or not all(ctypes.util.find_library(lib) for lib in libs):
        return None
    egl = (mujoco and include_dirs_with(os.path.join("EGL", "egl.h")) is not None
           and bool(ctypes.util.find_library("EGL")) and bool(ctypes.util.find_library("OpenGL")))
    return incs, ["cairo", "gif"] + (["EGL", "OpenGL"] if egl else []), egl


def embed(out: str, inputs: list[str], prefix: str) -> None:
    """cmake/embed.cmake in Python: each file as `const char PREFIXstem[]` (its bytes,
    then a NUL) and `const int PREFIXstem_size`, the same C text."""
    body = "/* Generated by cmake/embed.cmake; do not edit. */\n"
    for path in inputs:
        stem = os.path.basename(path).split(".")[0]
        sym = re.sub(r"[^A-Za-z0-9_]", "_", prefix + stem)
        with open(path, "rb") as f:
            data = f.read()
        rows = "".join(
            "".join(f"0x{b:02x}," for b in data[i : i + 16]) + ("\n" if i + 16 <= len(data) else "")
            for i in range(0, len(data), 16)
        )
        body += (
            f"extern const char {sym}[];\nextern const int {sym}_size;\n"
            f"const char {sym}[] = {{\n{rows}0}};\nconst int {sym}_size = {len(data)};\n"
        )
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        f.write(body)
    os.replace(out + ".tmp", out)


class BuildCalf(build_ext):
    """build_ext that first writes the generated sources CMake's embed.cmake writes, and
    compiles the dispatched files once per kernel variant, as CMakeLists.txt does."""

    def run(self) -> None:
        gen = os.path.join(self.build_temp, "generated")
        for ext in self.extensions:
            embed(os.path.join(gen, "cmath_text.c"), [rel("src", "base", "cmath_tanh.inc")], "cm_src_")
            ext.sources.append(os.path.join(gen, "cmath_text.c"))
            if ext.calf_mujoco:
                embed(os.path.join(gen, "mj_models.c"), sorted(glob(rel("src", "envs", "*.xml"))), "mjcf_")
                ext.sources.append(os.path.join(gen, "mj_models.c"))
        super().run()

    def build_extension(self, ext: Extension) -> None:
        objects = []
        for variant, flags in ext.calf_variants:
            objects += self.compiler.compile(
                ext.calf_dispatched, output_dir=os.path.join(self.build_temp, variant),
                macros=ext.define_macros + [("CALF_KERNEL_VARIANT", variant)],
                include_dirs=ext.include_dirs,
                extra_postargs=ext.extra_compile_args + flags
                + ["-include", rel("src", "numerics", "kernels.h")])
        ext.extra_objects = objects
        super().build_extension(ext)


def extension() -> Extension:
    with_mpi, with_mujoco = wanted("CALF_WITH_MPI"), wanted("CALF_WITH_MUJOCO")
    mpi = find_mpi() if with_mpi else None
    mujoco_inc = find_mujoco() if with_mujoco else None
    say("MPI " + ("found; building the MPI backend" if mpi else
                  "not found; building without the MPI backend" if with_mpi else
                  "backend turned off (CALF_WITH_MPI=0)"))
    say("MuJoCo " + ("found; building its envs" if mujoco_inc else
                     "not found; building without its envs (apt-get install libmujoco-dev)"
                     if with_mujoco else "envs turned off (CALF_WITH_MUJOCO=0)"))
    with_video = wanted("CALF_WITH_VIDEO")
    video = find_video(bool(mujoco_inc)) if with_video else None
    say("videos " + ("found; building calf play --video" + ("" if video[2] else
                     " (MuJoCo envs cannot be drawn: no EGL/OpenGL)") if video else
                     "not found; building without them (apt-get install libcairo2-dev "
                     "libavcodec-dev libavformat-dev libswscale-dev libavutil-dev libgif-dev)"
                     if with_video else "turned off (CALF_WITH_VIDEO=0)"))
    dispatched = dispatched_sources()
    lib = [s for s in sorted(glob(rel("src", "*", "*.c"))) if s not in dispatched]
    if not mujoco_inc:
        lib = [s for s in lib if not re.search(r"[/\\]mj_[^/\\]*\.c$", s)]
    if not video:
        lib = [s for s in lib if not re.search(r"[/\\]render[/\\]draw_[^/\\]*\.c$", s)]
    elif not video[2]:
        lib = [s for s in lib if not re.search(r"[/\\]render[/\\]draw_mujoco\.c$", s)]
    cli = [s for s in sorted(glob(rel("cli", "*.c"))) if os.path.basename(s) != "main.c"]
    sources = lib + sorted(glob(rel("python", "calf", "*.c"))) + cli
    import numpy  # the build needs NumPy's headers, as CMake's find_package(Python3 NumPy)

    # CMakeLists.txt's flags: the same arithmetic (no fast math, no contraction); the
    # dispatched files once per variant: generic, and on x86-64 fma (AVX2 and FMA) and
    # avx512 (the same with AVX-512F and VL), unless CALF_NATIVE compiles everything for
    # this CPU
    cflags = ["-std=c11", "-O3", "-Wall", "-Wextra", "-fno-fast-math", "-ffp-contract=off"]
    variants = [("generic", [])]
    if native():
        cflags.append("-march=native")
    elif platform.machine() in ("x86_64", "AMD64", "amd64"):
        variants.append(("fma", ["-mavx2", "-mfma"]))
        variants.append(("avx512", ["-mavx2", "-mfma", "-mavx512f", "-mavx512vl"]))
    ldflags = [f"-Wl,--version-script={rel('python', 'calf', '_calf.map')}"]
    libraries = ["m", "dl"]
    include_dirs = [rel("include"), rel("src"), rel("cli"), numpy.get_include()]
    if mpi:
        cflags += mpi[0]
        ldflags += mpi[1]
    if mujoco_inc:
        if mujoco_inc not in COMPILER_DIRS:
            include_dirs.append(mujoco_inc)
        libraries.append("mujoco")
    if video:
        include_dirs += [d for d in video[0] if d not in COMPILER_DIRS]
        libraries += video[1]
    ext = Extension(
        "calf._calf",
        sources=sources,
        include_dirs=include_dirs,
        define_macros=[
            ("_POSIX_C_SOURCE", "200809L"),
            ("_DEFAULT_SOURCE", None),
            ("CALF_HAVE_MPI", "1" if mpi else "0"),
            ("CALF_HAVE_MUJOCO", "1" if mujoco_inc else "0"),
            ("CALF_HAVE_VIDEO", "1" if video else "0"),
            ("CALF_HAVE_EGL", "1" if video and video[2] else "0"),
            ("CALF_VIDEO_PACKAGES", '"libcairo2-dev libavcodec-dev libavformat-dev '
             'libswscale-dev libavutil-dev libgif-dev"'),
            ("CALF_EGL_PACKAGES", '"libegl-dev libopengl-dev libegl-mesa0 libgl1-mesa-dri"'),
            # read by src/base/version.c only: turned off, or not found
            ("CALF_WITH_MPI", "1" if with_mpi else "0"),
            ("CALF_WITH_MUJOCO", "1" if with_mujoco else "0"),
            ("CALF_WITH_VIDEO", "1" if with_video else "0"),
            # read by src/numerics/kernels.c only: which variants there are
            ("CALF_KERNELS_NATIVE", "1" if native() else "0"),
            ("CALF_KERNELS_FMA", "1" if len(variants) > 1 else "0"),
        ],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
        libraries=libraries,
    )
    ext.calf_mujoco = bool(mujoco_inc)
    ext.calf_dispatched = dispatched
    ext.calf_variants = variants
    return ext


os.chdir(HERE)
setup(
    version=version(),
    package_dir={"": "python"},
    packages=["calf"],
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildCalf},
    include_package_data=False,  # the package is its .py files and the built extension
    # not CMake's build/: the two builds keep apart; several files compile at once
    options={"build": {"build_base": "build-python"}, "build_ext": {"parallel": os.cpu_count() or 1}},
)
