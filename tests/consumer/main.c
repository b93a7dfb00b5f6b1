/* consumer/main.c: a program outside calf's tree, built against an installed calf by
 * tests/e2e_install.sh (with pkg-config and cc, and with CMake's find_package). Through
 * the public API only it trains a run and plays its policy:
 *   consumer ROOT_DIR CONF [Scope.param=value]...  */
#include <stdio.h>
#include <string.h>

#include "calf/train.h"
#include "calf/version.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: consumer ROOT_DIR CONF [Scope.param=value]...\n");
        return 2;
    }
    /* the library this program runs with is the one its headers describe */
    if (strcmp(calf_version(), CALF_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: headers say calf %s, the library is %s\n", CALF_VERSION_STRING,
                calf_version());
        return 1;
    }
    calf_train_options o;
    memset(&o, 0, sizeof o);
    o.root_dir = argv[1];
    o.conf_path = argv[2];
    o.conf_params = (const char *const *)(argv + 3);
    o.num_conf_params = argc - 3;
    o.nproc = 1;
    o.quiet = true;
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_train(&o, &err);
    if (rc != CALF_OK) {
        fprintf(stderr, "consumer: train: %s\n", err.msg);
        return calf_exit_code(rc);
    }
    calf_play_options p;
    memset(&p, 0, sizeof p);
    p.root_dir = argv[1];
    p.num_episodes = 2;
    rc = calf_play(&p, &err);
    if (rc != CALF_OK) {
        fprintf(stderr, "consumer: play: %s\n", err.msg);
        return calf_exit_code(rc);
    }
    printf("consumer: calf %s (version number %d, MPI %s) trained and played %s\n", calf_version(),
           CALF_VERSION_NUMBER, calf_has_mpi() ? "built in" : "not built", argv[1]);
    return 0;
}
