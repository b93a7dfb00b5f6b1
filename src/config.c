/* config.c: the binding table and a small gin-subset parser.
 * The parser tokenizes the whole file (so tuples may span lines), then reads
 * statements `Scope.param = value` and `include 'file.gin'`. Nothing is executed: a
 * config is data. Every error names file:line. */
#include "calf/config.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { F_NODIGEST = 1 }; /* does not change the training result */

typedef struct binding_row {
    const char *name;
    calf_config_type type;
    const char *def;      /* default, as gin text */
    double min, max;      /* bounds on numbers and tuple elements */
    int tuple_len;        /* > 0: exact tuple length; < 0: at most -tuple_len elements */
    const char *choices;  /* strings: '|'-separated allowed values, or NULL */
    int flags;
    const char *help;
} binding_row;

#define BIG 1e15

/* Keep in calf_binding_id order. */
static const binding_row table[CALF_CFG_NUM_BINDINGS] = {
    {"create_environment.env_name", CALF_CFG_STRING, "'CartPole-v1'", 0, 0, 0, NULL, 0,
     "registered environment to train on (see `calf envs`)"},
    {"create_environment.num_parallel_environments", CALF_CFG_INT, "64", 1, 1 << 20, 0, NULL, 0,
     "environments stepped in parallel by the WHOLE job; split across processes"},
    {"TrainerConfig.random_seed", CALF_CFG_INT, "0", 0, 4.0e18, 0, NULL, 0,
     "seed of every random stream (per env: dynamics, actions, minibatch shuffling)"},
    {"TrainerConfig.num_iterations", CALF_CFG_INT, "1000", 0, 1e12, 0, NULL, F_NODIGEST,
     "training iterations to run (0: no limit, stop on num_env_steps)"},
    {"TrainerConfig.num_env_steps", CALF_CFG_INT, "0", 0, BIG, 0, NULL, F_NODIGEST,
     "stop after this many environment steps of the whole job (0: no limit)"},
    {"TrainerConfig.unroll_length", CALF_CFG_INT, "32", 1, 1 << 20, 0, NULL, 0,
     "steps each environment takes per iteration"},
    {"TrainerConfig.mini_batch_size", CALF_CFG_INT, "512", 1, 1 << 30, 0, NULL, 0,
     "samples per gradient step for the whole job (rounded to a whole number of steps per env)"},
    {"TrainerConfig.num_updates_per_train_iter", CALF_CFG_INT, "4", 1, 10000, 0, NULL, 0,
     "passes (epochs) over each iteration's experience"},
    {"TrainerConfig.num_checkpoints", CALF_CFG_INT, "5", 0, 1e6, 0, NULL, F_NODIGEST,
     "checkpoints spread over the run and kept (plus one at the end)"},
    {"TrainerConfig.evaluate", CALF_CFG_BOOL, "False", 0, 0, 0, NULL, F_NODIGEST,
     "evaluate the greedy policy on separate environments (main process only)"},
    {"TrainerConfig.eval_interval", CALF_CFG_INT, "10", 1, 1e12, 0, NULL, F_NODIGEST,
     "evaluate every this many iterations, and after the last one"},
    {"TrainerConfig.num_eval_episodes", CALF_CFG_INT, "10", 1, 1e6, 0, NULL, F_NODIGEST,
     "episodes per evaluation"},
    {"TrainerConfig.summary_interval", CALF_CFG_INT, "1", 1, 1e12, 0, NULL, F_NODIGEST,
     "write training summaries every this many iterations"},
    {"TrainerConfig.summaries_flush_secs", CALF_CFG_FLOAT, "1.0", 0, 1e6, 0, NULL, F_NODIGEST,
     "flush summary files at least this often (seconds)"},
    {"TrainerConfig.summarize_grads_and_vars", CALF_CFG_BOOL, "False", 0, 0, 0, NULL, F_NODIGEST,
     "write parameter and gradient histograms"},
    {"TrainerConfig.ddp_paras_check_interval", CALF_CFG_INT, "10", 0, 1e12, 0, NULL, F_NODIGEST,
     "compare a digest of parameters and Adam state across processes every this many "
     "iterations (0: never; processes that share memory step one model and skip it)"},
    {"TrainerConfig.collective_timeout_secs", CALF_CFG_FLOAT, "600.0", 0.01, 1e7, 0, NULL,
     F_NODIGEST, "fail a collective whose peers do not arrive within this many seconds"},
    {"PPOLoss.gamma", CALF_CFG_FLOAT, "0.99", 0, 1, 0, NULL, 0, "discount factor"},
    {"PPOLoss.td_lambda", CALF_CFG_FLOAT, "0.95", 0, 1, 0, NULL, 0,
     "GAE lambda"},
    {"PPOLoss.importance_ratio_clipping", CALF_CFG_FLOAT, "0.2", 0, 10, 0, NULL, 0,
     "PPO clipping epsilon of the importance ratio"},
    {"PPOLoss.td_loss_weight", CALF_CFG_FLOAT, "0.5", 0, 1e6, 0, NULL, 0,
     "weight of the value (TD) loss"},
    {"PPOLoss.entropy_regularization", CALF_CFG_FLOAT, "0.0", 0, 1e6, 0, NULL, 0,
     "weight of the entropy bonus"},
    {"PPOLoss.normalize_advantages", CALF_CFG_BOOL, "True", 0, 0, 0, NULL, 0,
     "normalise advantages over each iteration's whole batch"},
    {"Adam.lr", CALF_CFG_FLOAT, "0.001", 0, 10, 0, NULL, 0, "learning rate"},
    {"Adam.betas", CALF_CFG_FLOAT_TUPLE, "(0.9, 0.999)", 0, 0.999999999, 2, NULL, 0,
     "Adam's moment decay rates (beta1, beta2)"},
    {"Adam.eps", CALF_CFG_FLOAT, "1e-5", 0, 1, 0, NULL, 0, "Adam's epsilon"},
    {"Adam.gradient_clipping", CALF_CFG_FLOAT, "0.0", 0, 1e9, 0, NULL, 0,
     "clip the gradient's global norm to this (0: no clipping)"},
    {"ActorDistributionNetwork.fc_layer_params", CALF_CFG_INT_TUPLE, "(64, 64)", 1, 1024, -7,
     NULL, 0, "hidden layer sizes of the policy network"},
    {"ActorDistributionNetwork.activation", CALF_CFG_STRING, "'tanh'", 0, 0, 0, "tanh|relu", 0,
     "hidden activation of the policy network"},
    {"ActorDistributionNetwork.init_log_std", CALF_CFG_FLOAT, "0.0", -20, 5, 0, NULL, 0,
     "initial log standard deviation of continuous actions"},
    {"ValueNetwork.fc_layer_params", CALF_CFG_INT_TUPLE, "(64, 64)", 1, 1024, -7, NULL, 0,
     "hidden layer sizes of the value network"},
    {"ValueNetwork.activation", CALF_CFG_STRING, "'tanh'", 0, 0, 0, "tanh|relu", 0,
     "hidden activation of the value network"},
};

/* ---- tokenizer ------------------------------------------------------------- */

typedef enum { T_EOF, T_NAME, T_INT, T_FLOAT, T_STRING, T_EQ, T_LPAREN, T_RPAREN, T_COMMA,
               T_BAD } tok_kind;

typedef struct token {
    tok_kind kind;
    int line;
    const char *start; /* into the source text */
    size_t len;
} token;

typedef struct lexer {
    const char *p;
    int line;
} lexer;

static int is_name_start(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_name_char(int c) { return is_name_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '/'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }

static token lex_next(lexer *lx) {
    for (;;) {
        char c = *lx->p;
        if (c == '\n') { lx->line++; lx->p++; }
        else if (c == ' ' || c == '\t' || c == '\r') lx->p++;
        else if (c == '\\' && lx->p[1] == '\n') { lx->p += 2; lx->line++; }
        else if (c == '#') { while (*lx->p && *lx->p != '\n') lx->p++; }
        else break;
    }
    token t = {T_EOF, lx->line, lx->p, 0};
    const char *s = lx->p;
    char c = *s;
    if (c == '\0') return t;
    if (c == '=') { t.kind = T_EQ; lx->p++; t.len = 1; return t; }
    if (c == '(') { t.kind = T_LPAREN; lx->p++; t.len = 1; return t; }
    if (c == ')') { t.kind = T_RPAREN; lx->p++; t.len = 1; return t; }
    if (c == ',') { t.kind = T_COMMA; lx->p++; t.len = 1; return t; }
    if (c == '\'' || c == '"') {
        const char *q = s + 1;
        while (*q && *q != c && *q != '\n') q++;
        if (*q != c) { t.kind = T_BAD; t.len = (size_t)(q - s); lx->p = q; return t; }
        t.kind = T_STRING; t.start = s + 1; t.len = (size_t)(q - s - 1);
        lx->p = q + 1;
        return t;
    }
    if (is_name_start((unsigned char)c)) {
        const char *q = s;
        while (is_name_char((unsigned char)*q)) q++;
        t.kind = T_NAME; t.len = (size_t)(q - s); lx->p = q;
        return t;
    }
    if (is_digit((unsigned char)c) || ((c == '-' || c == '+' || c == '.') &&
                                       (is_digit((unsigned char)s[1]) || s[1] == '.'))) {
        const char *q = s;
        if (*q == '-' || *q == '+') q++;
        int is_float = 0;
        while (is_digit((unsigned char)*q) || *q == '.' || *q == 'e' || *q == 'E' || *q == '_' ||
               ((*q == '-' || *q == '+') && (q[-1] == 'e' || q[-1] == 'E'))) {
            if (*q == '.' || *q == 'e' || *q == 'E') is_float = 1;
            q++;
        }
        t.kind = is_float ? T_FLOAT : T_INT; t.len = (size_t)(q - s); lx->p = q;
        return t;
    }
    t.kind = T_BAD; t.len = 1; lx->p++;
    return t;
}

/* ---- parser ---------------------------------------------------------------- */

#define MAX_INCLUDE_DEPTH 16

typedef struct parse_state {
    calf_config *cfg;
    const char *file;        /* name used in messages */
    const char *stack[MAX_INCLUDE_DEPTH]; /* absolute-ish paths being parsed, for cycles */
    int depth;
    lexer lx;
    token tok;               /* current token */
    calf_error *err;
    bool single;             /* exactly one assignment, no include (--conf_param) */
} parse_state;

static void advance(parse_state *ps) { ps->tok = lex_next(&ps->lx); }

static int fail(parse_state *ps, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(parse_state *ps, int line, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return calf_error_set(ps->err, CALF_EINVAL, "%s:%d: %s", ps->file, line, msg);
}

static void tok_text(const token *t, char *buf, size_t cap) {
    size_t n = t->len < cap - 1 ? t->len : cap - 1;
    memcpy(buf, t->start, n);
    buf[n] = '\0';
}

static const char *type_name(calf_config_type t) {
    switch (t) {
    case CALF_CFG_INT: return "int";
    case CALF_CFG_FLOAT: return "float";
    case CALF_CFG_BOOL: return "bool";
    case CALF_CFG_STRING: return "string";
    case CALF_CFG_INT_TUPLE: return "tuple of ints";
    case CALF_CFG_FLOAT_TUPLE: return "tuple of floats";
    }
    return "?";
}

static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 128 || lb > 128) return (size_t)-1;
    size_t prev[129], cur[129];
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof *prev);
    }
    return prev[lb];
}

/* The closest known binding name, matching either the full name or the part after
 * the scope (so `num_iteration` still finds TrainerConfig.num_iterations). */
static const char *closest_binding(const char *name) {
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    const char *dot = strrchr(name, '.');
    const char *param = dot ? dot + 1 : name;
    for (int i = 0; i < CALF_CFG_NUM_BINDINGS; i++) {
        size_t d = edit_distance(name, table[i].name);
        const char *tdot = strrchr(table[i].name, '.');
        size_t dp = edit_distance(param, tdot + 1);
        if (dp < d) d = dp + (dot ? 1 : 0);
        if (d < best_d) { best_d = d; best = table[i].name; }
    }
    size_t limit = strlen(param) / 3 + 1;
    return best_d <= (limit < 2 ? 2 : limit) ? best : NULL;
}

static int parse_number(parse_state *ps, const token *t, calf_config_type want, int64_t *iv, double *fv,
                        const char *bname) {
    char buf[128], clean[128];
    if (t->len >= sizeof buf)
        return fail(ps, t->line, "'%s': number too long (%zu characters)", bname, t->len);
    tok_text(t, buf, sizeof buf);
    size_t k = 0;
    for (size_t i = 0; buf[i] && k < sizeof clean - 1; i++)
        if (buf[i] != '_') clean[k++] = buf[i];
    clean[k] = '\0';
    char *end = NULL;
    errno = 0;
    if (want == CALF_CFG_INT || want == CALF_CFG_INT_TUPLE) {
        if (t->kind != T_INT)
            return fail(ps, t->line, "'%s' expects an int, got '%s'", bname, buf);
        long long v = strtoll(clean, &end, 10);
        if (errno == ERANGE || *end != '\0')
            return fail(ps, t->line, "'%s': bad int '%s'", bname, buf);
        *iv = v;
        return CALF_OK;
    }
    double v = strtod(clean, &end);
    if (errno == ERANGE || *end != '\0' || !isfinite(v))
        return fail(ps, t->line, "'%s': bad number '%s'", bname, buf);
    *fv = v;
    return CALF_OK;
}

static int check_bounds(parse_state *ps, int line, const binding_row *row, double v) {
    if (v < row->min || v > row->max) {
        return fail(ps, line, "'%s': value %.17g out of bounds [%.15g, %.15g]", row->name, v,
                    row->min, row->max);
    }
    return CALF_OK;
}

/* Parse the value at the current token into a binding of `row`'s type. */
static int parse_value(parse_state *ps, const binding_row *row, calf_config_value *out) {
    token t = ps->tok;
    char buf[300];
    tok_text(&t, buf, sizeof buf);
    switch (row->type) {
    case CALF_CFG_INT:
    case CALF_CFG_FLOAT: {
        if (t.kind != T_INT && t.kind != T_FLOAT)
            return fail(ps, t.line, "'%s' expects a number, got '%s'", row->name, buf);
        int64_t iv = 0;
        double fv = 0;
        int rc = parse_number(ps, &t, row->type, &iv, &fv, row->name);
        if (rc) return rc;
        if (row->type == CALF_CFG_INT) {
            if ((rc = check_bounds(ps, t.line, row, (double)iv))) return rc;
            out->i = iv;
        } else {
            if ((rc = check_bounds(ps, t.line, row, fv))) return rc;
            out->f = fv;
        }
        advance(ps);
        return CALF_OK;
    }
    case CALF_CFG_BOOL:
        if (t.kind == T_NAME && strcmp(buf, "True") == 0) out->i = 1;
        else if (t.kind == T_NAME && strcmp(buf, "False") == 0) out->i = 0;
        else return fail(ps, t.line, "'%s' expects True or False, got '%s'", row->name, buf);
        advance(ps);
        return CALF_OK;
    case CALF_CFG_STRING:
        if (t.kind != T_STRING)
            return fail(ps, t.line, "'%s' expects a quoted string, got '%s'", row->name, buf);
        if (t.len >= CALF_CFG_MAX_STRING)
            return fail(ps, t.line, "'%s': string too long", row->name);
        if (row->choices) {
            /* exact match against one of the '|'-separated choices */
            const char *c = row->choices;
            int ok = 0;
            while (*c) {
                const char *bar = strchr(c, '|');
                size_t n = bar ? (size_t)(bar - c) : strlen(c);
                if (n == t.len && strncmp(c, t.start, n) == 0) ok = 1;
                c += n + (bar ? 1 : 0);
            }
            if (!ok)
                return fail(ps, t.line, "'%s' must be one of %s, got '%s'", row->name, row->choices, buf);
        }
        memcpy(out->s, t.start, t.len);
        out->s[t.len] = '\0';
        advance(ps);
        return CALF_OK;
    case CALF_CFG_INT_TUPLE:
    case CALF_CFG_FLOAT_TUPLE: {
        if (t.kind != T_LPAREN)
            return fail(ps, t.line, "'%s' expects a tuple like (64, 64), got '%s'", row->name, buf);
        advance(ps);
        int n = 0;
        while (ps->tok.kind != T_RPAREN) {
            token e = ps->tok;
            if (e.kind != T_INT && e.kind != T_FLOAT) {
                tok_text(&e, buf, sizeof buf);
                return fail(ps, e.line, "'%s': expected a number in the tuple, got '%s'", row->name,
                            e.kind == T_EOF ? "end of file" : buf);
            }
            if (n == CALF_CFG_MAX_TUPLE)
                return fail(ps, e.line, "'%s': tuple too long", row->name);
            int64_t iv = 0;
            double fv = 0;
            int rc = parse_number(ps, &e, row->type, &iv, &fv, row->name);
            if (rc) return rc;
            if ((rc = check_bounds(ps, e.line, row, row->type == CALF_CFG_INT_TUPLE ? (double)iv : fv)))
                return rc;
            out->ti[n] = iv;
            out->tf[n] = fv;
            n++;
            advance(ps);
            if (ps->tok.kind == T_COMMA) advance(ps);
            else if (ps->tok.kind != T_RPAREN) {
                tok_text(&ps->tok, buf, sizeof buf);
                return fail(ps, ps->tok.line, "'%s': expected ',' or ')' in the tuple, got '%s'",
                            row->name, ps->tok.kind == T_EOF ? "end of file" : buf);
            }
        }
        if (row->tuple_len < 0 && n > -row->tuple_len)
            return fail(ps, t.line, "'%s' takes at most %d elements, got %d", row->name,
                        -row->tuple_len, n);
        if (row->tuple_len > 0 && n != row->tuple_len)
            return fail(ps, t.line, "'%s' expects a tuple of %d elements, got %d", row->name,
                        row->tuple_len, n);
        out->n = n;
        advance(ps);
        return CALF_OK;
    }
    }
    return CALF_EINVAL;
}

static int parse_text(parse_state *ps, const char *text);

static int read_file(const char *path, char **out, calf_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return calf_error_set(err, CALF_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = calf_xmalloc(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) {
            if (cap > ((size_t)16 << 20)) {
                free(buf);
                fclose(f);
                return calf_error_set(err, CALF_EINVAL, "%s: config file too large", path);
            }
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return calf_error_set(err, CALF_ENOMEM, "%s: out of memory", path); }
            buf = nb;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); return calf_error_set(err, CALF_EIO, "%s: read error", path); }
    if (memchr(buf, '\0', len)) {
        free(buf);
        return calf_error_set(err, CALF_EINVAL, "%s: not a text file (contains NUL bytes)", path);
    }
    buf[len] = '\0';
    *out = buf;
    return CALF_OK;
}

/* `include 'x.gin'` resolves relative to the including file's directory. False when the
 * path does not fit in out: a cut path could name another file that exists. */
static bool resolve_include(const char *including, const char *name, char *out, size_t cap) {
    const char *slash = strrchr(including, '/');
    int n;
    if (name[0] == '/' || !slash) n = snprintf(out, cap, "%s", name);
    else n = snprintf(out, cap, "%.*s/%s", (int)(slash - including), including, name);
    return n >= 0 && (size_t)n < cap;
}

static int parse_file_at(parse_state *parent, calf_config *cfg, const char *path, int include_line,
                         calf_error *err) {
    parse_state ps;
    memset(&ps, 0, sizeof ps);
    ps.cfg = cfg;
    ps.err = err;
    ps.file = path;
    if (parent) {
        if (parent->depth >= MAX_INCLUDE_DEPTH)
            return calf_error_set(err, CALF_EINVAL, "%s:%d: includes nested too deeply",
                                  parent->file, include_line);
        char rp[4096], rq[4096];
        const char *me = realpath(path, rp) ? rp : path;
        for (int i = 0; i < parent->depth; i++) {
            const char *other = realpath(parent->stack[i], rq) ? rq : parent->stack[i];
            if (strcmp(me, other) == 0)
                return calf_error_set(err, CALF_EINVAL, "%s:%d: include cycle: '%s' includes itself",
                                      parent->file, include_line, path);
        }
        memcpy(ps.stack, parent->stack, sizeof ps.stack);
        ps.depth = parent->depth;
    }
    ps.stack[ps.depth++] = path;
    char *text = NULL;
    calf_error ferr;
    int rc = read_file(path, &text, &ferr);
    if (rc) {
        if (parent)
            return calf_error_set(err, rc, "%s:%d: cannot include: %s", parent->file,
                                  include_line, ferr.msg);
        return calf_error_set(err, rc, "%s", ferr.msg);
    }
    rc = parse_text(&ps, text);
    free(text);
    return rc;
}

static int parse_text(parse_state *ps, const char *text) {
    ps->lx.p = text;
    ps->lx.line = 1;
    advance(ps);
    char name[300];
    while (ps->tok.kind != T_EOF) {
        token t = ps->tok;
        tok_text(&t, name, sizeof name);
        if (t.kind != T_NAME)
            return fail(ps, t.line, "expected 'Scope.param = value', got '%s'", name);
        if (ps->single && strcmp(name, "include") == 0)
            return fail(ps, t.line, "include is not allowed here: expected 'Scope.param=value'");
        if (strcmp(name, "include") == 0) {
            advance(ps);
            if (ps->tok.kind != T_STRING)
                return fail(ps, t.line, "include expects a quoted file name");
            char inc[300], path[4096];
            if (ps->tok.len >= sizeof inc)
                return fail(ps, t.line, "include name too long (%zu characters, at most %zu)",
                            ps->tok.len, sizeof inc - 1);
            tok_text(&ps->tok, inc, sizeof inc);
            if (!resolve_include(ps->file, inc, path, sizeof path))
                return fail(ps, t.line, "include path too long: '%s'", inc);
            int rc = parse_file_at(ps, ps->cfg, path, t.line, ps->err);
            if (rc) return rc;
            advance(ps);
            continue;
        }
        if (strcmp(name, "import") == 0 || strcmp(name, "from") == 0)
            return fail(ps, t.line, "'%s' is not supported: a calf config is data, not code", name);
        advance(ps);
        if (ps->tok.kind != T_EQ) {
            char got[64];
            tok_text(&ps->tok, got, sizeof got);
            return fail(ps, ps->tok.line, "expected '=' after '%s', got '%s'", name,
                        ps->tok.kind == T_EOF ? "end of file" : got);
        }
        int id = calf_binding_find(name);
        if (id < 0) {
            if (!strchr(name, '.'))
                return fail(ps, t.line, "'%s' is not a binding: expected 'Scope.param'", name);
            const char *near = closest_binding(name);
            if (near)
                return fail(ps, t.line, "unknown binding '%s' (did you mean '%s'?)", name, near);
            return fail(ps, t.line, "unknown binding '%s' (see calf train --list-bindings)", name);
        }
        advance(ps);
        if (ps->tok.kind == T_BAD && ps->tok.start[0] == '@')
            return fail(ps, ps->tok.line,
                        "'%s': references (@name) are not supported: a calf config is data", name);
        if (ps->tok.kind == T_EOF)
            return fail(ps, ps->tok.line, "missing value for '%s'", name);
        if (ps->tok.kind == T_BAD) {
            char got[64];
            tok_text(&ps->tok, got, sizeof got);
            return fail(ps, ps->tok.line, "'%s': cannot read value starting at '%s'", name, got);
        }
        calf_config_value v = ps->cfg->values[id];
        int rc = parse_value(ps, &table[id], &v);
        if (rc) return rc;
        ps->cfg->values[id] = v;
        if (ps->single)
            snprintf(ps->cfg->origin[id], sizeof ps->cfg->origin[id], "%s", ps->file);
        else
            snprintf(ps->cfg->origin[id], sizeof ps->cfg->origin[id], "%s:%d", ps->file, t.line);
        if (ps->single && ps->tok.kind != T_EOF)
            return fail(ps, ps->tok.line, "expected one 'Scope.param=value', found more after the value");
    }
    return CALF_OK;
}

/* ---- public ---------------------------------------------------------------- */

void calf_config_init(calf_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < CALF_CFG_NUM_BINDINGS; i++) {
        parse_state ps;
        memset(&ps, 0, sizeof ps);
        calf_error err;
        ps.cfg = cfg;
        ps.err = &err;
        ps.file = "<defaults>";
        ps.lx.p = table[i].def;
        ps.lx.line = 1;
        advance(&ps);
        if (parse_value(&ps, &table[i], &cfg->values[i]) != CALF_OK)
            calf_panic(__FILE__, __LINE__, "bad default for %s: %s", table[i].name, err.msg);
        cfg->origin[i][0] = '\0';
    }
}

int calf_config_parse_file(calf_config *cfg, const char *path, calf_error *err) {
    return parse_file_at(NULL, cfg, path, 0, err);
}

int calf_config_parse_string(calf_config *cfg, const char *text, const char *origin, calf_error *err) {
    parse_state ps;
    memset(&ps, 0, sizeof ps);
    ps.cfg = cfg;
    ps.err = err;
    ps.file = origin;
    ps.stack[ps.depth++] = origin;
    return parse_text(&ps, text);
}

int calf_config_apply_param(calf_config *cfg, const char *assignment, calf_error *err) {
    if (!strchr(assignment, '='))
        return calf_error_set(err, CALF_EINVAL,
                              "--conf_param '%s': expected 'Scope.param=value'", assignment);
    calf_error perr;
    parse_state ps;
    memset(&ps, 0, sizeof ps);
    ps.cfg = cfg;
    ps.err = &perr;
    ps.file = "--conf_param";
    ps.single = true;
    ps.stack[ps.depth++] = ps.file;
    int rc = parse_text(&ps, assignment);
    if (rc) {
        /* replace the parser's "--conf_param:1: " prefix by the argument itself */
        const char *p = strstr(perr.msg, ": ");
        return calf_error_set(err, rc, "--conf_param '%s': %s", assignment, p ? p + 2 : perr.msg);
    }
    return CALF_OK;
}

int calf_config_validate(const calf_config *cfg, calf_error *err) {
    int64_t iters = calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS);
    int64_t steps = calf_config_int(cfg, CALF_CFG_NUM_ENV_STEPS);
    if (iters == 0 && steps == 0)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: TrainerConfig.num_iterations and TrainerConfig.num_env_steps are "
                              "both 0: the run would never stop",
                              cfg->origin[CALF_CFG_NUM_ITERATIONS][0] ? cfg->origin[CALF_CFG_NUM_ITERATIONS]
                                                                 : "config");
    /* the rollout is held in memory: keep it (and every index into it) well in range */
    int64_t samples = calf_config_int(cfg, CALF_CFG_NUM_ENVS) * calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH);
    if (samples > ((int64_t)1 << 22))
        return calf_error_set(err, CALF_EINVAL,
                              "create_environment.num_parallel_environments x "
                              "TrainerConfig.unroll_length = %lld samples per iteration, more than "
                              "the %d calf holds in memory",
                              (long long)samples, 1 << 22);
    return CALF_OK;
}

const calf_config_value *calf_config_get(const calf_config *cfg, calf_binding_id id) {
    CALF_ASSERT(id >= 0 && id < CALF_CFG_NUM_BINDINGS);
    return &cfg->values[id];
}

int64_t calf_config_int(const calf_config *cfg, calf_binding_id id) {
    CALF_ASSERT(table[id].type == CALF_CFG_INT || table[id].type == CALF_CFG_BOOL);
    return cfg->values[id].i;
}

double calf_config_float(const calf_config *cfg, calf_binding_id id) {
    CALF_ASSERT(table[id].type == CALF_CFG_FLOAT);
    return cfg->values[id].f;
}

bool calf_config_bool(const calf_config *cfg, calf_binding_id id) {
    CALF_ASSERT(table[id].type == CALF_CFG_BOOL);
    return cfg->values[id].i != 0;
}

const char *calf_config_string(const calf_config *cfg, calf_binding_id id) {
    CALF_ASSERT(table[id].type == CALF_CFG_STRING);
    return cfg->values[id].s;
}

const char *calf_binding_name(calf_binding_id id) { return table[id].name; }
calf_config_type calf_binding_type(calf_binding_id id) { return table[id].type; }
const char *calf_binding_help(calf_binding_id id) { return table[id].help; }

int calf_binding_find(const char *name) {
    for (int i = 0; i < CALF_CFG_NUM_BINDINGS; i++)
        if (strcmp(table[i].name, name) == 0) return i;
    return -1;
}

static void format_value(const calf_config_value *v, calf_config_type type, char *buf, size_t cap) {
    size_t off = 0;
    switch (type) {
    case CALF_CFG_INT: snprintf(buf, cap, "%lld", (long long)v->i); break;
    case CALF_CFG_FLOAT: snprintf(buf, cap, "%.17g", v->f);
        /* keep it a float literal so re-parsing keeps the type obvious */
        if (!strpbrk(buf, ".eEn")) { size_t n = strlen(buf); if (n + 2 < cap) memcpy(buf + n, ".0", 3); }
        break;
    case CALF_CFG_BOOL: snprintf(buf, cap, "%s", v->i ? "True" : "False"); break;
    case CALF_CFG_STRING: snprintf(buf, cap, "'%s'", v->s); break;
    case CALF_CFG_INT_TUPLE:
    case CALF_CFG_FLOAT_TUPLE:
        off += (size_t)snprintf(buf + off, cap - off, "(");
        for (int k = 0; k < v->n && off < cap; k++) {
            if (type == CALF_CFG_INT_TUPLE)
                off += (size_t)snprintf(buf + off, cap - off, "%s%lld", k ? ", " : "", (long long)v->ti[k]);
            else
                off += (size_t)snprintf(buf + off, cap - off, "%s%.17g", k ? ", " : "", v->tf[k]);
        }
        if (off < cap) snprintf(buf + off, cap - off, v->n == 1 ? ",)" : ")");
        break;
    }
}

void calf_config_format_value(const calf_config *cfg, calf_binding_id id, char *buf, size_t cap) {
    format_value(&cfg->values[id], table[id].type, buf, cap);
}

void calf_config_list_bindings(FILE *out) {
    for (int i = 0; i < CALF_CFG_NUM_BINDINGS; i++) {
        const binding_row *r = &table[i];
        char bounds[128] = "";
        if (r->type == CALF_CFG_INT || r->type == CALF_CFG_FLOAT || r->type == CALF_CFG_INT_TUPLE ||
            r->type == CALF_CFG_FLOAT_TUPLE)
            snprintf(bounds, sizeof bounds, " in [%.10g, %.10g]", r->min, r->max);
        else if (r->choices)
            snprintf(bounds, sizeof bounds, " one of %s", r->choices);
        fprintf(out, "%s\n    %s%s, default %s\n    %s\n", r->name, type_name(r->type), bounds,
                r->def, r->help);
    }
}

int calf_config_write(const calf_config *cfg, FILE *out, const char *header) {
    if (header) {
        const char *p = header;
        while (*p) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            fprintf(out, "# %.*s\n", (int)n, p);
            p += n + (nl ? 1 : 0);
        }
        fputc('\n', out);
    }
    char scope[128] = "";
    for (int i = 0; i < CALF_CFG_NUM_BINDINGS; i++) {
        const char *dot = strrchr(table[i].name, '.');
        size_t sl = (size_t)(dot - table[i].name);
        if (strlen(scope) != sl || strncmp(scope, table[i].name, sl) != 0) {
            if (i) fputc('\n', out);
            snprintf(scope, sizeof scope, "%.*s", (int)sl, table[i].name);
        }
        char val[700];
        format_value(&cfg->values[i], table[i].type, val, sizeof val);
        fprintf(out, "%s = %s", table[i].name, val);
        if (cfg->origin[i][0]) fprintf(out, "  # %s", cfg->origin[i]);
        fputc('\n', out);
    }
    return ferror(out) ? CALF_EIO : CALF_OK;
}

uint64_t calf_config_digest(const calf_config *cfg) {
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over "name=value\n" */
    for (int i = 0; i < CALF_CFG_NUM_BINDINGS; i++) {
        if (table[i].flags & F_NODIGEST) continue;
        char val[700];
        format_value(&cfg->values[i], table[i].type, val, sizeof val);
        const char *parts[3] = {table[i].name, "=", val};
        for (int k = 0; k < 3; k++)
            for (const unsigned char *p = (const unsigned char *)parts[k]; *p; p++)
                h = (h ^ *p) * 0x100000001b3ULL;
        h = (h ^ '\n') * 0x100000001b3ULL;
    }
    return h;
}

int calf_split(int num_envs, int num_processes, int rank, int *begin, int *count, calf_error *err) {
    if (num_processes < 1 || num_envs < 1)
        return calf_error_set(err, CALF_EINVAL, "cannot split %d environments over %d processes",
                              num_envs, num_processes);
    if (num_processes > num_envs)
        return calf_error_set(err, CALF_EINVAL,
                              "%d processes but only %d environments "
                              "(create_environment.num_parallel_environments): each process needs "
                              "at least one",
                              num_processes, num_envs);
    if (rank < 0 || rank >= num_processes)
        return calf_error_set(err, CALF_EINVAL, "rank %d out of range [0, %d)", rank, num_processes);
    int base = num_envs / num_processes, extra = num_envs % num_processes;
    /* the first `extra` processes take one more env */
    *begin = rank * base + (rank < extra ? rank : extra);
    *count = base + (rank < extra ? 1 : 0);
    return CALF_OK;
}
