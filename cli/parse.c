/* parse.c: what the command table (cli/commands.c) drives: the one option parser every
 * command's arguments go through, each command's --help and calf --help. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

#define EXIT_BAD_INPUT 2
/* calf --help: a command's synopsis follows its summary on the line up to this width,
 * else it has a line of its own */
#define SYNOPSIS_WIDTH 110
#define SUMMARY_COL 11

/* Whether argument a is option o: the spelling (name or alias) it matches, or NULL. A
 * flag matches exactly; an option with a value also as "--name=value". */
static const char *spelled(const cli_option *o, const char *a) {
    const char *names[2] = {o->name, o->alias};
    for (int k = 0; k < 2 && names[k]; k++) {
        size_t n = strlen(names[k]);
        if (strncmp(a, names[k], n) != 0) continue;
        if (a[n] == '\0' || (a[n] == '=' && o->kind != CLI_FLAG)) return names[k];
    }
    return NULL;
}

/* The value of the option spelled so at argv[*i] ("--name value" or "--name=value"),
 * advancing *i past what it takes. A missing value is "" when empty_if_missing, else
 * NULL after a message that starts with prefix. */
static const char *value_of(const char *prefix, bool empty_if_missing, const char *spelling,
                            int argc, char **argv, int *i) {
    const char *a = argv[*i];
    size_t n = strlen(spelling);
    if (a[n] == '=') return a + n + 1;
    if (*i + 1 < argc) return argv[++*i];
    if (empty_if_missing) return "";
    fprintf(stderr, "%s: option %s needs a value\n", prefix, spelling);
    return NULL;
}

/* The whole string as an integer in [lo, hi]: strtoll would skip leading blanks. */
static int parse_int(const char *s, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    bool digit_first = (s[0] >= '0' && s[0] <= '9') || (s[0] == '-' && s[1] >= '0' && s[1] <= '9');
    long long v = digit_first ? strtoll(s, &end, 10) : 0;
    if (!digit_first || errno || *end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* Whole-string unsigned 64-bit decimal; rejects signs, blanks and overflow. */
static int parse_u64(const char *s, uint64_t *out) {
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || *end != '\0') return -1;
    *out = (uint64_t)v;
    return 0;
}

/* Checks v->text by o's kind into v; says why not and returns -1 when it does not fit. */
static int check_value(const cli_command *cmd, const cli_option *o, cli_value *v) {
    const char *s = v->text;
    switch (o->kind) {
    case CLI_FLAG:
        return 0;
    case CLI_TEXT:
        if ((o->flags & CLI_NONEMPTY) && !*s) {
            fprintf(stderr, "%s: %s needs a file name\n", cmd->prefix, o->name);
            return -1;
        }
        return 0;
    case CLI_INT:
        if (parse_int(s, (long long)o->lo, (long long)o->hi, &v->num) == 0) return 0;
        fprintf(stderr, "%s: %s expects an integer in [%lld, %lld], got '%s'\n", cmd->prefix,
                o->name, (long long)o->lo, (long long)o->hi, s);
        return -1;
    case CLI_U64:
        if (parse_u64(s, &v->u64) == 0 && (o->hi == 0 || v->u64 <= (uint64_t)o->hi)) return 0;
        if (o->hi == 0)
            fprintf(stderr, "%s: %s wants an integer in 0..2^64-1, got '%s'\n", cmd->prefix,
                    o->name, s);
        else
            fprintf(stderr, "%s: %s wants an integer in 0..%llu, got '%s'\n", cmd->prefix, o->name,
                    (unsigned long long)o->hi, s);
        return -1;
    case CLI_REAL: {
        char *end = NULL;
        errno = 0;
        v->real = strtod(s, &end);
        if (end != s && *end == '\0' && !errno && v->real >= o->lo && v->real < o->hi) return 0;
        fprintf(stderr, "%s: %s expects a number in [%g, %g), got '%s'\n", cmd->prefix, o->name,
                o->lo, o->hi, s);
        return -1;
    }
    case CLI_CHOICE:
        for (int k = 0; o->choices[k].value; k++) {
            if (!strcmp(s, o->choices[k].value)) {
                v->choice = o->choices[k].id;
                return 0;
            }
        }
        fprintf(stderr, "%s: %s expects ", cmd->prefix, o->name);
        for (int k = 0; o->choices[k].value; k++)
            fprintf(stderr, "%s%s", k == 0 ? "" : o->choices[k + 1].value ? ", " : " or ",
                    o->choices[k].value);
        fprintf(stderr, ", got '%s'\n", s);
        return -1;
    }
    return -1;
}

/* What follows a bad argument's message line: the command's help or usage, if either. */
static void print_hint(const cli_command *cmd) {
    if (cmd->hint == CLI_HINT_HELP) cli_print_help(cmd, stderr);
    if (cmd->hint == CLI_HINT_USAGE) fputs(cmd->usage, stderr);
}

/* The early options (--env_lib), in order, wherever they stand (the values of other
 * options included), taken out of argv. */
static int take_early(const cli_command *cmd, int *argc, char **argv) {
    int kept = 0;
    for (int i = 0; i < *argc; i++) {
        const cli_option *o = NULL;
        const char *spelling = NULL;
        for (int k = 0; k < cmd->num_options && !spelling; k++) {
            o = &cmd->options[k];
            if (o->early) spelling = spelled(o, argv[i]);
        }
        if (!spelling) {
            argv[kept++] = argv[i];
            continue;
        }
        /* the program's own message, whatever the command: it takes them before the command */
        const char *v = value_of("calf", false, spelling, *argc, argv, &i);
        if (!v) return EXIT_BAD_INPUT;
        int rc = o->early(cmd, v);
        if (rc) return rc;
    }
    *argc = kept;
    return 0;
}

int cli_parse(const cli_command *cmd, int *argc, char **argv, cli_setter set, void *ctx) {
    int rc = take_early(cmd, argc, argv);
    if (rc) return rc;
    bool options_done = false;
    for (int i = 0; i < *argc; i++) {
        const char *a = argv[i];
        cli_value v = {a, 0, 0, 0, 0};
        if (cmd->operand && (options_done || a[0] != '-' || a[1] == '\0')) {
            if (set && (rc = set(ctx, CLI_OPERAND, &v))) return rc;
            continue;
        }
        if (cmd->double_dash && !strcmp(a, "--")) {
            options_done = true;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli_print_help(cmd, stdout);
            return 0;
        }
        int id = -1;
        const char *spelling = NULL;
        for (int k = 0; k < cmd->num_options && !spelling; k++)
            if (!cmd->options[k].early && (spelling = spelled(&cmd->options[k], a))) id = k;
        if (!spelling) {
            fprintf(stderr, "calf %s: %s '%s'%s\n", cmd->name, cmd->unknown, a,
                    cmd->hint == CLI_HINT_TRY ? " (try --help)" : "");
            print_hint(cmd);
            return EXIT_BAD_INPUT;
        }
        const cli_option *o = &cmd->options[id];
        if (o->kind != CLI_FLAG) {
            v.text = value_of(cmd->prefix, cmd->empty_if_missing, spelling, *argc, argv, &i);
            if (!v.text || check_value(cmd, o, &v)) return EXIT_BAD_INPUT;
        }
        if (set && (rc = set(ctx, id, &v))) return rc;
    }
    return CLI_RUN;
}

int cli_require(const cli_command *cmd, int id, const char *value) {
    if (value && value[0]) return 0;
    fprintf(stderr, "calf %s: %s %s\n", cmd->name, value ? "empty" : "missing required option",
            cmd->options[id].name);
    print_hint(cmd);
    return EXIT_BAD_INPUT;
}

/* "  NAME   help's first line", the rest of help indented to col. */
static void print_row(FILE *f, int col, const char *name, const char *help) {
    fprintf(f, "  %-*s", col - 2, name);
    for (const char *line = help; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) + 1 : strlen(line);
        if (line != help) fprintf(f, "%*s", col, "");
        fwrite(line, 1, n, f);
        line += n;
    }
}

void cli_print_help(const cli_command *cmd, FILE *f) {
    fputs(cmd->usage, f);
    if (cmd->about) fputs(cmd->about, f);
    for (int k = 0; k < cmd->num_options; k++) {
        const cli_option *o = &cmd->options[k];
        if (o->heading) fputs(o->heading, f);
        char name[128];
        if (o->choices) {
            for (int c = 0; o->choices[c].value; c++) {
                snprintf(name, sizeof name, "%s %s", o->name, o->choices[c].value);
                print_row(f, cmd->help_col, name, o->choices[c].help);
            }
            continue;
        }
        if (!o->help) continue;
        /* the row names the options described with it too: "--width W, --height H" */
        int last = k;
        while (last + 1 < cmd->num_options && (cmd->options[last + 1].flags & CLI_WITH_PREVIOUS))
            last++;
        size_t used = 0;
        for (int j = k; j <= last && used < sizeof name; j++) {
            const cli_option *p = &cmd->options[j];
            used += (size_t)snprintf(name + used, sizeof name - used, "%s%s%s%s", j > k ? ", " : "",
                                     p->name, p->metavar ? " " : "", p->metavar ? p->metavar : "");
        }
        print_row(f, cmd->help_col, name, o->help);
    }
    if (cmd->epilogue) fputs(cmd->epilogue, f);
}

void cli_print_usage(FILE *f) {
    fputs("usage: calf <command> [options]\n\ncommands:\n", f);
    for (int k = 0; k < cli_num_commands; k++) {
        const cli_command *c = &cli_commands[k];
        fprintf(f, "  %-*s %s", SUMMARY_COL - 3, c->name, c->summary);
        if (!c->synopsis) {
            fputc('\n', f);
            continue;
        }
        size_t line = SUMMARY_COL + strlen(c->summary) + strlen(":  ") + strlen(c->synopsis);
        if (line <= SYNOPSIS_WIDTH)
            fprintf(f, ":  %s\n", c->synopsis);
        else
            fprintf(f, ":\n%*s%s\n", SUMMARY_COL, "", c->synopsis);
    }
    /* the commands that take --env_lib are those whose table has it */
    fputs("\noptions:\n"
          "  -h, --help     this text (also: calf <command> --help)\n"
          "  --version      version and build features\n"
          "  --env_lib LIB  (",
          f);
    const char *sep = "";
    for (int k = 0; k < cli_num_commands; k++) {
        if (!cli_command_takes(&cli_commands[k], "--env_lib")) continue;
        fprintf(f, "%s%s", sep, cli_commands[k].name);
        sep = ", ";
    }
    fputs("; repeatable) first load the plug-in\n"
          "                 shared library LIB, whose calf_plugin_register adds its environments\n"
          "                 (include/calf/env.h; examples/custom_env.c is one)\n",
          f);
}
