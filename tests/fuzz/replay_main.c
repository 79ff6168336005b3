/* replay_main.c - runs a fuzz target over committed inputs without libFuzzer,
 * so any compiler can check the corpus (suite fuzz-replay).
 *
 *     replay_<target> PATH...     every regular file of each folder, in name
 *                                 order, or PATH itself if it is a file
 *
 * A crash or a failed check inside the target ends the program, as it would
 * end a libFuzzer run; otherwise it prints how many inputs ran and exits 0.
 * An empty corpus is an error: replaying nothing would prove nothing. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional in a target, as in libFuzzer. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                fclose(f);
                free(buf);
                fprintf(stderr, "%s: out of memory\n", path);
                return -1;
            }
            buf = nb;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0)
            break;
    }
    fclose(f);
    /* A private copy of exactly len bytes, so ASan sees reads past the end. */
    uint8_t *input = malloc(len ? len : 1);
    if (!input) {
        free(buf);
        return -1;
    }
    memcpy(input, buf, len);
    free(buf);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    LLVMFuzzerTestOneInput(input, len);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(input);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (ms > 1000)
        fprintf(stderr, "slow input (%.0f ms): %s\n", ms, path);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Returns the number of inputs run, or -1. */
static long run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return run_file(path) == 0 ? 1 : -1;
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn || !(nn[n] = strdup(de->d_name))) {
            names = nn ? nn : names;
            break;
        }
        names = nn;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    long count = 0;
    for (size_t i = 0; i < n; i++) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        free(names[i]);
        if (count < 0 || stat(full, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        count = run_file(full) == 0 ? count + 1 : -1;
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    long total = 0;
    for (int i = 1; i < argc; i++) {
        long n = run_path(argv[i]);
        if (n < 0)
            return 1;
        total += n;
    }
    if (total == 0) {
        fprintf(stderr, "no inputs found in the corpus\n");
        return 1;
    }
    printf("%ld inputs replayed\n", total);
    return 0;
}
