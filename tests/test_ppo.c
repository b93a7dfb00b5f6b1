/* test_ppo.c: PPO's results are part of calf's contract. examples/ppo_cartpole.gin's
 * parameters after its 391 iterations hash to the value recorded when the example was
 * re-tuned to rl-baselines3-zoo's settings (issue 38; calf's own transcendentals,
 * base/cmath.h, since before), the same for every build and CPU (x86-64 native and
 * generic, aarch64: tests/e2e_cross.sh), on one process and on --nproc 2. */
#include <stdint.h>

#include "calf/train.h"
#include "records/checkpoint.h"
#include "test_files.h"
#include "test_util.h"

#define PPO_CARTPOLE_PARAMS_FNV 0xd05cb2bf7b3c424bULL

/* FNV-1a over the bytes of the parameters in the checkpoint's PRMS section. */
static uint64_t params_fnv(const char *ckpt, size_t *count) {
    ckpt_header hdr;
    unsigned char *p = NULL;
    size_t n = 0;
    calf_error err;
    *count = 0;
    if (ckpt_read(ckpt, &hdr, &p, &n, &err) != CALF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 0;
    }
    ckpt_reader r;
    ckpt_reader_init(&r, p, n, ckpt, &err);
    uint32_t layout;
    int64_t i64;
    uint64_t u64 = 0;
    ckpt_get_tag(&r, "META");
    ckpt_get_u32(&r, &layout);
    for (int k = 0; k < 3; k++) ckpt_get_i64(&r, &i64); /* iteration, env steps, episodes */
    ckpt_get_u64(&r, &u64);                               /* envs */
    ckpt_get_u64(&r, &u64);                               /* the head's size */
    ckpt_get_tag(&r, "PRMS");
    ckpt_get_u64(&r, &u64);
    uint64_t h = 0xcbf29ce484222325ULL;
    if (r.status == CALF_OK && u64 <= (n - r.pos) / 4) {
        for (size_t i = 0; i < 4 * u64; i++) h = (h ^ r.p[r.pos + i]) * 0x100000001b3ULL;
        *count = u64;
    }
    free(p);
    return h;
}

int main(void) {
    char root[256], dir[512], ckpt[600];
    snprintf(root, sizeof root, "/tmp/calf_test_ppo_XXXXXX");
    if (!mkdtemp(root)) { perror("mkdtemp"); return 1; }
    for (int nproc = 1; nproc <= 2; nproc++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", nproc);
        join(dir, sizeof dir, root, name);
        calf_train_options o = {.root_dir = dir,
                                .conf_path = CALF_SOURCE_DIR "/examples/ppo_cartpole.gin",
                                .nproc = nproc, .quiet = true};
        calf_error err;
        CHECK_INT_EQ(calf_train(&o, &err), CALF_OK);
        join(ckpt, sizeof ckpt, dir, "train/algorithm/ckpt-391");
        size_t count = 0;
        uint64_t h = params_fnv(ckpt, &count);
        CHECK_INT_EQ(count, 9169);
        if (h != PPO_CARTPOLE_PARAMS_FNV)
            fprintf(stderr, "--nproc %d: parameters hash to 0x%016llx, want 0x%016llx\n", nproc,
                    (unsigned long long)h, (unsigned long long)PPO_CARTPOLE_PARAMS_FNV);
        CHECK(h == PPO_CARTPOLE_PARAMS_FNV);
    }
    rm_rf(root);
    return test_report("test_ppo");
}
