/* Config parsing and the cross-process VRAM / allocation model of the AMD stand-in (see amd.h). */
#define _GNU_SOURCE
#include "amd.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

as_config as_cfg;

#define AS_ALIGN (2ULL << 20)
#define MAX_LINES 2048

static char *keys[MAX_LINES];
static char *vals[MAX_LINES];
static int nlines;
static unsigned char *maps[AS_MAX_DEVS];

static const char *get(const char *key) {
    for (int i = 0; i < nlines; i++)
        if (strcmp(keys[i], key) == 0) return vals[i];
    return NULL;
}

static const char *dget(int d, const char *leaf) {
    char k[128];
    snprintf(k, sizeof k, "dev.%d.%s", d, leaf);
    return get(k);
}

static unsigned long long num(const char *v, unsigned long long dflt) { return v ? strtoull(v, NULL, 0) : dflt; }

static void str(char *dst, size_t n, const char *v, const char *dflt) { snprintf(dst, n, "%s", v ? v : dflt); }

void as_reset(void) {
    for (int i = 0; i < nlines; i++) { free(keys[i]); free(vals[i]); }
    nlines = 0;
    for (int d = 0; d < AS_MAX_DEVS; d++) {
        if (maps[d]) munmap(maps[d], as_cfg.devs[d].total);
        maps[d] = NULL;
    }
    memset(&as_cfg, 0, sizeof as_cfg);
}

int as_load(void) {
    if (as_cfg.loaded) return 0;
    const char *path = getenv("DRA_AMD_STANDIN_CONFIG");
    if (!path) return -1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    while (nlines < MAX_LINES && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = 0;
        keys[nlines] = strdup(line);
        vals[nlines] = strdup(eq + 1);
        nlines++;
    }
    fclose(f);
    str(as_cfg.state_dir, sizeof as_cfg.state_dir, get("state_dir"), "/tmp");
    str(as_cfg.driver_version, sizeof as_cfg.driver_version, get("driver_version"), "6.12.12");
    as_cfg.hip_runtime_version = (int)num(get("hip_runtime_version"), 70051831);
    as_cfg.ras = (int)num(get("ras"), 1);
    as_cfg.residue_byte = get("residue_byte") ? atoi(get("residue_byte")) : -1;
    as_cfg.memset_skip_tail = (int)num(get("memset_skip_tail"), 0);
    as_cfg.ndevs = (int)num(get("ndevs"), 0);
    if (as_cfg.ndevs > AS_MAX_DEVS) as_cfg.ndevs = AS_MAX_DEVS;
    for (int d = 0; d < as_cfg.ndevs; d++) {
        as_dev *v = &as_cfg.devs[d];
        str(v->uuid, sizeof v->uuid, dget(d, "uuid"), "");
        str(v->hip_uuid, sizeof v->hip_uuid, dget(d, "hip_uuid"), "");
        v->card = (unsigned)num(dget(d, "card"), (unsigned long long)d);
        v->render = (unsigned)num(dget(d, "render"), 128ULL + (unsigned long long)d);
        v->hip_id = (unsigned)num(dget(d, "hip_id"), (unsigned long long)d);
        v->hsa_id = (unsigned)num(dget(d, "hsa_id"), (unsigned long long)d + 1);
        v->bdf = num(dget(d, "bdf"), 0);
        v->partition_id = (unsigned)num(dget(d, "partition_id"), 0);
        v->kfd_node = (unsigned)num(dget(d, "kfd_node"), (unsigned long long)d + 1);
        str(v->compute_partition, sizeof v->compute_partition, dget(d, "compute_partition"), "SPX");
        str(v->memory_partition, sizeof v->memory_partition, dget(d, "memory_partition"), "NPS1");
        v->total = num(dget(d, "total"), 64ULL << 20);
        v->context_overhead = num(dget(d, "context_overhead"), 4ULL << 20);
        v->ecc_enabled = num(dget(d, "ecc_enabled"), 0xffffULL);
        v->ecc_uncorrectable = num(dget(d, "ecc_uncorrectable"), 0);
        v->error = (int)num(dget(d, "error"), 0);
        str(v->error_call, sizeof v->error_call, dget(d, "error_call"), "");
        str(v->extra_pids, sizeof v->extra_pids, dget(d, "extra_pids"), "");
    }
    as_cfg.loaded = 1;
    return 0;
}

static void path_of(int dev, const char *what, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s-%d", as_cfg.state_dir, what, dev);
}

unsigned char *as_map(int dev) {
    if (dev < 0 || dev >= as_cfg.ndevs) return NULL;
    if (maps[dev]) return maps[dev];
    char path[600];
    path_of(dev, "mem", path, sizeof path);
    uint64_t size = as_cfg.devs[dev].total;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    int fresh = fd >= 0;
    if (!fresh) fd = open(path, O_RDWR);
    if (fd < 0) return NULL;
    if (fresh && ftruncate(fd, (off_t)size) != 0) { close(fd); return NULL; }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return NULL;
    if (fresh && as_cfg.residue_byte >= 0) memset(p, as_cfg.residue_byte, size);
    maps[dev] = p;
    return maps[dev];
}

int as_lock(int dev) {
    char path[600];
    path_of(dev, "tab", path, sizeof path);
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX) != 0) { close(fd); return -1; }
    return fd;
}

void as_unlock(int fd) {
    if (fd >= 0) { flock(fd, LOCK_UN); close(fd); }
}

int as_alive(int pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')');
    return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

int as_read(int fd, int dev, as_entry *tab) {
    memset(tab, 0, sizeof(as_entry) * AS_TAB);
    if (lseek(fd, 0, SEEK_SET) < 0) return -1;
    ssize_t got = read(fd, tab, sizeof(as_entry) * AS_TAB);
    if (got < 0) return -1;
    int changed = 0;
    for (int i = 0; i < AS_TAB; i++) {
        if (!tab[i].kind || as_alive(tab[i].pid)) continue;
        if (as_cfg.ras && tab[i].kind == 2) {  /* VRAM wiped on release (RAS on) */
            unsigned char *m = as_map(dev);
            if (m) memset(m + tab[i].off, 0, tab[i].size);
        }
        memset(&tab[i], 0, sizeof tab[i]);
        changed = 1;
    }
    if (changed) as_write(fd, tab);
    return 0;
}

int as_write(int fd, const as_entry *tab) {
    if (lseek(fd, 0, SEEK_SET) < 0) return -1;
    return write(fd, tab, sizeof(as_entry) * AS_TAB) == (ssize_t)(sizeof(as_entry) * AS_TAB) ? 0 : -1;
}

uint64_t as_used(const as_entry *tab) {
    uint64_t used = 0;
    for (int i = 0; i < AS_TAB; i++) if (tab[i].kind) used += tab[i].size;
    return used;
}

static int overlaps(const as_entry *tab, uint64_t off, uint64_t size) {
    for (int i = 0; i < AS_TAB; i++)
        if (tab[i].kind && off < tab[i].off + tab[i].size && tab[i].off < off + size) return 1;
    return 0;
}

uint64_t as_place(int dev, const as_entry *tab, uint64_t size) {
    uint64_t total = as_cfg.devs[dev].total;
    for (uint64_t off = 0; off + size <= total; off += AS_ALIGN) {
        if (!overlaps(tab, off, size)) return off;
    }
    return UINT64_MAX;
}

int as_add(as_entry *tab, int pid, int kind, uint64_t off, uint64_t size) {
    for (int i = 0; i < AS_TAB; i++) {
        if (!tab[i].kind) {
            tab[i] = (as_entry){pid, kind, off, size};
            return i;
        }
    }
    return -1;
}
