/* export_gen.c: policies no algorithm trains yet, written by calf's export writer so that
 * tests/e2e_export.sh can hold the file to calf's bits. From a fixed seed, with a mask
 * over 4 actions (the masked argmax PPO's export words): lstm, gru: an fc layer, the core
 * and the head (PPO refuses a recurrent core with a mask), its calf_policy_step_masked; 3
 * rows stepped together with episode starts and masks drawn per line, calf's own action
 * for each (net_step on the row's state, dist_categorical_mode_masked). dict8: a Dict of a
 * vector, a 3x3x2 uint8 image part of a float observation (scaled by 1/255 as it is
 * gathered) through its conv, and a vector, then an fc layer and the head (no test env has
 * such a Dict); its calf_policy_act_masked on lines whose image values are bytes.
 *   export_gen lstm|gru|dict8 POLICY.c INPUT ACTIONS
 * POLICY.c: the file (a head with export_main.c's macros, then export_c_write's text);
 * INPUT: export_main.c's lines ([row, start,] observation, mask); ACTIONS: calf's actions. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "numerics/action_dist.h"
#include "numerics/export_c.h"
#include "numerics/net.h"

enum { IN = 6, FC = 8, H = 6, A = 4, ROWS = 3, STEPS = 60, D_IN = 2 + 18 + 1 };

static int fail(const char *what) {
    fprintf(stderr, "export_gen: %s\n", what);
    return 1;
}

int main(int argc, char **argv) {
    bool dict = argc == 5 && strcmp(argv[1], "dict8") == 0;
    if (argc != 5 || (!dict && strcmp(argv[1], "lstm") != 0 && strcmp(argv[1], "gru") != 0))
        return fail("usage: export_gen lstm|gru|dict8 POLICY.c INPUT ACTIONS");
    calf_error err;
    calf_error_clear(&err);
    int fc[1] = {FC};
    net_spec spec = net_spec_mlp(dict ? D_IN : IN, fc, 1, A, NN_ACT_TANH);
    if (dict) {
        spec.num_segs = 3;
        spec.seg[0] = (net_seg){.offset = 0, .size = 2, .scale = 1.0f};
        spec.seg[1] = (net_seg){.offset = 2, .size = 18, .h = 3, .w = 3, .c = 2,
                                .scale = 1.0f / 255.0f};
        spec.seg[2] = (net_seg){.offset = 20, .size = 1, .scale = 1.0f};
        spec.num_conv = 1;
        spec.conv[0] = (net_conv_spec){.filters = 4, .kernel = 2, .stride = 1, .pad = 1};
    } else {
        spec.core = strcmp(argv[1], "lstm") == 0 ? NET_LSTM : NET_GRU;
        spec.core_hidden = H;
    }
    net n;
    size_t cursor = 0;
    if (net_layout(&n, &spec, &cursor, &err)) return fail(err.msg);
    float *params = calloc(cursor, sizeof *params);
    if (!params) return fail("out of memory");
    calf_rng rng;
    calf_rng_seed(&rng, 7, 0, 0);
    net_init_fan_in(&n, params, &rng);
    /* weights three times PyTorch's default, so that the state carries across steps (and
     * a missed reset shows in the actions) */
    for (size_t i = 0; i < cursor; i++) params[i] *= 3.0f;

    /* the file: export_main.c's macros, then what the writer writes of PPO's words */
    export_c *x = export_c_new(&err);
    bytes_buf text = {0};
    if (!x || export_c_net(x, "actor", &n, params, &err)) return fail(err.msg);
    export_c_body_floats(x, A, NULL, "head", NULL);
    export_c_body(x, "    actor_%s(%sobs, head);\n", dict ? "forward" : "step",
                  dict ? "" : "state, ");
    export_c_masked_argmax_return(x, "head", A);
    export_c_printf(&text,
                    "/* export_gen's %s masked policy */\n"
                    "#define CALF_POLICY_OBS_DIM %d\n#define CALF_POLICY_DISCRETE 1\n"
                    "#define CALF_POLICY_NUM_ACTIONS %d\n#define CALF_POLICY_ACTION_DIM 1\n"
                    "#define CALF_POLICY_MASKED 1\n",
                    argv[1], n.in, A);
    if (!dict) export_c_printf(&text, "#define CALF_POLICY_STATE_SIZE %zu\n", n.state_size);
    if (export_c_write(x, true, &text, "export_gen", &err)) return fail(err.msg);
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(text.data, 1, text.len, f) != text.len || fclose(f) != 0)
        return fail("cannot write the policy file");

    /* the lines, and calf's action on each */
    net_cache c;
    float state[ROWS][16] = {{0}}, y[A];
    float x_in[D_IN]; /* D_IN > IN */
    if (n.state_size > 16 || net_cache_init_seq(&c, &n, 1, 1, &err)) return fail("cache");
    FILE *in = fopen(argv[3], "w"), *out = fopen(argv[4], "w");
    if (!in || !out) return fail("cannot write the lines");
    for (int t = 0; t < STEPS; t++)
        for (int r = 0; r < ROWS; r++) {
            int start = t == 0 || calf_rng_below(&rng, 5) == 0;
            float scale = calf_rng_below(&rng, 8) == 0 ? 100.0f : 3.0f;
            uint8_t mask[A];
            int valid = 0;
            for (int j = 0; j < A; j++) valid += mask[j] = calf_rng_below(&rng, 5) < 3;
            if (!valid) mask[calf_rng_below(&rng, A)] = 1;
            if (!dict) fprintf(in, "%d %d ", r, start);
            for (int i = 0; i < n.in; i++) {
                /* printed %.9g, read back by strtof as the same float; dict8's image bytes */
                x_in[i] = dict && i >= 2 && i < 20
                              ? (float)calf_rng_below(&rng, 256)
                              : scale * (2.0f * calf_rng_uniform_float(&rng) - 1.0f);
                fprintf(in, "%s%.9g", i ? " " : "", (double)x_in[i]);
            }
            for (int j = 0; j < A; j++) fprintf(in, " %d", mask[j]);
            fprintf(in, "\n");
            uint8_t s = (uint8_t)start;
            if (dict) net_forward_v(&n, params, 0, x_in, 1, &c, y);
            else net_step(&n, params, x_in, &s, 1, state[r], &c, y);
            fprintf(out, "%d\n", dist_categorical_mode_masked(y, mask, A));
        }
    if (fclose(in) != 0 || fclose(out) != 0) return fail("cannot write the lines");
    net_cache_free(&c);
    export_c_free(x);
    free(text.data);
    free(params);
    return 0;
}
