/* version.c: the library's version and build features, for programs that link a
 * library other than the one whose headers they were compiled with. */
#include "calf/version.h"

const char *calf_version(void) { return CALF_VERSION_STRING; }

bool calf_has_mpi(void) { return CALF_HAVE_MPI != 0; }
bool calf_has_mujoco(void) { return CALF_HAVE_MUJOCO != 0; }
