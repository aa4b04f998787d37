/* test_angcorr_input.c - bad catalogs: each gives a clear error naming the
 * file and line, a non-zero exit from the command, and no output file
 * (an existing one is left as it was). Valid oddities (CRLF, tabs, blank
 * lines) are read. */
#include "cli_util.h"
#include "pairkit/angcorr.h"

static const char *good = "3\n60 60\n61.5 60\n62 61\n";

/* The library reports `status` and a message containing every `needle`. */
static void expect_bad(const char *name, const char *text, pk_status status, const char *needle1, const char *needle2) {
    if (text) cli_write(name, text); /* NULL: the file does not exist */
    pk_context ctx;
    pk_context_init(&ctx);
    pk_catalog c;
    pk_status st = pk_catalog_read(&ctx, cli_path(name), PK_UNITS_ARCMIN, &c);
    CHECK(st == status, "%s: status %d, want %d (%s)", name, (int)st, (int)status, ctx.message);
    CHECK(strstr(ctx.message, name) != NULL, "%s: message names the file: %s", name, ctx.message);
    CHECK(!needle1 || strstr(ctx.message, needle1), "%s: message has '%s': %s", name, needle1, ctx.message);
    CHECK(!needle2 || strstr(ctx.message, needle2), "%s: message has '%s': %s", name, needle2, ctx.message);
    if (st == PK_OK) pk_catalog_free(&c);

    /* The command: non-zero exit, message on stderr, old output untouched. */
    cli_write("omega.out", "previous result\n");
    char args[512];
    snprintf(args, sizeof args, "angcorr %s good.txt -o omega.out -q", name);
    int rc = cli_run(args);
    char *err = cli_stderr();
    CHECK(rc != 0, "%s: command exit code %d", name, rc);
    CHECK(err && strstr(err, name), "%s: stderr names the file: %s", name, err ? err : "");
    CHECK(!needle1 || (err && strstr(err, needle1)), "%s: stderr has '%s'", name, needle1);
    char *old = cli_read(cli_path("omega.out"));
    CHECK(old && strcmp(old, "previous result\n") == 0, "%s: the old omega.out was changed", name);
    CHECK(cli_count_files(".tmp") == 0 && cli_count_files(".png") == 0, "%s: a partial file was left", name);
    free(err);
    free(old);
}

int main(void) {
    cli_scratch();
    cli_write("good.txt", good);

    expect_bad("missing.txt", NULL, PK_ERR_IO, "cannot open", NULL);
    expect_bad("count_large.txt", "4\n60 60\n61 60\n62 61\n", PK_ERR_PARSE, "says 4 objects but the file has 3 rows",
               NULL);
    expect_bad("count_huge.txt", "5\n1 2\n3 4\n5 6\n", PK_ERR_PARSE, ":4: the count on line 1 says 5 objects",
               "the file has 3 rows");
    expect_bad("hex.txt", "3\n60 60\n61 0x10\n62 61\n", PK_ERR_PARSE, ":3:", "'0x10' is not a number");
    expect_bad("csv_like.dat", "# a comment\nra,dec\n1,2\n", PK_ERR_PARSE,
               ":1:", "(a CSV catalog? name it .csv or give --format csv)");
    /* a FITS file under a name the format is not told by (a shell's <(...)
     * gives /dev/fd/N): read as native text, and said to be FITS */
    expect_bad("fits_named.dat",
               "SIMPLE  =                    T / a FITS file's first card                        "
               "BITPIX  =                    8                                                  ",
               PK_ERR_PARSE, ":1:", "(a FITS file, read as native text because its name does not end in .fits");
    expect_bad("count_small.txt", "2\n60 60\n61 60\n62 61\n", PK_ERR_PARSE, ":4:", "more rows than the 2 objects");
    expect_bad("text.txt", "3\n60 60\n61 abc\n62 61\n", PK_ERR_PARSE, ":3:", "'abc' is not a number");
    expect_bad("text_suffix.txt", "3\n60 60\n61 60x\n62 61\n", PK_ERR_PARSE, ":3:", "'60x' is not a number");
    /* bytes a terminal would not show, shown escaped */
    expect_bad("two_cr.txt", "3\n60 60\n61 20\r\r\n62 61\n", PK_ERR_PARSE, ":3:", "dec '20\\r' is not a number");
    expect_bad("form_feed.txt", "3\n60 60\n61 20\f\n62 61\n", PK_ERR_PARSE, ":3:", "dec '20\\f' is not a number");
    expect_bad("control.txt", "3\n60 60\n61\x01 20\n62 61\n", PK_ERR_PARSE, ":3:", "ra '61\\x01' is not a number");
    expect_bad("cr_only.txt", "3\r60 60\r61 20\r62 61\r", PK_ERR_PARSE, ":1:",
               "found '3\\r60 60\\r61 20\\r62 61' (carriage returns without line feeds: lines must end in LF or CRLF)");
    expect_bad("nan.txt", "3\n60 60\nnan 60\n62 61\n", PK_ERR_PARSE, ":3:", "ra is not a finite number");
    expect_bad("inf.txt", "3\n60 60\n61 -inf\n62 61\n", PK_ERR_PARSE, ":3:", "dec is not a finite number");
    expect_bad("overflow.txt", "3\n60 60\n61 1e999\n62 61\n", PK_ERR_PARSE, ":3:", "not a finite number");
    expect_bad("dec_high.txt", "3\n60 60\n61 5400.5\n62 61\n", PK_ERR_PARSE, ":3:", "outside [-90, 90] degrees");
    expect_bad("dec_low.txt", "3\n60 60\n61 60\n62 -6000\n", PK_ERR_PARSE, ":4:", "outside [-90, 90] degrees");
    expect_bad("empty.txt", "", PK_ERR_PARSE, "empty file", NULL);
    expect_bad("blank.txt", "\n  \n", PK_ERR_PARSE, "empty file", NULL);
    expect_bad("no_count.txt", "60 60\n61 60\n", PK_ERR_PARSE, ":1:", "object count");
    expect_bad("zero.txt", "0\n", PK_ERR_PARSE, "at least 1", NULL);
    expect_bad("three_values.txt", "2\n60 60 1\n61 60\n", PK_ERR_PARSE, ":2:", "found more");
    expect_bad("one_value.txt", "2\n60 60\n61\n", PK_ERR_PARSE, ":3:", "expected 2 values");
    expect_bad("binary.txt",
               "\x7f"
               "ELF\x02\x01\x01 binary",
               PK_ERR_PARSE, ":1:", "object count");
    {
        /* a NUL in the middle: write it by hand */
        FILE *fp = fopen(cli_path("nul.txt"), "wb");
        fwrite("2\n60 60\n6\0 60\n", 1, 15, fp);
        fclose(fp);
        pk_context ctx;
        pk_context_init(&ctx);
        pk_catalog c;
        CHECK(pk_catalog_read(&ctx, cli_path("nul.txt"), PK_UNITS_ARCMIN, &c) == PK_ERR_PARSE, "NUL byte: %s",
              ctx.message);
    }

    expect_bad("gz.txt.gz", "\x1f\x8b\x08\x00 not really gzip", PK_ERR_PARSE, "gzip-compressed", "gunzip it first");

    /* Valid: CRLF, tabs, blank lines, trailing spaces, exponents, a UTF-8
     * byte-order mark. */
    {
        cli_write("bom.txt",
                  "\xEF\xBB\xBF"
                  "3\n60 60\n61.5 60\n62 61\n");
        pk_context ctx;
        pk_context_init(&ctx);
        pk_catalog c;
        CHECK(pk_catalog_read(&ctx, cli_path("bom.txt"), PK_UNITS_ARCMIN, &c) == PK_OK && c.n == 3,
              "a byte-order mark before the count: %s", ctx.message);
        pk_catalog_free(&c);
    }
    {
        cli_write("crlf.txt", "3\r\n60\t60\r\n\r\n61.5 \t 60 \r\n6.2e1\t61\r\n");
        pk_context ctx;
        pk_context_init(&ctx);
        pk_catalog c;
        pk_status st = pk_catalog_read(&ctx, cli_path("crlf.txt"), PK_UNITS_ARCMIN, &c);
        CHECK(st == PK_OK, "CRLF and tabs are valid: %s", ctx.message);
        if (st == PK_OK) {
            CHECK(c.n == 3, "3 objects");
            CHECK(c.ra[2] == pk_units_to_rad(62.0, PK_UNITS_ARCMIN) &&
                      c.dec[1] == pk_units_to_rad(60.0, PK_UNITS_ARCMIN),
                  "values parsed as double and converted");
            pk_catalog_free(&c);
        }
        int rc = cli_run("angcorr crlf.txt good.txt -o crlf.out -q --png none");
        CHECK(rc == 0, "the command reads CRLF catalogs (exit %d)", rc);
    }
    /* Units: 90 degrees of dec is the limit in every unit. */
    {
        pk_context ctx;
        pk_context_init(&ctx);
        pk_catalog c;
        cli_write("deg.txt", "2\n10 90\n350 -90\n");
        CHECK(pk_catalog_read(&ctx, cli_path("deg.txt"), PK_UNITS_DEG, &c) == PK_OK, "deg at the poles: %s",
              ctx.message);
        pk_catalog_free(&c);
        CHECK(pk_catalog_read(&ctx, cli_path("deg.txt"), PK_UNITS_RAD, &c) == PK_ERR_PARSE, "90 rad is out of range");
    }
    /* Bad options of the command. */
    CHECK(cli_run("angcorr good.txt good.txt --units parsec") == 2, "bad --units");
    CHECK(cli_run("angcorr good.txt good.txt --nbins 12x") == 2, "bad --nbins");
    CHECK(cli_run("angcorr good.txt good.txt --bin-width -1 -q") != 0, "negative bin width");
    CHECK(cli_run("angcorr good.txt") == 2, "one catalog only");
    CHECK(cli_run("angcorr good.txt good.txt --kernel nonsense") == 2, "unknown kernel");
    /* weights whose pair products leave double precision: refused naming
     * the file and column (1e-170 gave NaN in every bin, exit 0; 1e200 an
     * internal check's failure) */
    {
        const char *tiny = "ra,dec,weight\n10,10,1e-170\n10.5,10.2,2e-170\n11,9,1e-170\n";
        const char *huge = "ra,dec,weight\n10,10,1e200\n10.5,10.2,2e200\n11,9,1e200\n";
        /* at the limits: 1e-150, and 300 weights of 1e150 / 300, whose
         * sum rounds to a hair above 1e150 */
        static char fine[300 * 48 + 64];
        int at = snprintf(fine, sizeof fine, "ra,dec,weight\n10,10,1e-150\n");
        for (int i = 0; i < 300; i++)
            at += snprintf(fine + at, sizeof fine - (size_t)at, "%.4f,%.4f,3.333333333333333e147\n", 10 + 0.01 * i,
                           10 - 0.005 * i);
        cli_write("rand.csv", "ra,dec\n10,10.1\n10.4,10\n11.2,9.3\n12,8\n");
        const char *texts[3] = {tiny, huge, fine}, *names[3] = {"tiny_w.csv", "huge_w.csv", "fine_w.csv"};
        for (int k = 0; k < 3; k++) {
            cli_write(names[k], texts[k]);
            char args[256];
            snprintf(args, sizeof args, "angcorr %s rand.csv --data-weight-col weight -o w.out --png none -q",
                     names[k]);
            int rc = cli_run(args);
            char *err = cli_stderr();
            if (k < 2)
                CHECK(rc == 1 && err && strstr(err, names[k]) && strstr(err, "column 'weight': |weights| from"),
                      "%s: exit %d, %s", names[k], rc, err ? err : "");
            else CHECK(rc == 0, "%s (at the limits): exit %d, %s", names[k], rc, err ? err : "");
            free(err);
        }
        /* the library says it too */
        pk_context ctx;
        pk_context_init(&ctx);
        double ra[2] = {0.1, 0.2}, dec[2] = {0.0, 0.1}, w[2] = {1e-170, 1e-170};
        pk_catalog cat;
        CHECK_OK(pk_catalog_from_arrays(&ctx, 2, ra, dec, PK_UNITS_RAD, "two", &cat), &ctx);
        pk_bins bins;
        CHECK_OK(pk_bins_linear(&ctx, 0.0, 0.01, 10, &bins), &ctx);
        pk_angcorr_features f = {0};
        f.weights_a = w;
        uint64_t counts[10];
        double weighted[10];
        pk_status st = pk_angcorr_count_ex(&ctx, NULL, &cat, NULL, &bins, &f, counts, weighted, NULL, NULL);
        CHECK(st == PK_ERR_INVALID && strstr(ctx.message, "|weights| from 1e-170"), "library, tiny weights: %d %s",
              (int)st, ctx.message);
        pk_bins_free(&bins);
        pk_catalog_free(&cat);
    }
    /* edge files: a NUL byte (the edges after it were dropped) and
     * hexadecimal numbers (strtod reads them) refused, naming the line */
    {
        pk_context ctx;
        pk_context_init(&ctx);
        pk_bins b;
        FILE *f = fopen(cli_path("nul_edges.txt"), "wb");
        if (f) fwrite("0.1\n0.5\n2\n\0\n5\n10\n", 1, 17, f), fclose(f);
        pk_status st = pk_bins_read_edges(&ctx, cli_path("nul_edges.txt"), &b);
        CHECK(st == PK_ERR_PARSE && strstr(ctx.message, "nul_edges.txt:4: a NUL byte"), "NUL in edges: %d %s", (int)st,
              ctx.message);
        if (st == PK_OK) pk_bins_free(&b);
        cli_write("hex_edges.txt", "0.1\n0x1\n0x2\n");
        st = pk_bins_read_edges(&ctx, cli_path("hex_edges.txt"), &b);
        CHECK(st == PK_ERR_PARSE && strstr(ctx.message, "hex_edges.txt:2: '0x1' is not an edge"), "hex edges: %d %s",
              (int)st, ctx.message);
        if (st == PK_OK) pk_bins_free(&b);
        cli_write("ok_edges.txt", "0.1 0.5\n2e0\n");
        CHECK_OK(pk_bins_read_edges(&ctx, cli_path("ok_edges.txt"), &b), &ctx);
        CHECK(b.n_bins == 2, "ok edges: %zu bins", (size_t)b.n_bins);
        pk_bins_free(&b);
    }
    cli_scratch_remove();
    return check_finish("test_angcorr_input");
}
