/* export.c: `calf export` (calf_export): the greedy policy of a run's checkpoint as one
 * C99 file. The algorithm describes its networks and what runs between them and the
 * action through numerics/export_c.h; this file opens the file with the run's name, the
 * policy's sizes as macros and the comment that says how to use it, and writes it out. */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/mem.h"
#include "calf/train.h"
#include "calf/version.h"
#include "numerics/export_c.h"
#include "tools/play.h"

/* s as text inside a C comment: a path holding the comment's end or a line break must
 * not end it early. Into buf (cap bytes; truncated to fit). */
static const char *comment_safe(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    for (; *s && n + 3 < cap; s++) {
        if (*s == '\n' || *s == '\r') buf[n++] = ' ';
        else if (s[0] == '*' && s[1] == '/') {
            buf[n++] = '*';
            buf[n++] = ' ';
        } else buf[n++] = *s;
    }
    buf[n] = '\0';
    return buf;
}

/* The comment that opens the file, and the macros. */
static void put_head(bytes_buf *b, const play_policy *p, const char *root, int state_size,
                     size_t stack) {
    const calf_env_spec *spec = &p->cls->spec;
    bool discrete = spec->num_actions > 0, multi = spec->num_action_dims > 0;
    const char *fn = state_size ? "calf_policy_step" : "calf_policy_act";
    const char *st = state_size ? "float *state, " : "";
    char rs[4200], ps[4200], es[256];
    export_c_printf(b,
          "/* The greedy policy of a calf run, written by `calf export` (calf %s).\n"
          " *   run:         %s\n"
          " *   checkpoint:  %s (iteration %lld)\n"
          " *   algorithm:   %s on %s\n"
          " *\n",
          calf_version(), comment_safe(root, rs, sizeof rs), comment_safe(p->path, ps, sizeof ps),
          (long long)p->iteration, calf_config_string(&p->cfg, CALF_CFG_ALGORITHM_CTOR), comment_safe(spec->name, es, sizeof es));
    if (state_size)
        export_c_printf(b,
              " * A recurrent policy: each row (each env, each episode being played) keeps its own\n"
              " * state, float state[CALF_POLICY_STATE_SIZE] (the core's h, then c for an LSTM), which\n"
              " * the caller owns and passes to every call.\n"
              " *\n"
              " * void calf_policy_reset(float *state)\n"
              " *   Zeroes a row's state: call it when the row's episode starts (the first one too, and\n"
              " *   after each env reset), as calf play and the trainer do.\n"
              " *\n"
              " * int calf_policy_step(float *state, const float *obs, float *action)\n"
              " *   One step of the row whose state this is: reads and updates state, then acts on obs\n"
              " *   as calf_policy_act does for a policy without memory. Once per env step, in order.\n"
              " *   obs: CALF_POLICY_OBS_DIM floats, as the environment observes them.\n");
    else
        export_c_printf(b,
              " * int calf_policy_act(const float *obs, float *action)\n"
              " *   obs: CALF_POLICY_OBS_DIM floats, as the environment observes them.\n");
    if (multi)
        export_c_printf(b, " *   MultiDiscrete: writes CALF_POLICY_ACTION_DIM sub-actions to action as floats, sub-action d\n"
                 " *   in 0..nvec[d]-1 (CALF_POLICY_ACTION_NVEC), and returns 0.\n");
    else if (discrete)
        export_c_printf(b, " *   Returns the action, 0..CALF_POLICY_NUM_ACTIONS-1, and writes it to action[0] as a float.\n");
    else
        export_c_printf(b,
              " *   Writes CALF_POLICY_ACTION_DIM floats to action and returns 0. They are not clipped:\n"
              " *   calf's environments clip actions to CALF_POLICY_ACTION_LOW..HIGH as they step.\n");
    if (spec->action_mask)
        export_c_printf(b, " *\n"
                 " * int %s_masked(%sconst float *obs, const unsigned char *mask, float *action)\n"
                 " *   The same among the valid actions: mask, CALF_POLICY_NUM_ACTIONS bytes as the env\n"
                 " *   reports them, nonzero where valid (NULL: all valid, %s).\n",
                 fn, st, fn);
    export_c_printf(b,
          " *\n"
          " * It computes what `calf play` computes for obs, operation for operation: discrete\n"
          " * actions are the same, continuous ones the same floats, on every CPU. Compile it with any C99 compiler and link libm (cc -std=c99 -c\n"
          " * policy.c ... -lm), without -ffast-math or anything else that reorders float\n"
          " * arithmetic; the file turns off contraction of a * b + c itself. Either #include\n"
          " * it in one file, or compile it alone and declare %s%s where it is used.\n",
          fn, state_size ? " and calf_policy_reset" : "");
    if (state_size)
        export_c_printf(b,
              " * calf_policy_step keeps no state but the caller's and allocates nothing: its scratch\n"
              " * is on the calling thread's stack (CALF_POLICY_STACK_BYTES, plus a few scalars), so\n"
              " * threads may step different rows at once (one row's state from one thread at a time). */\n");
    else
        export_c_printf(b,
              " * calf_policy_act keeps no state and allocates nothing: its scratch is on the calling\n"
              " * thread's stack (CALF_POLICY_STACK_BYTES, plus a few scalars), so any number of\n"
              " * threads may call it at once. */\n");
    export_c_printf(b,
          "#define CALF_POLICY_OBS_DIM %d\n"
          "#define CALF_POLICY_DISCRETE %d\n"
          "#define CALF_POLICY_CONTINUOUS %d\n",
          spec->obs_dim, discrete, !discrete);
    export_c_printf(b, "#define CALF_POLICY_STACK_BYTES %zu /* arrays on the stack in one call, at most */\n",
                    stack);
    if (state_size)
        export_c_printf(b, "#define CALF_POLICY_STATE_SIZE %d /* floats of state per row */\n",
                        state_size);
    if (spec->action_mask) export_c_printf(b, "#define CALF_POLICY_MASKED 1\n");
    if (multi) {
        export_c_printf(b, "#define CALF_POLICY_NUM_ACTIONS %d /* the sum of the sub-actions' sizes */\n"
                 "#define CALF_POLICY_NUM_ACTION_DIMS %d\n"
                 "#define CALF_POLICY_ACTION_DIM %d /* the floats calf_policy_act writes */\n"
                 "#define CALF_POLICY_ACTION_NVEC {",
              spec->num_actions, spec->num_action_dims, spec->num_action_dims);
        for (int d = 0; d < spec->num_action_dims; d++)
            export_c_printf(b, "%s%d", d ? ", " : "", spec->action_nvec[d]);
        export_c_printf(b, "}\n");
    } else if (discrete) {
        export_c_printf(b, "#define CALF_POLICY_NUM_ACTIONS %d\n"
                 "#define CALF_POLICY_ACTION_DIM 1 /* the floats calf_policy_act writes */\n",
              spec->num_actions);
    } else {
        char num[EXPORT_C_NUM];
        export_c_printf(b, "#define CALF_POLICY_ACTION_DIM %d /* the floats calf_policy_act writes */\n",
              spec->action_dim);
        for (int side = 0; side < 2; side++) {
            const float *v = side ? spec->action_high : spec->action_low;
            export_c_printf(b, "#define CALF_POLICY_ACTION_%s {", side ? "HIGH" : "LOW");
            for (int i = 0; i < spec->action_dim; i++)
                export_c_printf(b, "%s%s", i ? ", " : "", export_c_float(v[i], num));
            export_c_printf(b, "}\n");
        }
    }
    if (state_size) export_c_printf(b, "void calf_policy_reset(float *state);\n");
    export_c_printf(b, "int %s(%sconst float *obs, float *action);\n", fn, st);
    if (spec->action_mask)
        export_c_printf(b, "int %s_masked(%sconst float *obs, const unsigned char *mask, "
                 "float *action);\n", fn, st);
    export_c_printf(b, "\n");
}

static int export_text(const play_policy *p, const char *root, bytes_buf *out, calf_error *err) {
    if (!p->ops->export_c)
        return calf_error_set(err, CALF_EINVAL, "%s cannot be exported (it has no export_c)",
                              calf_config_string(&p->cfg, CALF_CFG_ALGORITHM_CTOR));
    export_c *x = export_c_new(err);
    if (!x) return CALF_ENOMEM;
    int rc = p->ops->export_c(p->algo, x, err);
    if (rc == CALF_OK) {
        put_head(out, p, root, export_c_state_size(x), export_c_stack_bytes(x));
        rc = export_c_write(x, p->cls->spec.action_mask != 0, out, p->path, err);
    }
    export_c_free(x);
    return rc;
}

int calf_export(const calf_export_options *o, calf_error *err) {
    play_policy *p = mem_calloc(1, sizeof *p, err);
    if (!p) return CALF_ENOMEM;
    int rc = play_policy_open(p, o->root_dir, o->checkpoint, err);
    bytes_buf text = {0};
    if (rc == CALF_OK) rc = export_text(p, o->root_dir, &text, err);
    if (rc == CALF_OK) {
        if (!o->output || strcmp(o->output, "-") == 0) {
            FILE *out = o->out ? o->out : stdout;
            if (fwrite(text.data, 1, text.len, out) != text.len || fflush(out) != 0)
                rc = calf_error_set(err, CALF_EIO, "export: cannot write the C file to %s: %s",
                                    o->out ? "the output stream" : "stdout", strerror(errno));
        } else {
            rc = play_write_output(o->output, text.data, text.len, err);
        }
    }
    free(text.data);
    play_policy_close(p);
    free(p);
    return rc;
}
