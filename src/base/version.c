/* version.c: the library's version and build features, for programs that link a
 * library other than the one whose headers they were compiled with. */
#include "calf/version.h"

#include <string.h>

const char *calf_version(void) { return CALF_VERSION_STRING; }

bool calf_has_mpi(void) { return CALF_HAVE_MPI != 0; }
bool calf_has_mujoco(void) { return CALF_HAVE_MUJOCO != 0; }

const char *calf_feature_note(const char *feature) {
    if (!feature) return NULL;
    if (!strcmp(feature, "mpi")) {
#if CALF_HAVE_MPI
        return "built in";
#elif CALF_WITH_MPI
        return "not built: MPI was not found at build time";
#else
        return "not built: turned off at build time (-DCALF_WITH_MPI=OFF)";
#endif
    }
    if (!strcmp(feature, "mujoco")) {
#if CALF_HAVE_MUJOCO
        return "built in";
#elif CALF_WITH_MUJOCO
        return "not built: MuJoCo was not found at build time; to get them, apt-get install "
               "libmujoco-dev and build again";
#else
        return "not built: turned off at build time (-DCALF_WITH_MUJOCO=OFF)";
#endif
    }
    return NULL;
}
