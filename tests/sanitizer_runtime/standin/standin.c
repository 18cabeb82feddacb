/* Config parsing and the cross-process memory/allocation model (see standin.h). */
#define _GNU_SOURCE
#include "standin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

si_config si_cfg;

#define SI_ALIGN (2ULL << 20)
/* 8 GPUs x 8 GIs x 8 CIs (SI_MAX_*) need about 5,000 lines; a config past this is refused, never cut. */
#define MAX_LINES 16384

static char *keys[MAX_LINES];
static char *vals[MAX_LINES];
static int nlines;

static const char *get(const char *key) {
    for (int i = 0; i < nlines; i++)
        if (strcmp(keys[i], key) == 0) return vals[i];
    return NULL;
}

static const char *getf(char *buf, size_t n, const char *fmt, int a, int b, int c, const char *leaf) {
    char k[160];
    snprintf(k, sizeof k, fmt, a, b, c);
    snprintf(buf, n, "%s.%s", k, leaf);
    return get(buf);
}

static unsigned long long num(const char *v, unsigned long long dflt) {
    return v ? strtoull(v, NULL, 0) : dflt;
}

static void str(char *dst, size_t n, const char *v, const char *dflt) {
    snprintf(dst, n, "%s", v ? v : dflt);
}

static char loaded_path[1024];

static void layout_path(char *buf, size_t n) { snprintf(buf, n, "%s/layout", si_cfg.state_dir); }

/* Apply the MIG layout a previous process changed (see si_layout_save). */
static void layout_load(void) {
    char path[600], line[300];
    layout_path(path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        int g, i, c, present, ncis, dead;
        unsigned id, prof, ps, pz, gen;
        char uuid[96];
        if (sscanf(line, "gen %u", &gen) == 1) {
            si_cfg.generation = gen;
        } else if (sscanf(line, "gi %d %d %d %d", &g, &i, &present, &ncis) == 4) {
            if (g < 0 || g >= si_cfg.ngpus || i < 0 || i >= si_cfg.gpus[g].ngis || ncis < 0 || ncis > SI_MAX_CIS) continue;
            si_cfg.gpus[g].gis[i].present = present;
            si_cfg.gpus[g].gis[i].ncis = ncis;
        } else if (sscanf(line, "ci %d %d %d %d %u %u %u %u %95s", &g, &i, &c, &dead, &id, &prof, &ps, &pz, uuid) == 9) {
            if (g < 0 || g >= si_cfg.ngpus || i < 0 || i >= si_cfg.gpus[g].ngis || c < 0 || c >= SI_MAX_CIS) continue;
            si_ci *C = &si_cfg.gpus[g].gis[i].cis[c];
            *C = (si_ci){.index = c, .id = id, .profile_index = prof, .placement_start = ps, .placement_size = pz,
                         .dead = dead};
            snprintf(C->uuid, sizeof C->uuid, "%s", strcmp(uuid, "-") == 0 ? "" : uuid);
        }
    }
    fclose(f);
}

int si_layout_save(void) {
    char path[600], tmp[620];
    layout_path(path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "gen %u\n", si_cfg.generation);
    for (int g = 0; g < si_cfg.ngpus; g++)
        for (int i = 0; i < si_cfg.gpus[g].ngis; i++) {
            const si_gi *I = &si_cfg.gpus[g].gis[i];
            fprintf(f, "gi %d %d %d %d\n", g, i, I->present, I->ncis);
            for (int c = 0; c < I->ncis; c++) {
                const si_ci *C = &I->cis[c];
                fprintf(f, "ci %d %d %d %d %u %u %u %u %s\n", g, i, c, C->dead, C->id, C->profile_index,
                        C->placement_start, C->placement_size, C->uuid[0] ? C->uuid : "-");
            }
        }
    if (fclose(f) != 0) return -1;
    if (rename(tmp, path) != 0) return -1;
    si_caps_publish();
    return 0;
}

/* DeviceFileMinor of a MIG capability as /proc/driver/nvidia-caps/mig-minors numbers them: config 1,
 * monitor 2, then per GPU 15 GIs x (the GI's access + 8 CIs): gpu0/gi0/access 3, gpu0/gi0/ci0/access 4,
 * gpu0/gi1/access 12, gpu0/gi1/ci0/access 13 (MIG User Guide, "Device Nodes and Capabilities"). */
static unsigned cap_minor(unsigned gpu_minor, unsigned gi, int ci) {
    return 3 + gpu_minor * 15 * 9 + gi * 9 + (ci < 0 ? 0 : (unsigned)ci + 1);
}

static void mkdirs(const char *path) {
    char buf[700];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(buf, 0755); *p = '/'; }
    mkdir(buf, 0755);
}

/* Written beside and renamed over: a scan in another thread never sees a live GI's file missing. */
static void cap_write(const char *dir, unsigned minor) {
    char path[800], tmp[820];
    mkdirs(dir);
    snprintf(path, sizeof path, "%s/access", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "DeviceFileMinor: %u\nDeviceFileMode: 292\nDeviceFileModify: 1\n", minor);
    if (fclose(f) == 0) rename(tmp, path);
}

static void cap_remove(const char *dir) {
    char path[800];
    snprintf(path, sizeof path, "%s/access", dir);
    unlink(path);
    rmdir(dir);
}

void si_caps_publish(void) {
    if (!si_cfg.caps_dir[0]) return;
    char dir[700];
    for (int pass = 0; pass < 2; pass++)  /* gone ones first, then the live ones (a reused id stays) */
        for (int g = 0; g < si_cfg.ngpus; g++) {
            const si_gpu *G = &si_cfg.gpus[g];
            if (!G->mig) continue;
            for (int i = 0; i < G->ngis; i++) {
                const si_gi *I = &G->gis[i];
                char gi[600];
                snprintf(gi, sizeof gi, "%s/gpu%u/mig/gi%u", si_cfg.caps_dir, G->minor, I->id);
                for (int c = 0; c < SI_MAX_CIS; c++) {
                    const si_ci *C = &I->cis[c];
                    int live = I->present && c < I->ncis && !C->dead;
                    if (pass == 0 && !I->present) {  /* a GI gone: every CI id it may have had (0..7) */
                        snprintf(dir, sizeof dir, "%s/ci%d", gi, c);
                        cap_remove(dir);
                    } else if (pass == 0 && c < I->ncis && C->dead) {
                        snprintf(dir, sizeof dir, "%s/ci%u", gi, C->id);
                        cap_remove(dir);
                    } else if (pass == 1 && live) {
                        snprintf(dir, sizeof dir, "%s/ci%u", gi, C->id);
                        cap_write(dir, cap_minor(G->minor, I->id, (int)C->id));
                    }
                }
                if (pass == 0 && !I->present) cap_remove(gi);
                if (pass == 1 && I->present) cap_write(gi, cap_minor(G->minor, I->id, -1));
            }
        }
}

int si_load(void) {
    const char *path = getenv("DRA_STANDIN_CONFIG");
    if (!path) return -1;
    if (si_cfg.loaded && strcmp(path, loaded_path) == 0) return 0;  /* unchanged */
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    for (int i = 0; i < nlines; i++) { free(keys[i]); free(vals[i]); }
    char line[1024];
    nlines = 0;
    while (fgets(line, sizeof line, f) && nlines < MAX_LINES) {
        line[strcspn(line, "\r\n")] = 0;
        char *eq = strchr(line, '=');
        if (!eq || line[0] == '#') continue;
        *eq = 0;
        keys[nlines] = strdup(line);
        vals[nlines] = strdup(eq + 1);
        nlines++;
    }
    int truncated = !feof(f);
    fclose(f);
    if (truncated) {  /* a silently shortened node (GPUs falling back to defaults) would prove nothing */
        fprintf(stderr, "stand-in: %s has more than %d lines\n", path, MAX_LINES);
        return -1;
    }
    memset(&si_cfg, 0, sizeof si_cfg);
    str(si_cfg.state_dir, sizeof si_cfg.state_dir, get("state_dir"), "/tmp/dra-standin");
    str(si_cfg.caps_dir, sizeof si_cfg.caps_dir, get("caps_dir"), "");
    str(si_cfg.driver_version, sizeof si_cfg.driver_version, get("driver_version"), "570.124.06");
    si_cfg.cuda_version = (int)num(get("cuda_version"), 12080);
    si_cfg.ptx_isa_max = (int)num(get("ptx_isa_max"), 87);
    si_cfg.scrub_on_free = (int)num(get("scrub_on_free"), 0);
    si_cfg.gi_destroy_scrub = (int)num(get("gi_destroy_scrub"), 0);
    si_cfg.mig_default_refused = (int)num(get("mig_default_refused"), 0);
    si_cfg.residue_byte = get("residue_byte") ? (int)num(get("residue_byte"), 0) : -1;
    si_cfg.residue_len = num(get("residue_len"), 0);
    si_cfg.ngpus = (int)num(get("gpus"), 0);
    if (si_cfg.ngpus > SI_MAX_GPUS) si_cfg.ngpus = SI_MAX_GPUS;
    char k[200];
    for (int g = 0; g < si_cfg.ngpus; g++) {
        si_gpu *G = &si_cfg.gpus[g];
        G->index = g;
        str(G->uuid, sizeof G->uuid, getf(k, sizeof k, "gpu.%d", g, 0, 0, "uuid"), "GPU-00000000-0000-0000-0000-000000000000");
        str(G->name, sizeof G->name, getf(k, sizeof k, "gpu.%d", g, 0, 0, "name"), "NVIDIA H100 80GB HBM3");
        G->minor = (unsigned)num(getf(k, sizeof k, "gpu.%d", g, 0, 0, "minor"), (unsigned long long)g);
        G->arch = (int)num(getf(k, sizeof k, "gpu.%d", g, 0, 0, "arch"), 90);
        G->sms = (int)num(getf(k, sizeof k, "gpu.%d", g, 0, 0, "sms"), 4);
        G->total = num(getf(k, sizeof k, "gpu.%d", g, 0, 0, "total"), 64ULL << 20);
        G->reserved = num(getf(k, sizeof k, "gpu.%d", g, 0, 0, "reserved"), 2ULL << 20);
        G->context_overhead = num(getf(k, sizeof k, "gpu.%d", g, 0, 0, "context_overhead"), 4ULL << 20);
        G->unlisted_used = num(getf(k, sizeof k, "gpu.%d", g, 0, 0, "unlisted_used"), 0);
        G->mig = (int)num(getf(k, sizeof k, "gpu.%d", g, 0, 0, "mig"), 0);
        G->aggregate_error = (int)num(getf(k, sizeof k, "gpu.%d", g, 0, 0, "aggregate_error"), 0);
        G->error = (int)num(getf(k, sizeof k, "gpu.%d", g, 0, 0, "error"), 0);
        str(G->error_call, sizeof G->error_call, getf(k, sizeof k, "gpu.%d", g, 0, 0, "error_call"), "");
        G->ngis = (int)num(getf(k, sizeof k, "gpu.%d", g, 0, 0, "gis"), 0);
        if (G->ngis > SI_MAX_GIS) G->ngis = SI_MAX_GIS;
        for (int i = 0; i < G->ngis; i++) {
            si_gi *I = &G->gis[i];
            I->index = i;
            I->id = (unsigned)num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "id"), (unsigned long long)(i + 1));
            I->profile_index = (unsigned)num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "profile_index"), 0);
            I->profile_id = (unsigned)num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "profile_id"), 19);
            I->slices = (unsigned)num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "slices"), 1);
            I->placement_start = (unsigned)num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "placement_start"), (unsigned long long)i);
            I->placement_size = (unsigned)num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "placement_size"), 1);
            I->memory_mb = num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "memory_mb"), 9856);
            I->total = num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "total"), 32ULL << 20);
            I->reserved = num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "reserved"), 2ULL << 20);
            I->unlisted_used = num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "unlisted_used"), 0);
            I->error = (int)num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "error"), 0);
            str(I->error_call, sizeof I->error_call, getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "error_call"), "");
            I->ncis = (int)num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "cis"), 1);
            if (I->ncis > SI_MAX_CIS) I->ncis = SI_MAX_CIS;
            for (int c = 0; c < I->ncis; c++) {
                si_ci *C = &I->cis[c];
                C->index = c;
                C->id = (unsigned)num(getf(k, sizeof k, "gpu.%d.gi.%d.ci.%d", g, i, c, "id"), (unsigned long long)c);
                C->profile_index = (unsigned)num(getf(k, sizeof k, "gpu.%d.gi.%d.ci.%d", g, i, c, "profile_index"), 0);
                str(C->uuid, sizeof C->uuid, getf(k, sizeof k, "gpu.%d.gi.%d.ci.%d", g, i, c, "uuid"), "MIG-unset");
                C->placement_start = (unsigned)num(getf(k, sizeof k, "gpu.%d.gi.%d.ci.%d", g, i, c, "placement_start"),
                                                   (unsigned long long)c);
                C->placement_size = (unsigned)num(getf(k, sizeof k, "gpu.%d.gi.%d.ci.%d", g, i, c, "placement_size"), 1);
            }
            I->present = (int)num(getf(k, sizeof k, "gpu.%d.gi.%d", g, i, 0, "present"), 1);
            if (!I->present) I->ncis = 0;
        }
    }
    mkdir(si_cfg.state_dir, 0755);
    layout_load();
    si_caps_publish();
    snprintf(loaded_path, sizeof loaded_path, "%s", path);
    si_cfg.loaded = 1;
    return 1;
}

const char *si_key(const si_region *r, char *buf, size_t n) {
    if (r->gi < 0) snprintf(buf, n, "gpu%d", r->gpu);
    else snprintf(buf, n, "gpu%d-gi%d", r->gpu, r->gi);
    return buf;
}

static void path_of(const si_region *r, const char *what, char *buf, size_t n) {
    char k[64];
    snprintf(buf, n, "%s/%s-%s", si_cfg.state_dir, what, si_key(r, k, sizeof k));
}

int si_lock(const si_region *r) {
    char p[700];
    path_of(r, "tab", p, sizeof p);
    int fd = open(p, O_RDWR | O_CREAT, 0644);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX) != 0) { close(fd); return -1; }
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size < (off_t)(sizeof(si_entry) * SI_TAB_ENTRIES)) {
        if (ftruncate(fd, (off_t)(sizeof(si_entry) * SI_TAB_ENTRIES)) != 0) { close(fd); return -1; }
    }
    return fd;
}

void si_unlock(int fd) {
    if (fd >= 0) { flock(fd, LOCK_UN); close(fd); }
}

int si_region_of(int gpu, int gi, si_region *out) {
    memset(out, 0, sizeof *out);
    out->gpu = gpu;
    out->gi = gi;
    const si_gpu *G = &si_cfg.gpus[gpu];
    if (gi < 0) {
        out->size = G->total;
        out->reserved = G->reserved;
        out->unlisted_used = G->unlisted_used;
    } else {
        out->size = G->gis[gi].total;
        out->reserved = G->gis[gi].reserved;
        out->unlisted_used = G->gis[gi].unlisted_used;
    }
    int lock = si_lock(out);
    if (lock < 0) return -1;
    char p[700];
    path_of(out, "mem", p, sizeof p);
    int fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0644);
    int created = fd >= 0;
    if (!created) fd = open(p, O_RDWR);
    if (fd < 0 || (created && ftruncate(fd, (off_t)out->size) != 0)) { si_unlock(lock); if (fd >= 0) close(fd); return -1; }
    void *m = mmap(NULL, out->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) { si_unlock(lock); return -1; }
    out->base = m;
    if (created && si_cfg.residue_byte >= 0) {   /* what the previous boot's tenants left behind */
        uint64_t len = si_cfg.residue_len && si_cfg.residue_len < out->size ? si_cfg.residue_len : out->size;
        memset(out->base, si_cfg.residue_byte, len);
    }
    si_unlock(lock);
    return 0;
}

int si_pid_alive(int pid) {
    char p[64], buf[512];
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')');
    if (!rp || rp[1] != ' ') return 1;
    char state = rp[2];
    return state != 'Z' && state != 'X';  /* a zombie has closed its device files: no context */
}

static int si_reap(const si_region *r, si_entry *tab);

int si_table_read(int fd, const si_region *r, si_entry *tab) {
    if (pread(fd, tab, sizeof(si_entry) * SI_TAB_ENTRIES, 0) != (ssize_t)(sizeof(si_entry) * SI_TAB_ENTRIES))
        return -1;
    if (si_reap(r, tab)) return si_table_write(fd, tab);
    return 0;
}

int si_table_write(int fd, const si_entry *tab) {
    if (pwrite(fd, tab, sizeof(si_entry) * SI_TAB_ENTRIES, 0) != (ssize_t)(sizeof(si_entry) * SI_TAB_ENTRIES))
        return -1;
    return 0;
}

/* Release entries of dead owners (the driver tears a context down when its process is gone). */
static int si_reap(const si_region *r, si_entry *tab) {
    int changed = 0;
    for (int i = 0; i < SI_TAB_ENTRIES; i++) {
        if (tab[i].kind == SI_FREE || si_pid_alive(tab[i].pid)) continue;
        if (si_cfg.scrub_on_free && r->base) memset(r->base + tab[i].off, 0, tab[i].size);
        memset(&tab[i], 0, sizeof tab[i]);
        changed = 1;
    }
    return changed;
}

uint64_t si_used(const si_entry *tab) {
    uint64_t used = 0;
    for (int i = 0; i < SI_TAB_ENTRIES; i++)
        if (tab[i].kind != SI_FREE) used += tab[i].size;
    return used;
}

uint64_t si_free_bytes(const si_region *r, const si_entry *tab) {
    uint64_t taken = r->reserved + r->unlisted_used + si_used(tab);
    return taken >= r->size ? 0 : r->size - taken;
}

static int overlaps(const si_entry *tab, uint64_t off, uint64_t size) {
    for (int i = 0; i < SI_TAB_ENTRIES; i++) {
        if (tab[i].kind == SI_FREE) continue;
        if (off < tab[i].off + tab[i].size && tab[i].off < off + size) return 1;
    }
    return 0;
}

uint64_t si_place(const si_region *r, const si_entry *tab, uint64_t size) {
    uint64_t lo = (r->reserved + SI_ALIGN - 1) / SI_ALIGN * SI_ALIGN;     /* RM's reservation: the bottom */
    uint64_t hi = r->size - r->unlisted_used;                             /* unlisted holder: the top */
    size = (size + SI_ALIGN - 1) / SI_ALIGN * SI_ALIGN;
    for (uint64_t off = lo; off + size <= hi; off += SI_ALIGN) {
        if (!overlaps(tab, off, size)) return off;
    }
    return UINT64_MAX;
}

int si_add(si_entry *tab, int pid, int kind, int ci, uint64_t off, uint64_t size) {
    for (int i = 0; i < SI_TAB_ENTRIES; i++) {
        if (tab[i].kind != SI_FREE) continue;
        tab[i].pid = pid;
        tab[i].kind = kind;
        tab[i].ci = ci;
        tab[i].off = off;
        tab[i].size = (size + SI_ALIGN - 1) / SI_ALIGN * SI_ALIGN;
        return i;
    }
    return -1;
}

int si_get_mode(const char *uuid) {
    char p[700];
    snprintf(p, sizeof p, "%s/mode-%s", si_cfg.state_dir, uuid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    int mode = 0;
    if (fscanf(f, "%d", &mode) != 1) mode = 0;
    fclose(f);
    return mode;
}

int si_set_mode(const char *uuid, int mode) {
    char p[700], tmp[720];
    snprintf(p, sizeof p, "%s/mode-%s", si_cfg.state_dir, uuid);
    snprintf(tmp, sizeof tmp, "%s.%d", p, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "%d\n", mode);
    fclose(f);
    return rename(tmp, p);
}
