/* find.c - look for a library where the dynamic loader would, by its file
 * alone. The probe runs in every process of every job (auto probes each
 * backend): loading libucc there would map UCX into processes that then use
 * another backend, and an MPI over UCX started later in the same process
 * (MPICH 5) fails when UCX's base library came in before its protocol
 * layer. So the probe only finds the file; the library is loaded at the
 * first communicator. */
#include "find.h"

#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct look {
    const char *name;
    char *path, *searched;
    size_t n, sn;
    int found;
};

static void try_dir(struct look *l, const char *dir, size_t len)
{
    if (l->found || !len)
        return;
    snprintf(l->path, l->n, "%.*s/%s", (int)len, dir, l->name);
    l->found = access(l->path, R_OK) == 0;
}

/* Each folder of a list separated by sep. */
static void try_list(struct look *l, const char *list, const char *sep)
{
    while (list && *list && !l->found) {
        size_t len = strcspn(list, sep);
        try_dir(l, list, len);
        list += len + (list[len] != '\0');
    }
}

/* The folders of an ld.so.conf file, following its include lines (one level
 * of glob, as Debian's is written). */
static void try_conf(struct look *l, const char *file, int depth)
{
    FILE *f = fopen(file, "r");
    char line[512];
    while (f && !l->found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "#\r\n")] = '\0';
        char *p = line + strspn(line, " \t");
        if (!strncmp(p, "include", 7) && (p[7] == ' ' || p[7] == '\t') && depth < 2) {
            glob_t g;
            p += 7 + strspn(p + 7, " \t");
            if (glob(p, 0, NULL, &g) == 0)
                for (size_t i = 0; i < g.gl_pathc && !l->found; i++)
                    try_conf(l, g.gl_pathv[i], depth + 1);
            globfree(&g);
        } else if (*p == '/') {
            try_dir(l, p, strcspn(p, " \t"));
        }
    }
    if (f)
        fclose(f);
}

int ucc_find_library(const char *name, const char *extra_dir, char *path, size_t n, char *searched, size_t sn)
{
    struct look l = {.name = name, .path = path, .n = n, .searched = searched, .sn = sn};
    try_list(&l, getenv("LD_LIBRARY_PATH"), ":;");
    try_list(&l, extra_dir, "");
    try_conf(&l, "/etc/ld.so.conf", 0);
    /* The C library's folder (the multiarch one on Debian) and its /usr twin. */
    Dl_info info;
    char libc_dir[512] = "";
    if (dladdr((void *)snprintf, &info) && info.dli_fname && strrchr(info.dli_fname, '/')) {
        snprintf(libc_dir, sizeof libc_dir, "%.*s", (int)(strrchr(info.dli_fname, '/') - info.dli_fname),
                 info.dli_fname);
        try_dir(&l, libc_dir, strlen(libc_dir));
        if (!strncmp(libc_dir, "/lib", 4)) {
            char usr[520];
            snprintf(usr, sizeof usr, "/usr%s", libc_dir);
            try_dir(&l, usr, strlen(usr));
        }
    }
    try_list(&l, "/lib:/usr/lib:/lib64:/usr/lib64", ":");
    snprintf(searched, sn, "LD_LIBRARY_PATH, %s%s/etc/ld.so.conf's folders, %s%s%s, /lib, /usr/lib",
             extra_dir ? extra_dir : "", extra_dir && *extra_dir ? ", " : "",
             libc_dir[0] ? libc_dir : "the C library's folder", strncmp(libc_dir, "/lib", 4) ? "" : " and /usr",
             strncmp(libc_dir, "/lib", 4) ? "" : libc_dir);
    return l.found;
}
