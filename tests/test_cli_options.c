/* test_cli_options.c - every command's options as its --help lists them.
 * Each option shown with a value ("--runs N", "-o, --output FILE",
 * "--kernels a,b,c") given last on the line must be answered with "needs a
 * value" and exit code 2; each one shown without (outside the benchmarks,
 * which would run) must not ask for one; an option the command does not
 * know, with or without something after it, gets "unknown option"; a
 * thread count outside 1 .. 1024 is refused; every option given twice is
 * refused; a value joined to an option that takes none (`--quiet=x`) is
 * refused. */
#include <sys/stat.h>

#include "cli_util.h"
#include "pairkit/pairkit.h"

#define MAX_OPTIONS 64

typedef struct option_list {
    char name[MAX_OPTIONS][40];
    int takes_value[MAX_OPTIONS];
    int n;
} option_list;

/* The options of a --help text: lines whose first non-blank is '-', read
 * up to the first run of two blanks (the description). Options joined by
 * commas share the placeholder that ends the group. */
static void parse_help(const char *help, option_list *out) {
    out->n = 0;
    const char *line = help;
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[256];
        if (len >= sizeof buf) len = sizeof buf - 1;
        memcpy(buf, line, len);
        buf[len] = '\0';
        line = end ? end + 1 : NULL;
        char *p = buf;
        while (*p == ' ') p++;
        if (*p != '-') continue;
        char *gap = strstr(p, "  ");
        if (gap) *gap = '\0';
        int pending[MAX_OPTIONS], n_pending = 0;
        for (char *tok = strtok(p, " "); tok; tok = strtok(NULL, " ")) {
            size_t tl = strlen(tok);
            if (tl && tok[tl - 1] == ',') tok[--tl] = '\0';
            if (tok[0] == '-' && out->n < MAX_OPTIONS && tl < sizeof out->name[0]) {
                snprintf(out->name[out->n], sizeof out->name[0], "%s", tok);
                out->takes_value[out->n] = 0;
                pending[n_pending++] = out->n++;
            } else if (tl) { /* a placeholder: N, FILE, w, a,b,c */
                for (int k = 0; k < n_pending; k++) out->takes_value[pending[k]] = 1;
                n_pending = 0;
            }
        }
    }
}

/* Run `pairkit <cmd> <args>`; expect exit 2 and `fragment` in stderr
 * (or, with absent = 1, expect `fragment` not there). */
static void expect(const char *cmd, const char *args, const char *fragment, int absent) {
    char line[512];
    snprintf(line, sizeof line, "%s %s", cmd, args);
    int rc = cli_run(line);
    char *err = cli_stderr();
    int found = err && strstr(err, fragment);
    if (absent) CHECK(!found, "pairkit %s: stderr says '%s': %s", line, fragment, err ? err : "");
    else {
        CHECK(rc == 2, "pairkit %s: exit %d, expected 2", line, rc);
        CHECK(found, "pairkit %s: stderr lacks '%s': %s", line, fragment, err ? err : "");
    }
    free(err);
}

static void check_command(const char *cmd) {
    char line[256];
    snprintf(line, sizeof line, "%s --help", cmd);
    CHECK(cli_run(line) == 0, "pairkit %s --help failed", cmd);
    char *help = cli_read(cli_path("out.txt"));
    option_list opts;
    parse_help(help ? help : "", &opts);
    free(help);
    int n_value = 0;
    for (int k = 0; k < opts.n; k++) {
        const char *o = opts.name[k];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) continue;
        char msg[128];
        if (opts.takes_value[k]) {
            snprintf(msg, sizeof msg, "%s needs a value", o);
            expect(cmd, o, msg, 0);
            /* followed by one of the command's options: not taken as its
             * value (`-o -q` wrote a file named -q) */
            char args[128];
            snprintf(args, sizeof args, "%s --help", o);
            snprintf(msg, sizeof msg, "%s needs a value; '--help' is one of this command's options", o);
            expect(cmd, args, msg, 0);
            n_value++;
        } else if (strncmp(cmd, "bench", 5) != 0) {
            /* a flag given last: whatever else fails, not for want of a value */
            snprintf(msg, sizeof msg, "%s needs a value", o);
            expect(cmd, o, msg, 1);
            expect(cmd, o, "unknown option", 1);
        }
    }
    /* `--name=value` for an option that takes no value is refused (the
     * value was taken as the next argument: a catalog, say), for --help
     * too; for one that takes a value it is that value */
    for (int k = 0; k < opts.n; k++) {
        const char *o = opts.name[k];
        if (strncmp(o, "--", 2) != 0) continue;
        char args[128], msg[128];
        snprintf(args, sizeof args, "%s=x", o);
        snprintf(msg, sizeof msg, "%s takes no value", o);
        expect(cmd, args, opts.takes_value[k] ? "takes no value" : msg, opts.takes_value[k]);
    }
    expect(cmd, "--help=x", "--help takes no value", 0);
    expect(cmd, "--no-such-option=3", "unknown option '--no-such-option'", 0);
    /* every option given twice is refused (the later one would win unseen) */
    for (int k = 0; k < opts.n; k++) {
        const char *o = opts.name[k];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) continue;
        char args[128], msg[64];
        if (opts.takes_value[k]) snprintf(args, sizeof args, "%s 1 %s 1", o, o);
        else snprintf(args, sizeof args, "%s %s", o, o);
        snprintf(msg, sizeof msg, "%s given twice", o);
        expect(cmd, args, strncmp(o, "--", 2) == 0 ? msg : "given twice", 0);
    }
    printf("%-16s %2d options, %2d with a value\n", cmd, opts.n, n_value);
    CHECK(opts.n >= 4 && n_value >= 2, "pairkit %s --help: only %d options (%d with a value) found", cmd, opts.n,
          n_value);
    /* thread counts OpenMP cannot start are refused, not attempted (100000 crashed its runtime) */
    int has_threads = 0;
    for (int k = 0; k < opts.n; k++) has_threads |= strcmp(opts.name[k], "--threads") == 0;
    if (has_threads) {
        expect(cmd, "--threads 100000", "--threads: 100000 is out of range 1 .. 1024", 0);
        expect(cmd, "--threads 0", "--threads: 0 is out of range", 0);
    }
    expect(cmd, "--no-such-option", "unknown option '--no-such-option'", 0);
    expect(cmd, "--no-such-option 3", "unknown option '--no-such-option'", 0);
}

int main(void) {
    cli_scratch();
    const char *commands[] = {"angcorr",      "dftimage",      "memsort",        "memsort-gen",
                              "memsort-fill", "bench angcorr", "bench dftimage", "bench memsort"};
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) check_command(commands[k]);
    /* a CUDA kernel named on a build without CUDA: said so, not "unknown" */
    if (!pk_cuda_built()) {
        expect("angcorr", "a b --kernel cuda-naive", "'cuda-naive' is a CUDA kernel, and this build has no CUDA", 0);
        expect("dftimage", "v.npz --kernel cuda-tile-f32", "is a CUDA kernel, and this build has no CUDA backend", 0);
        expect("bench angcorr", "--kernels scalar,cuda-naive", "is a CUDA kernel", 0);
        expect("bench dftimage", "--nvis 10 --kernels cuda-final-f32", "'cuda-final-f32' is a CUDA kernel", 0);
        expect("memsort", "t --kernel cuda", "--kernel: 'cuda' is a CUDA kernel, and this build has no CUDA", 0);
    }
    /* a CUDA kernel named on a build with CUDA, on a machine without a GPU:
     * the reason given is the missing device (it said "not built, or not
     * supported by this machine") */
    if (pk_cuda_built() && pk_cuda_device_count() == 0) {
        cli_write("c2.txt", "2\n1 1\n2 2\n");
        CHECK(cli_run("memsort-gen tr --entries 1000 -q") == 0, "memsort-gen failed");
        const char *runs[] = {"angcorr c2.txt c2.txt --png none -o c2.out --kernel cuda-naive",
                              "memsort tr -o ms --kernel cuda"};
        for (int k = 0; k < 2; k++) {
            int rc = cli_run(runs[k]);
            char *err = cli_stderr();
            CHECK(rc == 1 && err && strstr(err, "cannot run here (no CUDA device is present)"),
                  "pairkit %s: exit %d, %s", runs[k], rc, err ? err : "");
            free(err);
        }
        CHECK(cli_count_files("c2.out") == 0 && cli_count_files("ms") == 0, "an output was left behind");
    }
    /* the name of an unknown kernel in a list (it was read after the list was freed) */
    expect("bench dftimage", "--nvis 10 --kernels no-such", "--kernels: unknown kernel 'no-such'", 0);
    expect("bench angcorr", "--kernels scalar,no-such", "--kernels: unknown kernel 'no-such'", 0);
    expect("angcorr", "a b --kernel no-such", "--kernel: unknown kernel 'no-such'", 0);
    /* run counts and sizes out of range: said so (2^31 runs crashed, 0 exited without a word) */
    expect("bench angcorr", "--runs 2147483648", "--runs: 2147483648 is out of range 1 .. 100000", 0);
    expect("bench memsort", "--runs 0", "--runs: 0 is out of range 1 .. 100000", 0);
    expect("bench dftimage", "--size 0", "--size: 0 is out of range 1 .. 65536", 0);
    expect("bench dftimage", "--nvis 0", "--nvis: 0 is out of range", 0);
    /* the grid checked before the reference (a cell off the sky was blamed
     * on a check pixel the user never gave) */
    expect("bench angcorr", "--backend auto", "--backend: 'auto' is not cpu or cuda", 0);
    expect("bench dftimage", "--backend auto", "--backend: 'auto' is not cpu or cuda", 0);
    expect("bench dftimage", "--vis v.npz --nvis 10", "--vis images the file's visibilities: --nvis would not be used",
           0);
    expect("bench dftimage", "--nvis 10 --cell -0.0005", "cell size must be > 0, got -0.0005", 0);
    expect("bench dftimage", "--nvis 10 --size 700 --cell 0.01", "700 pixels of 0.01 rad reach beyond the sky", 0);
    expect("bench angcorr", "only_data.txt", "give both catalogs, DATA RANDOM, or neither", 0);
    /* --name=value as --name value, and -- before names that start with '-' */
    cli_write("-d.txt", "3\n1 1\n2 2\n300 -20\n");
    cli_write("e.txt", "3\n1 1\n2 2\n300 -20\n");
    CHECK(cli_run("angcorr e.txt e.txt -q --png none --nbins 30 --bin-width 0.5 -o spaced.out") == 0, "spaced run");
    int rc = cli_run("angcorr --nbins=30 --bin-width=0.5 --png=none -q --output=joined.out -- -d.txt e.txt");
    char *spaced = cli_read(cli_path("spaced.out")), *joined = cli_read(cli_path("joined.out"));
    CHECK(rc == 0 && spaced && joined && strcmp(spaced, joined) == 0, "--name=value and --: exit %d, outputs %s", rc,
          spaced && joined && strcmp(spaced, joined) == 0 ? "equal" : "differ");
    free(spaced), free(joined);
    expect("angcorr", "e.txt e.txt --nbins=", "--nbins expects a whole number, got ''", 0);
    /* one past a range's largest value is refused, the largest taken (1024
     * threads: the bound the message states) */
    expect("angcorr", "e.txt e.txt -q --png none -o t.out --threads 1025", "--threads: 1025 is out of range 1 .. 1024",
           0);
    CHECK(cli_run("angcorr e.txt e.txt -q --png none -o t.out --threads 1024") == 0, "--threads 1024 refused");
    /* a count is digits alone: a sign is not one ('-1' read as 2^64 - 1) */
    expect("angcorr", "e.txt e.txt --nbins -1", "--nbins expects a whole number, got '-1'", 0);
    expect("angcorr", "e.txt e.txt --nbins +30", "--nbins expects a whole number, got '+30'", 0);
    /* a number is finite */
    expect("angcorr", "e.txt e.txt --bin-width inf", "--bin-width expects a number, got 'inf'", 0);
    expect("angcorr", "e.txt e.txt --theta-min nan", "--theta-min expects a number, got 'nan'", 0);
    /* a value joined to a flag is not the next argument: not the random
     * catalog (the run went ahead with it), not a third catalog */
    expect("angcorr", "e.txt --quiet=e.txt -o q.out --png none", "pairkit angcorr: --quiet takes no value", 0);
    CHECK(cli_count_files("q.out") == 0, "--quiet=e.txt: q.out written");
    expect("angcorr", "e.txt e.txt --mean-theta=0 --csv m.csv -o m.out", "--mean-theta takes no value", 0);
    expect("angcorr", "e.txt e.txt --mean-theta=", "--mean-theta takes no value", 0);
    expect("bench", "--help=x", "pairkit bench: --help takes no value", 0);
    expect("angcorr", "e.txt e.txt --ra-col=--quiet -o r.out", "takes no value", 1); /* a value, whatever it is */
    expect("angcorr", "e.txt -d.txt", "unknown option '-d.txt'", 0);                 /* without --, an option */
    /* an option and its short name are one option; a value that looks like an option is a value */
    expect("angcorr", "e.txt e.txt -o a.out --output b.out", "--output given twice (as -o and --output)", 0);
    expect("memsort", "t -q --workers 2 --worker 0 --quiet --worker 1", "--quiet given twice (as -q and --quiet)", 0);
    expect("dftimage", "v.npz --sign -1 --size 8 --sign +1", "--sign given twice", 0);
    CHECK(cli_run("angcorr e.txt e.txt -q --png none --nbins 30 --bin-width 0.5 -o dash.out --ra-col -q") == 2,
          "--ra-col -q: exit 2");
    {
        char *err = cli_stderr();
        CHECK(err && !strstr(err, "given twice"), "a value '-q' taken for an option: %s", err ? err : "");
        free(err);
    }
    /* an edges file starting with a UTF-8 byte order mark, as catalogs may */
    cli_write("e_bom.txt",
              "\xEF\xBB\xBF"
              "0 1 2 3\n");
    rc = cli_run("angcorr e.txt e.txt -q --png none -o bom.out --edges e_bom.txt");
    {
        char *err = cli_stderr();
        CHECK(rc == 0, "--edges with a byte order mark: exit %d, %s", rc, err ? err : "");
        free(err);
    }
    /* --write-npz into a missing folder, onto a device, a folder or the
     * file --vis reads: said plainly before the work, as other commands'
     * outputs are (libzip said "Failure to create temporary file", a
     * folder gave "Operation not supported") */
    {
        mkdir(cli_path("npz_dir"), 0777);
        const char *runs[] = {
            "bench dftimage --nvis 10 --write-npz nodir/x.npz", "bench dftimage --nvis 10 --write-npz /dev/full",
            "bench dftimage --nvis 10 --write-npz npz_dir", "bench dftimage --nvis 10 --write-npz vis10.npz",
            "bench dftimage --vis vis10.npz --write-npz vis10.npz"};
        const char *says[] = {"nodir/x.npz: cannot write: the folder nodir does not exist",
                              "/dev/full: is not a regular file", "npz_dir: is a directory, not a file",
                              "wrote vis10.npz (10 visibilities, seed 1)",
                              "vis10.npz: is an input of this run; give the output another name"};
        const int exits[] = {1, 1, 1, 0, 2};
        for (int k = 0; k < 5; k++) {
            int rc_npz = cli_run(runs[k]);
            char *err = cli_stderr(), *out = cli_read(cli_path("out.txt"));
            CHECK(rc_npz == exits[k] && ((err && strstr(err, says[k])) || (out && strstr(out, says[k]))),
                  "pairkit %s: exit %d, %s", runs[k], rc_npz, err ? err : "");
            free(err), free(out);
        }
    }
    /* a device as a text input is refused (/dev/zero was read until memory ran out) */
    {
        const char *runs[] = {"angcorr /dev/zero e.txt -q --png none -o z.out",
                              "angcorr e.txt e.txt -q --png none -o z.out --edges /dev/zero",
                              "memsort tr -o zm -q --regions /dev/zero"};
        for (int k = 0; k < 3; k++) {
            int rc_dev = cli_run(runs[k]);
            char *err = cli_stderr();
            CHECK(rc_dev != 0 && err && strstr(err, "/dev/zero: is a device, not a file"), "pairkit %s: exit %d, %s",
                  runs[k], rc_dev, err ? err : "");
            free(err);
        }
        CHECK(cli_count_files("z.out") == 0 && cli_count_files("zm") == 0, "an output was left behind");
    }
    cli_scratch_remove();
    return check_finish("test_cli_options");
}
