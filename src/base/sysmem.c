/*
 * sysmem.c — how much host memory this process may still take (base
 * stage), so that a run larger than memory fails with a message instead of
 * being killed by the kernel's OOM killer (Linux zero-fills every page of
 * the arena up front). The figure is the least of: MemAvailable
 * (/proc/meminfo); the room under the memory cgroup's limit (v2
 * memory.max - memory.current of this cgroup and its ancestors, or v1
 * memory.limit_in_bytes - memory.usage_in_bytes); and the room under
 * RLIMIT_AS (the limit minus VmSize, less the address space the caller
 * expects to map besides). Each figure is reported with the limit it is
 * the room under: MemTotal for MemAvailable. Elsewhere, or when none can
 * be read, nothing is known and nothing is refused.
 */
#define _GNU_SOURCE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/base.h"

/* The first number after `key` in a text file, times `unit`. */
static int read_keyed(const char *path, const char *key, uint64_t unit, uint64_t *out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    int found = 0;
    size_t k = strlen(key);
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (strncmp(line, key, k) == 0 && sscanf(line + k, " %llu", &v) == 1) {
            *out = (uint64_t)v * unit;
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* One number in a file ("max" is no limit: 0 returned). */
static int read_number(const char *path, uint64_t *out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned long long v;
    int ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    if (ok)
        *out = (uint64_t)v;
    return ok;
}

static void take(sl_host_memory *m, uint64_t avail, uint64_t limit, uint64_t used,
                 uint64_t reserved, const char *source)
{
    if (m->known && avail >= m->available)
        return;
    m->known = 1;
    m->available = avail;
    m->limit = limit;
    m->used = used;
    m->reserved = reserved;
    snprintf(m->source, sizeof m->source, "%s", source);
}

/* cgroup v2: every ancestor's memory.max can bind. */
static void cgroup_v2(sl_host_memory *m, const char *rel)
{
    char dir[512];
    if (snprintf(dir, sizeof dir, "/sys/fs/cgroup%.480s", rel) >= (int)sizeof dir)
        return;
    for (;;) {
        char path[640];
        uint64_t max, cur;
        snprintf(path, sizeof path, "%s/memory.max", dir);
        int has_max = read_number(path, &max);
        snprintf(path, sizeof path, "%s/memory.current", dir);
        if (has_max && read_number(path, &cur))
            take(m, max > cur ? max - cur : 0, max, cur, 0, "the memory cgroup's limit");
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir + strlen("/sys/fs"))
            break;
        *slash = '\0';
    }
}

static void cgroups(sl_host_memory *m)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return;
    char line[600];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *rel;
        if (strncmp(line, "0::", 3) == 0) {
            cgroup_v2(m, line + 3);
        } else if ((rel = strstr(line, ":memory:")) != NULL) {
            char path[700];
            uint64_t limit, used;
            rel += strlen(":memory:");
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", rel);
            int has_limit = read_number(path, &limit);
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", rel);
            if (has_limit && limit < (1ull << 60) && read_number(path, &used))
                take(m, limit > used ? limit - used : 0, limit, used, 0,
                     "the memory cgroup's limit");
        }
    }
    fclose(f);
}

sl_host_memory sl_host_memory_available(uint64_t address_reserve)
{
    sl_host_memory m;
    memset(&m, 0, sizeof m);
    uint64_t avail, total;
    if (read_keyed("/proc/meminfo", "MemAvailable:", 1024, &avail) &&
        read_keyed("/proc/meminfo", "MemTotal:", 1024, &total))
        take(&m, avail, total, total > avail ? total - avail : 0, 0, "MemTotal");
    cgroups(&m);
    struct rlimit rl;
    uint64_t vm;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        read_keyed("/proc/self/status", "VmSize:", 1024, &vm)) {
        uint64_t taken = vm + address_reserve;
        take(&m, rl.rlim_cur > taken ? rl.rlim_cur - taken : 0, rl.rlim_cur, vm, address_reserve,
             "the address-space limit (RLIMIT_AS)");
    }
    return m;
}
