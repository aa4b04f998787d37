/* test_fault_disk.c - a full disk while writing output. Every output the
 * command writes goes into a 64 KiB tmpfs that already holds an old copy
 * of it and is filled up to leave 0 bytes, then 4 KiB, then 24 KiB free.
 * The command must fail with a message naming the file, the old copy must
 * be left byte for byte, and no other file (temporary or partial) may
 * remain. Writers: angcorr's omega.out, CSV and PNG; dftimage's FITS image
 * and PNG; the .npz writer; memsort's memsort.bin + summary.txt;
 * memsort-fill's fill.bin + fill.txt; memsort-gen's chunk files.
 *
 * Needs root (mount); skips with exit code 77 when mounting is not
 * permitted. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "pairkit/dftimage.h"
#include "pairkit/memsort.h"

static char disk[300];

/* Free bytes to leave: none, one page, six pages (a write fails part way). */
static const long free_bytes[3] = {0, 4096, 24576};

static void remove_all(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            remove_all(path);
            rmdir(path);
        } else {
            unlink(path);
        }
    }
    if (d) closedir(d);
}

static void put(const char *path, const char *text) {
    FILE *fp = fopen(path, "wb");
    if (!fp || fputs(text, fp) < 0 || fclose(fp) != 0) {
        perror(path);
        exit(1);
    }
}

/* Fill the disk to ENOSPC with disk/filler, then give back `keep` bytes. */
static void fill(long keep) {
    char path[400];
    snprintf(path, sizeof path, "%s/filler", disk);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        exit(1);
    }
    static char block[4096];
    memset(block, 'f', sizeof block);
    off_t size = 0;
    for (;;) {
        ssize_t got = write(fd, block, sizeof block);
        if (got <= 0) break;
        size += got;
    }
    if (keep > 0 && ftruncate(fd, size > keep ? size - keep : 0) != 0) perror("ftruncate");
    close(fd);
}

/* The names in dir (one level, then one level below), sorted, in buf. */
static void listing(const char *dir, const char *prefix, char *buf, size_t size) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char names[64][300];
    int n = 0;
    while (d && (e = readdir(d)) != NULL && n < 64) {
        if (e->d_name[0] == '.') continue;
        snprintf(names[n++], sizeof names[0], "%.40s%.255s", prefix, e->d_name);
    }
    if (d) closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(names[j], names[i]) < 0) {
                char t[300];
                memcpy(t, names[i], sizeof t);
                memcpy(names[i], names[j], sizeof t);
                memcpy(names[j], t, sizeof t);
            }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s ", names[i]);
        char sub[700];
        snprintf(sub, sizeof sub, "%s/%s", dir, names[i] + strlen(prefix));
        struct stat sb;
        if (stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            char p2[300];
            snprintf(p2, sizeof p2, "%s%s/", prefix, names[i] + strlen(prefix));
            listing(sub, p2, buf, size);
        }
    }
}

typedef struct fault_case {
    const char *name;
    const char *args;         /* %s: the tmpfs folder */
    const char *outputs[3];   /* files (relative to the tmpfs) that hold an old copy */
    const char *old_dir;      /* a folder to create first, or NULL */
    const char *expect_error; /* a fragment of the message */
    int sweep;                /* 1: every free size from 0 to 60 KiB in pages, not only free_bytes */
} fault_case;

static void run_case(const fault_case *c) {
    int n_sizes = c->sweep ? 16 : 3;
    for (int k = 0; k < n_sizes; k++) {
        long free_now = c->sweep ? 4096L * k : free_bytes[k];
        remove_all(disk);
        if (c->old_dir) {
            char p[400];
            snprintf(p, sizeof p, "%s/%s", disk, c->old_dir);
            mkdir(p, 0777);
        }
        char old_text[3][128];
        for (int o = 0; o < 3 && c->outputs[o]; o++) {
            char p[400];
            snprintf(p, sizeof p, "%s/%s", disk, c->outputs[o]);
            snprintf(old_text[o], sizeof old_text[o], "the old %s, which must survive\n", c->outputs[o]);
            put(p, old_text[o]);
        }
        char before[2048] = "";
        listing(disk, "", before, sizeof before);
        fill(free_now);
        char args[2048];
        snprintf(args, sizeof args, c->args, disk, disk, disk);
        int rc = cli_run(args);
        char *err = cli_stderr();
        char after[2048] = "";
        listing(disk, "", after, sizeof after);
        printf("%-22s free %5ld: exit %d, %s", c->name, free_now, rc, err && err[0] ? err : "(no message)\n");
        if (c->sweep && rc == 0) {
            /* enough room: the new files replaced the old ones, nothing else */
            for (int o = 0; o < 3 && c->outputs[o]; o++) {
                char p[400];
                snprintf(p, sizeof p, "%s/%s", disk, c->outputs[o]);
                char *text = cli_read(p);
                CHECK(text && strcmp(text, old_text[o]) != 0, "%s, %ld bytes free: success left the old %s", c->name,
                      free_now, c->outputs[o]);
                free(text);
            }
            free(err);
            continue;
        }
        CHECK(rc != 0, "%s, %ld bytes free: exit code 0 on a full disk", c->name, free_now);
        CHECK(err && strstr(err, c->expect_error), "%s, %ld bytes free: message lacks '%s': %s", c->name, free_now,
              c->expect_error, err ? err : "");
        /* the filler is the only new name */
        char *filler = strstr(after, "filler ");
        if (filler) memmove(filler, filler + 7, strlen(filler + 7) + 1);
        CHECK(strcmp(after, before) == 0, "%s, %ld bytes free: files left are '%s', expected '%s'", c->name, free_now,
              after, before);
        for (int o = 0; o < 3 && c->outputs[o]; o++) {
            char p[400];
            snprintf(p, sizeof p, "%s/%s", disk, c->outputs[o]);
            char *text = cli_read(p);
            CHECK(text && strcmp(text, old_text[o]) == 0, "%s, %ld bytes free: the old %s was %s", c->name, free_now,
                  c->outputs[o], text ? "changed" : "removed");
            free(text);
        }
        free(err);
    }
}

/* Inputs in the scratch folder: two catalogs, visibilities, a region
 * table and a trace. */
static void make_inputs(void) {
    check_rng rng = check_rng_make(7);
    for (int f = 0; f < 2; f++) {
        FILE *fp = fopen(cli_path(f ? "random.txt" : "data.txt"), "wb");
        fprintf(fp, "1500\n");
        for (int i = 0; i < 1500; i++)
            fprintf(fp, "%.6f %.6f\n", 5400 * check_uniform(&rng), 5400 * check_uniform(&rng));
        fclose(fp);
    }
    pk_context ctx;
    pk_context_init(&ctx);
    pk_vis vis;
    CHECK_OK(pk_vis_random(&ctx, 2000, 3, &vis), &ctx);
    CHECK_OK(pk_vis_write_npz(&ctx, cli_path("vis.npz"), &vis), &ctx);
    pk_vis_free(&vis);
    cli_write("regions.txt", "ROM 0x80000000 32K 4 2048\nINPUT 0x90000000 32K 4 2048\nRAM 0xA0000000 512K 8 4096\n");
    pk_memsort_regions regions;
    CHECK_OK(pk_memsort_regions_read(&ctx, cli_path("regions.txt"), &regions), &ctx);
    pk_memsort_gen_options gen = {20000, 5, 4096, 0};
    pk_memsort_trace trace;
    CHECK_OK(pk_memsort_generate(&ctx, &regions, &gen, &trace), &ctx);
    CHECK_OK(pk_memsort_trace_write(&ctx, cli_path("trace"), &trace), &ctx);
    pk_memsort_trace_free(&trace);
    gen.n_entries = 3000;
    CHECK_OK(pk_memsort_generate(&ctx, &regions, &gen, &trace), &ctx);
    CHECK_OK(pk_memsort_trace_write(&ctx, cli_path("small_trace"), &trace), &ctx);
    pk_memsort_trace_free(&trace);
    /* the small trace's plans, for memsort-fill */
    CHECK(cli_run("memsort small_trace --regions regions.txt --backend cpu -q -o plans") == 0, "memsort for the plans");
}

/* A trace written over an older, longer one: the older chunks go. */
static void test_stale_chunks(void) {
    int rc = cli_run("memsort-gen stale --regions regions.txt --entries 20000 --chunk 2048");
    CHECK(rc == 0 && cli_count_files("stale") == 1, "memsort-gen: exit %d", rc);
    rc = cli_run("memsort-gen stale --regions regions.txt --entries 9000 --chunk 2048");
    char path[400];
    snprintf(path, sizeof path, "%s/stale", cli_dir);
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    if (d) closedir(d);
    CHECK(rc == 0 && n == 5, "a 5-chunk trace over a 10-chunk one: exit %d, %d files", rc, n);
    printf("memsort-gen over a longer trace: exit %d, %d chunk files\n", rc, n);
}

int main(void) {
    if (geteuid() != 0) return check_skip("test_fault_disk", "needs root to mount a small tmpfs");
    cli_scratch();
    snprintf(disk, sizeof disk, "%s/disk", cli_dir);
    mkdir(disk, 0777);
    if (mount("tmpfs", disk, "tmpfs", 0, "size=64k") != 0) {
        char why[128];
        snprintf(why, sizeof why, "cannot mount a tmpfs: %s", strerror(errno));
        cli_scratch_remove();
        return check_skip("test_fault_disk", why);
    }
    make_inputs();
    const fault_case cases[] = {
        {"angcorr omega.out",
         "angcorr data.txt random.txt --backend cpu -q -o %s/omega.out --png none",
         {"omega.out"},
         NULL,
         "omega.out",
         0},
        {"angcorr csv",
         "angcorr data.txt random.txt --backend cpu -q -o omega.out --png none --csv %s/omega.csv",
         {"omega.csv"},
         NULL,
         "omega.csv",
         0},
        {"angcorr png",
         "angcorr data.txt random.txt --backend cpu -q -o omega.out --png %s/omega.png",
         {"omega.png"},
         NULL,
         "omega.png",
         0},
        {"dftimage fits",
         "dftimage vis.npz --backend cpu -q --size 128 -o %s/image.fits",
         {"image.fits"},
         NULL,
         "image.fits",
         0},
        {"dftimage png",
         "dftimage vis.npz --backend cpu -q --size 128 -o image.fits --png %s/image.png",
         {"image.png"},
         NULL,
         "image.png",
         0},
        {"memsort",
         "memsort trace --regions regions.txt --backend cpu -q -o %s/out",
         {"out/memsort.bin", "out/summary.txt"},
         "out",
         "out/",
         0},
        {"memsort (small)",
         "memsort small_trace --regions regions.txt --backend cpu -q -o %s/out",
         {"out/memsort.bin", "out/summary.txt"},
         "out",
         "out/",
         1},
        {"memsort-fill",
         "memsort-fill plans small_trace --regions regions.txt -q -o %s/fill",
         {"fill/fill.bin", "fill/fill.txt"},
         "fill",
         "fill/",
         1},
        {"npz (bench --write-npz)",
         "bench dftimage --write-npz %s/vis.npz --nvis 20000",
         {"vis.npz"},
         NULL,
         "vis.npz",
         0},
        {"memsort-gen",
         "memsort-gen %s/trace --regions regions.txt --entries 20000 --chunk 4096",
         {"trace/mem_addr_0000.bin"},
         "trace",
         "trace/",
         0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) run_case(&cases[k]);
    test_stale_chunks();
    remove_all(disk);
    if (umount2(disk, MNT_DETACH) != 0) perror("umount");
    cli_scratch_remove();
    return check_finish("test_fault_disk");
}
