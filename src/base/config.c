/* config.c: the binding table and a small gin-subset parser.
 * The table is the public rows (include/calf/config.h) and the rows added from above as
 * data (config_algorithms, base/config.h: every algorithm's own). The parser tokenizes
 * the whole file (so tuples may span lines), then reads statements `Scope.param = value`,
 * `MACRO = value`, `include 'file.gin'` and ALF's imports. Nothing is executed: a config
 * is data. Every error names file:line. */
#include "calf/config.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/config.h"
#include "base/mem.h"

/* The public rows by id (CALF_CFG_<ID>). */
static const config_row public_rows[CALF_CFG_NUM_BINDINGS] = {CALF_BINDINGS(CONFIG_ROW)};
#define COUNT_ROW_(...) +1
enum { NUM_TRAINER_ROWS = 0 CALF_BINDINGS_TRAINER(COUNT_ROW_) };
#undef COUNT_ROW_

/* The algorithms' rows follow the public ones: config_algorithms (base/config.h). */
static const config_extension *const added = &config_algorithms;

static int num_rows(void) { return CALF_CFG_NUM_BINDINGS + added->num_rows; }

/* Row `id`, public or added. */
static const config_row *row_at(int id) {
    return id < CALF_CFG_NUM_BINDINGS ? &public_rows[id] : &added->rows[id - CALF_CFG_NUM_BINDINGS];
}

/* The id of the k-th row in the order of the dump, --list-bindings, the digest and name
 * suggestions: what the run is (CALF_BINDINGS_TRAINER), each algorithm's own rows, the
 * parts algorithms are built from (CALF_BINDINGS_SHARED). */
static int ordered(int k) {
    if (k < NUM_TRAINER_ROWS) return k;
    if (k < NUM_TRAINER_ROWS + added->num_rows) return CALF_CFG_NUM_BINDINGS + k - NUM_TRAINER_ROWS;
    return k - added->num_rows;
}

/* The choice (algorithm) whose own row `id` is; NULL for a public row. */
static const config_choice *owner_of(int id) {
    int first = CALF_CFG_NUM_BINDINGS;
    for (int k = 0; k < added->num_choices; k++) {
        const config_choice *c = &added->choices[k];
        if (id < first + c->num_rows) return id >= first ? c : NULL;
        first += c->num_rows;
    }
    return NULL;
}

/* A row's allowed values. A REF row refers to an implementation added from above, and
 * calf's one kind of reference names an algorithm: its choices are the added names. */
static const char *row_choices(const config_row *r) {
    return r->type == CALF_CFG_REF ? added->names : r->choices;
}

/* ---- tokenizer ------------------------------------------------------------- */

typedef enum { T_EOF, T_NAME, T_INT, T_FLOAT, T_STRING, T_REF, T_MACRO, T_EQ, T_LPAREN,
               T_RPAREN, T_COMMA, T_BAD } tok_kind;

typedef struct token {
    tok_kind kind;
    int line;
    const char *start; /* into the source text; T_REF and T_MACRO include their '@' or '%' */
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
    if (is_name_start((unsigned char)c) ||
        ((c == '@' || c == '%') && is_name_start((unsigned char)s[1]))) {
        const char *q = s + (c == '@' || c == '%');
        while (is_name_char((unsigned char)*q)) q++;
        t.kind = c == '@' ? T_REF : c == '%' ? T_MACRO : T_NAME;
        t.len = (size_t)(q - s);
        lx->p = q;
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
        t.kind = is_float ? T_FLOAT : T_INT;
        /* 0x10, 1k, 2.5f: calf's numbers are decimal; the whole word is one bad token,
         * not a number and then a name that starts the next statement */
        if (is_name_char((unsigned char)*q)) {
            while (is_name_char((unsigned char)*q)) q++;
            t.kind = T_BAD;
        }
        t.len = (size_t)(q - s); lx->p = q;
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
    /* While the text of a macro is read in place of its `%NAME`: the macro, and the
     * lexer to go back to after the text's last token. */
    const config_macro *macro;
    lexer outer;
} parse_state;

static void advance(parse_state *ps) {
    ps->tok = lex_next(&ps->lx);
    if (ps->tok.kind == T_EOF && ps->macro) {
        ps->lx = ps->outer;
        ps->macro = NULL;
        ps->tok = lex_next(&ps->lx);
    }
}

static int fail(parse_state *ps, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(parse_state *ps, int line, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ps->macro)
        return calf_error_set(ps->err, CALF_EINVAL, "%s:%d: %s (in %%%s, defined at %s)", ps->file,
                              line, msg, ps->macro->name, ps->macro->origin);
    return calf_error_set(ps->err, CALF_EINVAL, "%s:%d: %s", ps->file, line, msg);
}

/* The origin of a statement at `line`, as recorded in cfg. */
static void where(const parse_state *ps, int line, char *buf, size_t cap) {
    if (ps->single) snprintf(buf, cap, "%s", ps->file);
    else snprintf(buf, cap, "%s:%d", ps->file, line);
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
    case CALF_CFG_REF: return "reference";
    case CALF_CFG_CONV_LAYERS: return "tuple of (filters, kernel, stride[, padding]) tuples";
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

/* How far a suggestion may be from what was written: about a third of its length. */
static bool close_enough(size_t d, const char *written) {
    size_t limit = strlen(written) / 3 + 1;
    return d <= (limit < 2 ? 2 : limit);
}

/* The closest known binding name, matching either the full name or the part after
 * the scope (so `num_iteration` still finds TrainerConfig.num_iterations); between
 * equally close ones, the closer full name (so `actr/Adam.lr` finds actor/Adam.lr). */
static const char *closest_binding(const char *name) {
    const char *best = NULL;
    size_t best_d = (size_t)-1, best_full = (size_t)-1;
    const char *dot = strrchr(name, '.');
    const char *param = dot ? dot + 1 : name;
    for (int k = 0, n = num_rows(); k < n; k++) {
        int i = ordered(k);
        size_t full = edit_distance(name, row_at(i)->name), d = full;
        const char *tdot = strrchr(row_at(i)->name, '.');
        size_t dp = edit_distance(param, tdot + 1);
        if (dp < d) d = dp + (dot ? 1 : 0);
        if (d < best_d || (d == best_d && full < best_full)) {
            best_d = d;
            best_full = full;
            best = row_at(i)->name;
        }
    }
    return close_enough(best_d, param) ? best : NULL;
}

/* Whether `s` (n bytes) is one of the '|'-separated `choices`. */
static bool in_choices(const char *choices, const char *s, size_t n) {
    const char *c = choices;
    while (*c) {
        const char *bar = strchr(c, '|');
        size_t cn = bar ? (size_t)(bar - c) : strlen(c);
        if (cn == n && strncmp(c, s, n) == 0) return true;
        c += cn + (bar ? 1 : 0);
    }
    return false;
}

/* The choice closest to `name`, or to its last part after a module path or scope
 * (`alf.algorithms.SacAlgorithm`), into out; false when none is close. */
static bool closest_choice(const char *choices, const char *name, char *out, size_t cap) {
    const char *tail = name;
    for (const char *p = name; *p; p++)
        if (*p == '.' || *p == '/') tail = p + 1;
    size_t best_d = (size_t)-1;
    const char *c = choices;
    while (*c) {
        const char *bar = strchr(c, '|');
        size_t cn = bar ? (size_t)(bar - c) : strlen(c);
        char one[128];
        snprintf(one, sizeof one, "%.*s", (int)cn, c);
        size_t d = edit_distance(name, one), dt = edit_distance(tail, one);
        if (tail != name && dt + 1 < d) d = dt + 1;
        if (d < best_d) { best_d = d; snprintf(out, cap, "%s", one); }
        c += cn + (bar ? 1 : 0);
    }
    return close_enough(best_d, tail);
}

static config_macro *find_macro(calf_config *cfg, const char *name) {
    for (int i = 0; i < cfg->num_macros; i++)
        if (strcmp(cfg->macros[i].name, name) == 0) return &cfg->macros[i];
    return NULL;
}

static int undefined_macro(parse_state *ps, int line, const char *name) {
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (int i = 0; i < ps->cfg->num_macros; i++) {
        size_t d = edit_distance(name, ps->cfg->macros[i].name);
        if (d < best_d) { best_d = d; best = ps->cfg->macros[i].name; }
    }
    if (best && close_enough(best_d, name))
        return fail(ps, line, "undefined macro '%%%s' (did you mean '%%%s'?)", name, best);
    return fail(ps, line, "undefined macro '%%%s' (define it before its use: %s = value)", name, name);
}

/* At `%NAME`, go on with the macro's text in place of the token. The text is one line
 * and its tokens take the line of the use, so errors name where it was used. */
static int expand_macro(parse_state *ps) {
    if (ps->tok.kind != T_MACRO) return CALF_OK;
    CALF_ASSERT(!ps->macro); /* a macro's text holds no %NAME: define_macro replaced them */
    token t = ps->tok;
    char name[300];
    tok_text(&t, name, sizeof name);
    config_macro *m = find_macro(ps->cfg, name + 1);
    if (!m) return undefined_macro(ps, t.line, name + 1);
    if (!m->used_at[0]) where(ps, t.line, m->used_at, sizeof m->used_at);
    ps->outer = ps->lx;
    ps->lx.p = m->text;
    ps->lx.line = t.line;
    ps->macro = m;
    ps->tok = lex_next(&ps->lx);
    return CALF_OK;
}

/* gin's `@Name()` calls the configurable and passes its result; calf's references name
 * an implementation and are never called. `what` is the binding or macro written to. */
static int ref_call_error(parse_state *ps, int line, const char *what, const char *ref) {
    return fail(ps, line, "%s: write '%s', not '%s()': calf takes the reference, it calls nothing",
                what, ref, ref);
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

static int check_bounds(parse_state *ps, int line, const config_row *row, double v) {
    if (v < row->min || v > row->max) {
        return fail(ps, line, "'%s': value %.17g out of bounds [%.15g, %.15g]", row->name, v,
                    row->min, row->max);
    }
    return CALF_OK;
}

/* `@Name`, one of the row's choices; stored without the '@'. */
static int parse_ref(parse_state *ps, const config_row *row, config_value *out) {
    token t = ps->tok;
    char buf[300];
    tok_text(&t, buf, sizeof buf);
    const char *choices = row_choices(row);
    int first = (int)strcspn(choices, "|");
    if (t.kind != T_REF)
        return fail(ps, t.line, "'%s' expects a reference like @%.*s, got %s'%s'", row->name, first,
                    choices, t.kind == T_STRING ? "the string " : "", buf);
    const char *name = buf + 1;
    if (t.len >= sizeof buf || !in_choices(choices, name, strlen(name))) {
        char near[128];
        if (closest_choice(choices, name, near, sizeof near))
            return fail(ps, t.line, "unknown reference '%s' for '%s' (did you mean '@%s'?)", buf,
                        row->name, near);
        char known[300];
        size_t k = 0;
        for (const char *c = choices; *c && k + 4 < sizeof known; c++) {
            if (c == choices) known[k++] = '@';
            if (*c == '|') { memcpy(known + k, ", @", 3); k += 3; }
            else known[k++] = *c;
        }
        known[k] = '\0';
        return fail(ps, t.line, "unknown reference '%s' for '%s' (known: %s)", buf, row->name, known);
    }
    size_t n = strlen(name);
    CALF_ASSERT(n < sizeof out->s); /* it is one of the choices */
    memcpy(out->s, name, n + 1);
    advance(ps);
    if (ps->tok.kind == T_LPAREN) {
        char what[300];
        snprintf(what, sizeof what, "'%s'", row->name);
        return ref_call_error(ps, t.line, what, buf);
    }
    return CALF_OK;
}

/* One inner tuple of a CONV_LAYERS value, `(filters, kernel, stride[, padding])`, at the
 * current token, into v[0..3] (padding 0 when left out). */
static int parse_conv_layer(parse_state *ps, const config_row *row, int layer, int64_t *v) {
    char buf[300];
    token t = ps->tok;
    tok_text(&t, buf, sizeof buf);
    if (t.kind != T_LPAREN)
        return fail(ps, t.line, "'%s': layer %d expects (filters, kernel, stride[, padding]), got "
                    "'%s'", row->name, layer, t.kind == T_EOF ? "end of file" : buf);
    advance(ps);
    int n = 0;
    v[3] = 0;
    while (ps->tok.kind != T_RPAREN) {
        token e = ps->tok;
        tok_text(&e, buf, sizeof buf);
        if (e.kind != T_INT)
            return fail(ps, e.line, "'%s': layer %d: expected an int, got '%s'", row->name, layer,
                        e.kind == T_EOF ? "end of file" : buf);
        if (n == 4)
            return fail(ps, e.line, "'%s': layer %d has more than 4 numbers (filters, kernel, "
                        "stride, padding)", row->name, layer);
        int64_t iv = 0;
        double fv = 0;
        int rc = parse_number(ps, &e, CALF_CFG_INT, &iv, &fv, row->name);
        if (rc) return rc;
        double lo = n == 3 ? 0 : row->min;
        static const char *const what[4] = {"filters", "kernel", "stride", "padding"};
        if ((double)iv < lo || (double)iv > row->max)
            return fail(ps, e.line, "'%s': layer %d's %s %lld out of bounds [%.15g, %.15g]",
                        row->name, layer, what[n], (long long)iv, lo, row->max);
        v[n++] = iv;
        advance(ps);
        if (ps->tok.kind == T_COMMA) advance(ps);
        else if (ps->tok.kind != T_RPAREN) {
            tok_text(&ps->tok, buf, sizeof buf);
            return fail(ps, ps->tok.line, "'%s': layer %d: expected ',' or ')', got '%s'", row->name,
                        layer, ps->tok.kind == T_EOF ? "end of file" : buf);
        }
    }
    if (n < 3)
        return fail(ps, t.line, "'%s': layer %d has %d numbers; it needs (filters, kernel, "
                    "stride[, padding])", row->name, layer, n);
    advance(ps);
    return CALF_OK;
}

/* ALF's conv_layer_params: `((filters, kernel, stride[, padding]), ...)` or `()`. */
static int parse_conv_layers(parse_state *ps, const config_row *row, config_value *out) {
    char buf[300];
    token t = ps->tok;
    tok_text(&t, buf, sizeof buf);
    if (t.kind != T_LPAREN)
        return fail(ps, t.line, "'%s' expects a tuple of conv layers like ((16, 3, 1),), got '%s'",
                    row->name, buf);
    advance(ps);
    int n = 0, max = row->tuple_len < 0 ? -row->tuple_len : CONFIG_MAX_TUPLE / 4;
    CALF_ASSERT(max <= CONFIG_MAX_TUPLE / 4);
    while (ps->tok.kind != T_RPAREN) {
        if (n == max)
            return fail(ps, ps->tok.line, "'%s' takes at most %d conv layers", row->name, max);
        int rc = parse_conv_layer(ps, row, n + 1, out->ti + 4 * n);
        if (rc) return rc;
        n++;
        if (ps->tok.kind == T_COMMA) advance(ps);
        else if (ps->tok.kind != T_RPAREN) {
            tok_text(&ps->tok, buf, sizeof buf);
            return fail(ps, ps->tok.line, "'%s': expected ',' or ')' after conv layer %d, got '%s'",
                        row->name, n, ps->tok.kind == T_EOF ? "end of file" : buf);
        }
    }
    out->n = n;
    advance(ps);
    return CALF_OK;
}

/* Parse the value at the current token into a binding of `row`'s type. */
static int parse_value(parse_state *ps, const config_row *row, config_value *out) {
    int rc = expand_macro(ps);
    if (rc) return rc;
    token t = ps->tok;
    char buf[300];
    tok_text(&t, buf, sizeof buf);
    if (t.kind == T_NAME && strcmp(buf, "None") == 0) {
        if (!(row->flags & CALF_BINDING_OPTIONAL))
            return fail(ps, t.line, "'%s' cannot be None: it is not optional (type %s)", row->name,
                        type_name(row->type));
        out->none = true;
        advance(ps);
        return CALF_OK;
    }
    out->none = false;
    switch (row->type) {
    case CALF_CFG_INT:
    case CALF_CFG_FLOAT: {
        if (t.kind != T_INT && t.kind != T_FLOAT)
            return fail(ps, t.line, "'%s' expects a number, got '%s'", row->name, buf);
        int64_t iv = 0;
        double fv = 0;
        rc = parse_number(ps, &t, row->type, &iv, &fv, row->name);
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
        if (t.len >= CONFIG_MAX_STRING)
            return fail(ps, t.line, "'%s': string too long", row->name);
        if (row->choices && !in_choices(row->choices, t.start, t.len))
            return fail(ps, t.line, "'%s' must be one of %s, got '%s'", row->name, row->choices, buf);
        memcpy(out->s, t.start, t.len);
        out->s[t.len] = '\0';
        advance(ps);
        return CALF_OK;
    case CALF_CFG_REF:
        return parse_ref(ps, row, out);
    case CALF_CFG_CONV_LAYERS:
        return parse_conv_layers(ps, row, out);
    case CALF_CFG_INT_TUPLE:
    case CALF_CFG_FLOAT_TUPLE: {
        if (t.kind != T_LPAREN)
            return fail(ps, t.line, "'%s' expects a tuple like (64, 64), got '%s'", row->name, buf);
        advance(ps);
        int n = 0;
        while (ps->tok.kind != T_RPAREN) {
            if ((rc = expand_macro(ps))) return rc;
            token e = ps->tok;
            if (e.kind != T_INT && e.kind != T_FLOAT) {
                tok_text(&e, buf, sizeof buf);
                return fail(ps, e.line, "'%s': expected a number in the tuple, got '%s'", row->name,
                            e.kind == T_EOF ? "end of file" : buf);
            }
            if (n == CONFIG_MAX_TUPLE)
                return fail(ps, e.line, "'%s': tuple too long", row->name);
            int64_t iv = 0;
            double fv = 0;
            rc = parse_number(ps, &e, row->type, &iv, &fv, row->name);
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

/* Append one literal of a macro's value (a number, string, True/False/None, @Name, or
 * another macro's whole text) to text[*len], and go past it. */
static int macro_piece(parse_state *ps, const char *name, char *text, size_t *len) {
    token t = ps->tok;
    char buf[300], quoted[sizeof buf + 2];
    tok_text(&t, buf, sizeof buf);
    const char *piece = buf;
    switch (t.kind) {
    case T_INT:
    case T_FLOAT:
    case T_REF:
        break;
    case T_NAME:
        if (strcmp(buf, "True") && strcmp(buf, "False") && strcmp(buf, "None"))
            return fail(ps, t.line, "macro '%s': cannot read value '%s' (expected a literal, a tuple, "
                        "@Name or %%MACRO)", name, buf);
        break;
    case T_STRING:
        if (t.len >= CONFIG_MAX_STRING)
            return fail(ps, t.line, "macro '%s': string too long", name);
        snprintf(quoted, sizeof quoted, "%c%s%c", t.start[-1], buf, t.start[-1]);
        piece = quoted;
        break;
    case T_MACRO: {
        config_macro *m = find_macro(ps->cfg, buf + 1);
        if (!m) return undefined_macro(ps, t.line, buf + 1);
        if (!m->used_at[0]) where(ps, t.line, m->used_at, sizeof m->used_at);
        piece = m->text;
        break;
    }
    case T_EOF:
        return fail(ps, t.line, "missing value for macro '%s'", name);
    default:
        return fail(ps, t.line, "macro '%s': cannot read value starting at '%s'", name, buf);
    }
    size_t n = strlen(piece);
    if (*len + n >= CONFIG_MAX_MACRO_TEXT)
        return fail(ps, t.line, "macro '%s': value too long (at most %d characters)", name,
                    CONFIG_MAX_MACRO_TEXT - 1);
    memcpy(text + *len, piece, n + 1);
    *len += n;
    advance(ps);
    if (t.kind == T_REF && ps->tok.kind == T_LPAREN) {
        char what[100];
        snprintf(what, sizeof what, "macro '%s'", name);
        return ref_call_error(ps, t.line, what, buf);
    }
    return CALF_OK;
}

static int macro_append(parse_state *ps, int line, const char *name, char *text, size_t *len,
                        const char *s) {
    size_t n = strlen(s);
    if (*len + n >= CONFIG_MAX_MACRO_TEXT)
        return fail(ps, line, "macro '%s': value too long (at most %d characters)", name,
                    CONFIG_MAX_MACRO_TEXT - 1);
    memcpy(text + *len, s, n + 1);
    *len += n;
    return CALF_OK;
}

/* `NAME = value`, the current token being the value: keep the value as one line of gin
 * text, with any %MACRO in it replaced by that macro's text, for expand_macro to read
 * at each use, where it is type-checked. */
static int define_macro(parse_state *ps, const char *name, int line) {
    if (strchr(name, '/'))
        return fail(ps, line, "'%s' is neither a binding ('Scope.param') nor a macro name", name);
    if (!strcmp(name, "True") || !strcmp(name, "False") || !strcmp(name, "None"))
        return fail(ps, line, "'%s' is a value, not a macro name", name);
    if (strlen(name) >= sizeof ps->cfg->macros[0].name)
        return fail(ps, line, "macro name '%s' too long (at most %zu characters)", name,
                    sizeof ps->cfg->macros[0].name - 1);
    char text[CONFIG_MAX_MACRO_TEXT] = "";
    size_t len = 0;
    int rc;
    if (ps->tok.kind == T_LPAREN) {
        int tline = ps->tok.line, n = 0;
        if ((rc = macro_append(ps, tline, name, text, &len, "("))) return rc;
        advance(ps);
        while (ps->tok.kind != T_RPAREN) {
            if (n && (rc = macro_append(ps, tline, name, text, &len, ", "))) return rc;
            if ((rc = macro_piece(ps, name, text, &len))) return rc;
            n++;
            if (ps->tok.kind == T_COMMA) advance(ps);
            else if (ps->tok.kind != T_RPAREN) {
                char got[64];
                tok_text(&ps->tok, got, sizeof got);
                return fail(ps, ps->tok.line, "macro '%s': expected ',' or ')' in the tuple, got '%s'",
                            name, ps->tok.kind == T_EOF ? "end of file" : got);
            }
        }
        if ((rc = macro_append(ps, tline, name, text, &len, n == 1 ? ",)" : ")"))) return rc;
        advance(ps);
    } else if ((rc = macro_piece(ps, name, text, &len))) {
        return rc;
    }
    config_macro *m = find_macro(ps->cfg, name);
    if (m && m->used_at[0] && strcmp(m->text, text) != 0)
        return fail(ps, line, "macro '%s' is changed after its use at %s, which keeps %s: calf "
                    "expands a macro where it is used (gin would change that use too); define it "
                    "before that use, or set the binding itself", name, m->used_at, m->text);
    if (!m) {
        if (ps->cfg->num_macros == CONFIG_MAX_MACROS)
            return fail(ps, line, "too many macros (at most %d)", CONFIG_MAX_MACROS);
        m = &ps->cfg->macros[ps->cfg->num_macros++];
        memset(m, 0, sizeof *m);
        snprintf(m->name, sizeof m->name, "%s", name);
    }
    memcpy(m->text, text, len + 1);
    where(ps, line, m->origin, sizeof m->origin);
    return CALF_OK;
}

/* `import a.b [as c], ...` and `from a.b import c [as d], ...`: ALF's configs import the
 * Python modules that register their configurables; calf's are built in, so such a line
 * only has to be well formed. It is one line, as in Python. */
static int skip_import(parse_state *ps, int line, bool from) {
    const char *form = from ? "expected 'from module import name'" : "expected 'import module'";
    char word[300];
    advance(ps);
    if (from) {
        if (ps->tok.kind != T_NAME || ps->tok.line != line) return fail(ps, line, "%s", form);
        advance(ps);
        tok_text(&ps->tok, word, sizeof word);
        if (ps->tok.kind != T_NAME || ps->tok.line != line || strcmp(word, "import") != 0)
            return fail(ps, line, "%s", form);
        advance(ps);
    }
    for (;;) {
        if (ps->tok.kind != T_NAME || ps->tok.line != line) return fail(ps, line, "%s", form);
        advance(ps);
        tok_text(&ps->tok, word, sizeof word);
        if (ps->tok.kind == T_NAME && ps->tok.line == line && strcmp(word, "as") == 0) {
            advance(ps);
            if (ps->tok.kind != T_NAME || ps->tok.line != line) return fail(ps, line, "%s", form);
            advance(ps);
        }
        if (ps->tok.kind != T_COMMA || ps->tok.line != line) break;
        advance(ps);
    }
    if (ps->tok.kind != T_EOF && ps->tok.line == line) {
        tok_text(&ps->tok, word, sizeof word);
        return fail(ps, line, "%s, got '%s' after it", form, word);
    }
    return CALF_OK;
}

static int parse_text(parse_state *ps, const char *text);
static void resolve_unset(calf_config *cfg);

static int read_file(const char *path, char **out, calf_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return calf_error_set(err, CALF_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f); /* read-only: nothing to lose */
        return calf_error_set(err, CALF_EINVAL, "%s: is a directory, not a config file", path);
    }
    size_t cap = 4096, len = 0;
    char *buf = mem_alloc(cap, err);
    if (!buf) {
        fclose(f);
        return CALF_ENOMEM;
    }
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
            char *nb = mem_realloc(buf, cap, err);
            if (!nb) {
                free(buf);
                fclose(f);
                return CALF_ENOMEM;
            }
            buf = nb;
        }
    }
    int bad = ferror(f) ? errno : 0;
    fclose(f);
    if (bad) { free(buf); return calf_error_set(err, CALF_EIO, "%s: read: %s", path, strerror(bad)); }
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
    if (strncmp(text, "\xEF\xBB\xBF", 3) == 0) text += 3; /* UTF-8 byte-order mark */
    ps->lx.p = text;
    ps->lx.line = 1;
    advance(ps);
    char name[300];
    while (ps->tok.kind != T_EOF) {
        token t = ps->tok;
        tok_text(&t, name, sizeof name);
        if (t.kind == T_NAME && t.len >= sizeof name)
            return fail(ps, t.line, "name '%.40s...' too long (%zu characters, at most %zu)",
                        name, t.len, sizeof name - 1);
        if (t.kind != T_NAME)
            return fail(ps, t.line, "expected 'Scope.param = value', got '%s'", name);
        bool import = strcmp(name, "import") == 0 || strcmp(name, "from") == 0;
        if (ps->single && (import || strcmp(name, "include") == 0))
            return fail(ps, t.line, "%s is not allowed here: expected 'Scope.param=value'", name);
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
        if (import) {
            int rc = skip_import(ps, t.line, strcmp(name, "from") == 0);
            if (rc) return rc;
            continue;
        }
        advance(ps);
        if (ps->tok.kind != T_EQ) {
            char got[64];
            tok_text(&ps->tok, got, sizeof got);
            return fail(ps, ps->tok.line, "expected '=' after '%s', got '%s'", name,
                        ps->tok.kind == T_EOF ? "end of file" : got);
        }
        advance(ps);
        if (!strchr(name, '.')) {
            int rc = define_macro(ps, name, t.line);
            if (rc) return rc;
        } else {
            int id = calf_binding_find(name);
            if (id < 0) {
                const char *near = closest_binding(name);
                if (near)
                    return fail(ps, t.line, "unknown binding '%s' (did you mean '%s'?)", name, near);
                return fail(ps, t.line, "unknown binding '%s' (see calf train --list-bindings)", name);
            }
            if (ps->tok.kind == T_EOF)
                return fail(ps, ps->tok.line, "missing value for '%s'", name);
            if (ps->tok.kind == T_BAD) {
                char got[64];
                tok_text(&ps->tok, got, sizeof got);
                return fail(ps, ps->tok.line, "'%s': cannot read value starting at '%s'", name, got);
            }
            config_value v = ps->cfg->values[id];
            int rc = parse_value(ps, row_at(id), &v);
            if (rc) return rc;
            ps->cfg->values[id] = v;
            where(ps, t.line, ps->cfg->origin[id], sizeof ps->cfg->origin[id]);
            if (id == CALF_CFG_ALGORITHM_CTOR || id == CALF_CFG_NUM_ENV_STEPS) resolve_unset(ps->cfg);
        }
        if (ps->single && ps->tok.kind != T_EOF)
            return fail(ps, ps->tok.line, "expected one 'Scope.param=value', found more after the value");
    }
    return CALF_OK;
}

/* ---- defaults ---------------------------------------------------------------- */

/* `text`, a default of row `id` written as gin, into *out; a bad one is a bug in a table.
 * cfg is only read for macros, which a default has none of (NULL is fine). */
static void parse_default(calf_config *cfg, int id, const char *text, config_value *out) {
    parse_state ps;
    memset(&ps, 0, sizeof ps);
    calf_error err;
    ps.cfg = cfg;
    ps.err = &err;
    ps.file = "<defaults>";
    ps.lx.p = text;
    ps.lx.line = 1;
    advance(&ps);
    if (parse_value(&ps, row_at(id), out) != CALF_OK || ps.tok.kind != T_EOF)
        calf_panic(__FILE__, __LINE__, "bad default '%s' for %s: %s", text, row_at(id)->name,
                   err.msg);
}

/* The choice the config's REF row names (the algorithm it trains with), and the index of
 * its first default in added->defaults. */
static const config_choice *chosen(const calf_config *cfg, int *first_default) {
    const char *name = cfg->values[CALF_CFG_ALGORITHM_CTOR].s;
    int first = 0;
    for (int k = 0; k < added->num_choices; k++) {
        const config_choice *c = &added->choices[k];
        if (strcmp(c->name, name) == 0) {
            *first_default = first;
            return c;
        }
        first += c->num_defaults;
    }
    CALF_ASSERT(!"the REF row holds one of its choices");
    return NULL;
}

/* The default the chosen algorithm gives row `id` (gin text), or NULL when it gives
 * none; *who gets the algorithm. */
static const char *algorithm_default(const calf_config *cfg, int id, const config_choice **who) {
    int first;
    const config_choice *c = chosen(cfg, &first);
    *who = c;
    for (int k = first; k < first + c->num_defaults; k++)
        if (strcmp(added->defaults[k].name, row_at(id)->name) == 0) return added->defaults[k].value;
    return NULL;
}

/* One budget: TrainerConfig.num_iterations that is not set is 0 (no limit) while
 * TrainerConfig.num_env_steps is, so the run ends at num_env_steps and not at
 * num_iterations' default first. */
static bool budget_by_env_steps(const calf_config *cfg, int id) {
    return id == CALF_CFG_NUM_ITERATIONS && !cfg->origin[id][0] &&
           cfg->values[CALF_CFG_NUM_ENV_STEPS].i > 0;
}

/* Every row the config does not set takes the default in effect: 0 for num_iterations
 * when the budget is num_env_steps, else the chosen algorithm's default for it, else the
 * row's own. Run after every change to what those depend on (the algorithm, the budget). */
static void resolve_unset(calf_config *cfg) {
    for (int i = 0, n = num_rows(); i < n; i++) {
        if (cfg->origin[i][0]) continue;
        const config_choice *who;
        const char *text = budget_by_env_steps(cfg, i) ? "0" : algorithm_default(cfg, i, &who);
        parse_default(cfg, i, text ? text : row_at(i)->def, &cfg->values[i]);
    }
}

/* ---- public ---------------------------------------------------------------- */

/* The rows are data, but every name must be in one row only (the algorithms' tables and
 * the public one are written apart), the added rows must fit a config and be the choices'
 * rows, whose names the REF row offers, and a scoped row's fallback must always hold a
 * value the scoped row accepts: same type and shape, bounds and choices no wider. */
static void check_table(void) {
    int n = num_rows();
    if (n > CONFIG_CAPACITY)
        calf_panic(__FILE__, __LINE__, "%d binding rows, more than the %d a calf_config holds", n,
                   CONFIG_CAPACITY);
    int owned = 0;
    size_t names = 0;
    for (int k = 0; k < added->num_choices; k++) {
        const config_choice *c = &added->choices[k];
        size_t len = strlen(c->name);
        CALF_ASSERT(c->num_rows >= 0 && strncmp(added->names + names, c->name, len) == 0);
        names += len;
        CALF_ASSERT(added->names[names] == (k + 1 < added->num_choices ? '|' : '\0'));
        names++;
        owned += c->num_rows;
    }
    CALF_ASSERT(owned == added->num_rows);
    for (int i = 0; i < n; i++) {
        const config_row *r = row_at(i);
        CALF_ASSERT(r->name && strchr(r->name, '.') && r->def && r->help);
        CALF_ASSERT(r->type != CALF_CFG_REF || !r->choices);
        for (int j = 0; j < i; j++)
            if (strcmp(row_at(j)->name, r->name) == 0)
                calf_panic(__FILE__, __LINE__, "binding %s is in the table twice", r->name);
        if (r->fallback == CALF_NO_FALLBACK) continue;
        CALF_ASSERT(r->fallback >= 0 && r->fallback < n && r->fallback != i);
        const config_row *f = row_at(r->fallback);
        CALF_ASSERT(f->fallback == CALF_NO_FALLBACK && f->type == r->type);
        CALF_ASSERT(f->tuple_len == r->tuple_len && f->min >= r->min && f->max <= r->max);
        CALF_ASSERT(!(f->flags & CALF_BINDING_OPTIONAL) || (r->flags & CALF_BINDING_OPTIONAL));
        CALF_ASSERT(!r->choices || (f->choices && strcmp(f->choices, r->choices) == 0));
    }
    /* A choice's defaults: rows that exist, once each, none of the budget's or the choice
     * itself (they decide which defaults apply), none of another choice's own rows, and
     * values its row accepts. */
    int first = 0;
    for (int k = 0; k < added->num_choices; k++) {
        const config_choice *c = &added->choices[k];
        CALF_ASSERT(c->num_defaults >= 0 && first + c->num_defaults <= added->num_defaults);
        for (int d = first; d < first + c->num_defaults; d++) {
            const config_default *def = &added->defaults[d];
            int id = calf_binding_find(def->name);
            if (id < 0 || id == CALF_CFG_NUM_ITERATIONS || id == CALF_CFG_NUM_ENV_STEPS ||
                id == CALF_CFG_ALGORITHM_CTOR || strchr(def->value, '%') ||
                (owner_of(id) && owner_of(id) != c))
                calf_panic(__FILE__, __LINE__, "%s's default for '%s' names no row it may set",
                           c->name, def->name);
            for (int e = first; e < d; e++)
                if (strcmp(added->defaults[e].name, def->name) == 0)
                    calf_panic(__FILE__, __LINE__, "%s gives %s two defaults", c->name, def->name);
            config_value v;
            parse_default(NULL, id, def->value, &v);
        }
        first += c->num_defaults;
    }
    CALF_ASSERT(first == added->num_defaults);
}

void config_init(calf_config *cfg) {
    check_table();
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0, n = num_rows(); i < n; i++) parse_default(cfg, i, row_at(i)->def, &cfg->values[i]);
    resolve_unset(cfg);
}

calf_config *calf_config_new(calf_error *err) {
    calf_config *cfg = mem_alloc(sizeof *cfg, err);
    if (cfg) config_init(cfg);
    return cfg;
}

void calf_config_free(calf_config *cfg) { free(cfg); }

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
    /* one budget: set both and one of them would end the run unsaid (num_iterations only
     * reaches here set when num_env_steps is set too: see budget_by_env_steps) */
    if (iters > 0 && steps > 0 && cfg->origin[CALF_CFG_NUM_ITERATIONS][0])
        return calf_error_set(err, CALF_EINVAL,
                              "%s: TrainerConfig.num_iterations = %lld and %s: "
                              "TrainerConfig.num_env_steps = %lld: a run has one budget; set one "
                              "of them (the other to 0)",
                              cfg->origin[CALF_CFG_NUM_ITERATIONS], (long long)iters,
                              cfg->origin[CALF_CFG_NUM_ENV_STEPS], (long long)steps);
    if (iters == 0 && steps == 0)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: TrainerConfig.num_iterations and TrainerConfig.num_env_steps are "
                              "both 0: the run would never stop",
                              config_where(cfg, CALF_CFG_NUM_ITERATIONS));
    /* the rollout is held in memory: keep it (and every index into it) well in range */
    int64_t samples = calf_config_int(cfg, CALF_CFG_NUM_ENVS) * calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH);
    if (samples > ((int64_t)1 << 22))
        return calf_error_set(err, CALF_EINVAL,
                              "create_environment.num_parallel_environments x "
                              "TrainerConfig.unroll_length = %lld samples per iteration, more than "
                              "the %d calf holds in memory",
                              (long long)samples, 1 << 22);
    for (int i = 0; i < cfg->num_macros; i++) {
        const config_macro *m = &cfg->macros[i];
        if (m->used_at[0]) continue;
        const char *near = closest_binding(m->name);
        if (near)
            return calf_error_set(err, CALF_EINVAL,
                                  "%s: macro '%s' is never used (did you mean the binding '%s'?)",
                                  m->origin, m->name, near);
        return calf_error_set(err, CALF_EINVAL,
                              "%s: macro '%s' is never used (a binding is written 'Scope.param = "
                              "value')", m->origin, m->name);
    }
    return CALF_OK;
}

/* The row of an id a caller passes: one out of range is the caller's bug. */
static const config_row *row_of(calf_binding_id id) {
    CALF_ASSERT(id >= 0 && id < num_rows());
    return row_at(id);
}

/* The row whose value is in effect for `id`: a scoped row that is not set takes its
 * fallback's value when that one is set (gin's `Adam.lr` sets every scope's default). */
static int effective(const calf_config *cfg, calf_binding_id id) {
    int fb = row_of(id)->fallback;
    if (fb != CALF_NO_FALLBACK && !cfg->origin[id][0] && cfg->origin[fb][0]) return fb;
    return (int)id;
}

const config_value *config_get(const calf_config *cfg, calf_binding_id id) {
    return &cfg->values[effective(cfg, id)];
}

/* The value in effect of a row that holds one: a getter on None is a caller's bug. */
static const config_value *present(const calf_config *cfg, calf_binding_id id) {
    const config_value *v = config_get(cfg, id);
    CALF_ASSERT(!v->none);
    return v;
}

int64_t calf_config_int(const calf_config *cfg, calf_binding_id id) {
    CALF_ASSERT(row_of(id)->type == CALF_CFG_INT || row_of(id)->type == CALF_CFG_BOOL);
    return present(cfg, id)->i;
}

double calf_config_float(const calf_config *cfg, calf_binding_id id) {
    CALF_ASSERT(row_of(id)->type == CALF_CFG_FLOAT);
    return present(cfg, id)->f;
}

bool calf_config_bool(const calf_config *cfg, calf_binding_id id) {
    CALF_ASSERT(row_of(id)->type == CALF_CFG_BOOL);
    return present(cfg, id)->i != 0;
}

const char *calf_config_string(const calf_config *cfg, calf_binding_id id) {
    CALF_ASSERT(row_of(id)->type == CALF_CFG_STRING || row_of(id)->type == CALF_CFG_REF);
    return present(cfg, id)->s;
}

int calf_config_tuple_len(const calf_config *cfg, calf_binding_id id) {
    CALF_ASSERT(row_of(id)->type == CALF_CFG_INT_TUPLE || row_of(id)->type == CALF_CFG_FLOAT_TUPLE ||
                row_of(id)->type == CALF_CFG_CONV_LAYERS);
    return present(cfg, id)->n;
}

int64_t calf_config_tuple_int(const calf_config *cfg, calf_binding_id id, int k) {
    calf_config_type type = row_of(id)->type;
    CALF_ASSERT(type == CALF_CFG_INT_TUPLE || type == CALF_CFG_CONV_LAYERS);
    const config_value *v = present(cfg, id);
    CALF_ASSERT(k >= 0 && k < (type == CALF_CFG_CONV_LAYERS ? 4 * v->n : v->n));
    return v->ti[k];
}

double calf_config_tuple_float(const calf_config *cfg, calf_binding_id id, int k) {
    CALF_ASSERT(row_of(id)->type == CALF_CFG_FLOAT_TUPLE);
    const config_value *v = present(cfg, id);
    CALF_ASSERT(k >= 0 && k < v->n);
    return v->tf[k];
}

bool calf_config_is_none(const calf_config *cfg, calf_binding_id id) {
    return config_get(cfg, id)->none;
}

const char *calf_config_origin(const calf_config *cfg, calf_binding_id id) {
    return cfg->origin[effective(cfg, id)];
}

const char *config_where(const calf_config *cfg, calf_binding_id id) {
    const char *o = calf_config_origin(cfg, id);
    return o[0] ? o : "config";
}

int calf_binding_count(void) { return num_rows(); }
const char *calf_binding_name(calf_binding_id id) { return row_of(id)->name; }
calf_config_type calf_binding_type(calf_binding_id id) { return row_of(id)->type; }
const char *calf_binding_help(calf_binding_id id) { return row_of(id)->help; }
int calf_binding_flags(calf_binding_id id) { return row_of(id)->flags; }
int calf_binding_fallback(calf_binding_id id) { return row_of(id)->fallback; }
const char *calf_binding_choices(calf_binding_id id) { return row_choices(row_of(id)); }

const char *calf_binding_algorithm(calf_binding_id id) {
    (void)row_of(id); /* its bounds check */
    const config_choice *c = owner_of(id);
    return c ? c->name : NULL;
}

const char *calf_binding_default(calf_binding_id id, const char *algorithm) {
    const config_row *r = row_of(id);
    if (!algorithm) return r->def;
    int first = 0;
    for (int k = 0; k < added->num_choices; k++) {
        const config_choice *c = &added->choices[k];
        if (strcmp(c->name, algorithm) == 0) {
            for (int d = first; d < first + c->num_defaults; d++)
                if (strcmp(added->defaults[d].name, r->name) == 0) return added->defaults[d].value;
            return r->def;
        }
        first += c->num_defaults;
    }
    return NULL;
}

int calf_binding_find(const char *name) {
    for (int i = 0, n = num_rows(); i < n; i++)
        if (strcmp(row_at(i)->name, name) == 0) return i;
    return -1;
}

static void format_value(const config_value *v, calf_config_type type, char *buf, size_t cap) {
    size_t off = 0;
    if (v->none) {
        snprintf(buf, cap, "None");
        return;
    }
    switch (type) {
    case CALF_CFG_INT: snprintf(buf, cap, "%lld", (long long)v->i); break;
    case CALF_CFG_FLOAT: snprintf(buf, cap, "%.17g", v->f);
        /* keep it a float literal so re-parsing keeps the type obvious */
        if (!strpbrk(buf, ".eEn")) { size_t n = strlen(buf); if (n + 2 < cap) memcpy(buf + n, ".0", 3); }
        break;
    case CALF_CFG_BOOL: snprintf(buf, cap, "%s", v->i ? "True" : "False"); break;
    case CALF_CFG_STRING: snprintf(buf, cap, "'%s'", v->s); break;
    case CALF_CFG_REF: snprintf(buf, cap, "@%s", v->s); break;
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
    case CALF_CFG_CONV_LAYERS:
        off += (size_t)snprintf(buf + off, cap - off, "(");
        for (int k = 0; k < v->n && off < cap; k++)
            off += (size_t)snprintf(buf + off, cap - off, "%s(%lld, %lld, %lld, %lld)", k ? ", " : "",
                                    (long long)v->ti[4 * k], (long long)v->ti[4 * k + 1],
                                    (long long)v->ti[4 * k + 2], (long long)v->ti[4 * k + 3]);
        if (off < cap) snprintf(buf + off, cap - off, v->n == 1 ? ",)" : ")");
        break;
    }
}

void calf_config_format_value(const calf_config *cfg, calf_binding_id id, char *buf, size_t cap) {
    format_value(config_get(cfg, id), row_of(id)->type, buf, cap);
}

void calf_config_list_bindings(FILE *out) {
    for (int k = 0, n = num_rows(); k < n; k++) {
        const config_row *r = row_at(ordered(k));
        char bounds[160] = "", also[160] = "";
        if (r->type == CALF_CFG_INT || r->type == CALF_CFG_FLOAT || r->type == CALF_CFG_INT_TUPLE ||
            r->type == CALF_CFG_FLOAT_TUPLE || r->type == CALF_CFG_CONV_LAYERS) {
            snprintf(bounds, sizeof bounds, " in [%.10g, %.10g]", r->min, r->max);
        } else if (r->type == CALF_CFG_REF) {
            size_t n = (size_t)snprintf(bounds, sizeof bounds, " one of @");
            for (const char *c = row_choices(r); *c && n + 2 < sizeof bounds; c++) {
                if (*c == '|') { bounds[n++] = '|'; bounds[n++] = '@'; }
                else bounds[n++] = *c;
            }
            bounds[n] = '\0';
        } else if (r->choices) {
            snprintf(bounds, sizeof bounds, " one of %s", r->choices);
        }
        if (r->fallback != CALF_NO_FALLBACK)
            snprintf(also, sizeof also, " (%s's value when that is set)", row_at(r->fallback)->name);
        /* the algorithms' defaults for the row, where they give one: "; @SacAlgorithm: 1, ..." */
        char algos[600] = "";
        size_t an = 0;
        int first = 0, id = ordered(k);
        if (id == CALF_CFG_NUM_ITERATIONS)
            an = (size_t)snprintf(algos, sizeof algos, "; 0 when TrainerConfig.num_env_steps is set");
        for (int c = 0; c < added->num_choices; c++) {
            for (int d = first; d < first + added->choices[c].num_defaults; d++)
                if (strcmp(added->defaults[d].name, r->name) == 0 && an < sizeof algos)
                    an += (size_t)snprintf(algos + an, sizeof algos - an, "%s @%s: %s",
                                           an ? "," : ";", added->choices[c].name,
                                           added->defaults[d].value);
            first += added->choices[c].num_defaults;
        }
        fprintf(out, "%s\n    %s%s%s, default %s%s%s\n    %s\n", r->name, type_name(r->type), bounds,
                r->flags & CALF_BINDING_OPTIONAL ? " or None" : "", r->def, algos, also, r->help);
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
    const char *group = NULL;
    size_t group_len = 0;
    for (int k = 0, n = num_rows(); k < n; k++) {
        int i = ordered(k);
        /* a blank line between configurables; a scoped row stays with its configurable */
        const char *name = row_at(i)->name;
        const char *slash = strrchr(name, '/');
        const char *conf = slash ? slash + 1 : name;
        size_t conf_len = (size_t)(strrchr(conf, '.') - conf);
        if (group && (conf_len != group_len || strncmp(conf, group, conf_len) != 0)) fputc('\n', out);
        group = conf;
        group_len = conf_len;
        int e = effective(cfg, i);
        char val[700];
        format_value(&cfg->values[e], row_at(i)->type, val, sizeof val);
        fprintf(out, "%s = %s", name, val);
        const config_choice *who;
        if (e != i) fprintf(out, "  # from %s at %s", row_at(e)->name, cfg->origin[e]);
        else if (cfg->origin[i][0]) fprintf(out, "  # %s", cfg->origin[i]);
        else if (budget_by_env_steps(cfg, i)) fprintf(out, "  # TrainerConfig.num_env_steps ends the run");
        else if (algorithm_default(cfg, i, &who)) fprintf(out, "  # %s's default", who->name);
        fputc('\n', out);
    }
    return ferror(out) ? CALF_EIO : CALF_OK;
}

/* An algorithm's own rows are in the digest of a config that selects it, and of every
 * config when its choice says so (PPO's and SAC's: training/registry.h). */
uint64_t calf_config_digest(const calf_config *cfg) {
    const char *algorithm = calf_config_string(cfg, CALF_CFG_ALGORITHM_CTOR);
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over "name=value\n", values in effect */
    for (int k = 0, n = num_rows(); k < n; k++) {
        int i = ordered(k);
        if (row_at(i)->flags & CALF_BINDING_NODIGEST) continue;
        const config_choice *o = owner_of(i);
        if (o && !o->in_every_digest && strcmp(o->name, algorithm) != 0) continue;
        char val[700];
        calf_config_format_value(cfg, i, val, sizeof val);
        if (row_at(i)->flags & CALF_BINDING_DIGEST_SET) {
            config_value def;
            char dval[700];
            parse_default(NULL, i, row_at(i)->def, &def);
            format_value(&def, row_at(i)->type, dval, sizeof dval);
            if (strcmp(val, dval) == 0) continue;
        }
        const char *parts[3] = {row_at(i)->name, "=", val};
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
