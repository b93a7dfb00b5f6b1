/* version.c: the library's version and build features, for programs that link a
 * library other than the one whose headers they were compiled with. */
#include "calf/version.h"

#include <string.h>

#include "numerics/kernels.h"

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
    if (!strcmp(feature, "video")) {
#if CALF_HAVE_VIDEO && CALF_HAVE_EGL
        return "built in (MP4: FFmpeg's H.264; GIF: giflib; drawing: cairo, MuJoCo's own renderer "
               "through EGL)";
#elif CALF_HAVE_VIDEO && !CALF_HAVE_MUJOCO
        return "built in (MP4: FFmpeg's H.264; GIF: giflib; drawing: cairo)";
#elif CALF_HAVE_VIDEO
        return "built in (MP4: FFmpeg's H.264; GIF: giflib; drawing: cairo), but MuJoCo envs "
               "cannot be drawn: apt-get install " CALF_EGL_PACKAGES " and build again";
#elif CALF_WITH_VIDEO
        return "not built: cairo, FFmpeg or giflib was not found at build time; to get it, "
               "apt-get install " CALF_VIDEO_PACKAGES " and build again";
#else
        return "not built: turned off at build time (-DCALF_WITH_VIDEO=OFF)";
#endif
    }
    if (!strcmp(feature, "kernels")) return kernels_describe();
    return NULL;
}
