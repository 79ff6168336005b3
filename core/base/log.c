/* log.c - the process's one logger. Plugins reach it through host->log. */
#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "plexus/backend.h"

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
static int threshold = -1; /* -1: not read yet */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static char debug_cats[256];

static void read_env(void)
{
    const char *d = getenv("PLEXUS_DEBUG");
    if (d)
        snprintf(debug_cats, sizeof debug_cats, ",%s,", d);
    if (threshold < 0)
        threshold = PLX_LOG_WARN;
    const char *l = getenv("PLEXUS_CORE_LOG_LEVEL");
    if (l)
        plx__log_set_level(l);
}

void plx__log_set_level(const char *name)
{
    for (int i = 0; i <= PLX_LOG_TRACE; i++)
        if (!strcasecmp(name, level_names[i]) || (i == PLX_LOG_WARN && !strcasecmp(name, "warning")))
            threshold = i;
}

static int category_on(const char *category)
{
    if (!debug_cats[0])
        return 0;
    if (strstr(debug_cats, ",all,"))
        return 1;
    /* A backend instance logs as "tcp 'world'": PLEXUS_DEBUG=tcp names the backend. */
    const char *cat = category ? category : "";
    char key[64];
    snprintf(key, sizeof key, ",%.*s,", (int)strcspn(cat, " "), cat);
    return strstr(debug_cats, key) != NULL;
}

int plx__log_enabled(int level, const char *category)
{
    pthread_once(&env_once, read_env);
    if (level <= threshold)
        return 1;
    return level <= PLX_LOG_DEBUG && category_on(category);
}

void plx__vlog(int level, const char *category, const char *fmt, va_list ap)
{
    if (!plx__log_enabled(level, category))
        return;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (level < 0)
        level = 0;
    if (level > PLX_LOG_TRACE)
        level = PLX_LOG_TRACE;
    /* One fprintf per line so lines from threads do not interleave. */
    fprintf(stderr, "plexus[%d] %s %s: %s\n", (int)getpid(), level_names[level], category ? category : "core", msg);
}

void plx__log(int level, const char *category, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    plx__vlog(level, category, fmt, ap);
    va_end(ap);
}
