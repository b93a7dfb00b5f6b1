/* calf/version.h: the library's version, and what its public headers promise.
 * The numbers below are the one place the version is written: CMakeLists.txt reads them
 * for the project, the shared library's soname and the installed packages.
 *
 * What is stable. The public API is what the headers in include/calf/ declare, nothing
 * else: src/ holds internal headers that may change in any release. While the major version
 * is 0, a release that changes only PATCH keeps both the source API and the binary
 * interface (the shared library's soname is libcalf.so.MAJOR.MINOR); a MINOR release may
 * change either and says so in README.md. Structs a caller fills (options, errors) may
 * gain fields: zero them before setting what you use (memset, or `= {0}`), and a program
 * keeps compiling; a config is opaque (calf_config_new). What a run writes (checkpoint
 * format, config.gin, events files) is versioned inside the files themselves and checked
 * on reading. calf's test-only functions are in calf/testing.h, which is not installed. */
#ifndef CALF_VERSION_H
#define CALF_VERSION_H

#include <stdbool.h>

#define CALF_VERSION_MAJOR 0
#define CALF_VERSION_MINOR 3
#define CALF_VERSION_PATCH 0
#define CALF_VERSION_STRING "0.3.0"
/* One number that orders versions, for #if: 0.1.0 is 1000, 1.2.3 is 1002003. */
#define CALF_VERSION_NUMBER \
    ((CALF_VERSION_MAJOR * 1000 + CALF_VERSION_MINOR) * 1000 + CALF_VERSION_PATCH)

/* The version of the library the program runs with ("MAJOR.MINOR.PATCH"), which may be
 * newer than the header it was compiled against (a shared library updated under it).
 * Static storage: do not free. */
const char *calf_version(void);
/* Whether this build of the library has the MPI backend (CMake found MPI). */
bool calf_has_mpi(void);
/* Whether this library was built with MuJoCo (the locomotion environments). */
bool calf_has_mujoco(void);
/* What this build did with a feature, "mpi", "mujoco" or "video", in words: "built in", or
 * "not built: ..." saying whether the build turned it off (-DCALF_WITH_MPI=OFF) or did
 * not find it, and how to get it; for "kernels", the variant of the hot kernels this
 * process runs ("fma (...)", "generic (...)"), chosen by the CPU or forced with the
 * environment variable CALF_KERNELS. NULL for another name. Static storage. */
const char *calf_feature_note(const char *feature);

#endif
