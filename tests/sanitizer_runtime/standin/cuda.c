/* Stand-in libcuda.so.1: the CUDA driver API entry points cuda-bindings resolves for the sanitizer.
 *
 * cuda-bindings dlopens "libcuda.so.1" (system search: LD_LIBRARY_PATH) and resolves every
 * function through cuGetProcAddress_v2, so that is the one symbol it needs by name; the others
 * are reached through the table below (unknown names answer CUDA_ERROR_NOT_FOUND, as the real
 * driver does for symbols it lacks). Device memory is the shared host file of standin.c, so a
 * tenant's bytes survive its exit unless scrub_on_free=1.
 *
 * What it checks like the real driver: CUDA_VISIBLE_DEVICES (GPU-/MIG- UUIDs, indices; one MIG
 * device per process), compute mode (PROHIBITED and a second process under EXCLUSIVE_PROCESS
 * get CUDA_ERROR_DEVICE_UNAVAILABLE), context memory taken from the device at context creation,
 * PTX ISA versions above the driver's (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), cubins for another
 * architecture (CUDA_ERROR_NO_BINARY_FOR_GPU), out-of-range pointers. Kernels: the module must
 * contain the entry name, and only "count_words" (the sanitizer's verify kernel, signature in
 * backends/cuda.py KERNEL_SOURCE) can run: it is executed here on the host.
 * $DRA_STANDIN_KERNEL_FAULT=zero-length makes every launch see a length of 0 (a mis-packed argument).
 */
#define _GNU_SOURCE
#include "standin.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
    CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_OUT_OF_MEMORY = 2, CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100, CUDA_ERROR_INVALID_DEVICE = 101, CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
    CUDA_ERROR_INVALID_IMAGE = 200, CUDA_ERROR_INVALID_CONTEXT = 201, CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_INVALID_PTX = 218, CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222, CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500, CUDA_ERROR_ILLEGAL_ADDRESS = 700, CUDA_ERROR_NOT_SUPPORTED = 801,
};

#define MAX_VIS 8
#define MAX_ALLOCS 256

typedef struct {
    int gpu, gi, ci;
    const char *uuid;
    si_region region;
    int mapped;
    int retained;            /* primary context refcount */
    int ctx_entry;           /* context's slot in the table */
    uint64_t alloc_off[MAX_ALLOCS], alloc_size[MAX_ALLOCS];
    int nallocs;
} vdev;

typedef struct { int magic; int dev; } context_t;
typedef struct { int magic; const unsigned char *image; size_t len; int dev; } module_t;
typedef struct { int magic; int dev; } function_t;

static int inited;
static vdev vis[MAX_VIS];
static int nvis;
static context_t contexts[MAX_VIS];
static context_t *current;
static int stream_token;

/* ---- enumeration --------------------------------------------------------------------------- */

static int add_gpu(int g) {
    if (nvis >= MAX_VIS || si_cfg.gpus[g].mig) return 0;
    vis[nvis] = (vdev){.gpu = g, .gi = -1, .ci = -1, .uuid = si_cfg.gpus[g].uuid, .ctx_entry = -1};
    nvis++;
    return 1;
}

static int find_uuid(const char *tok) {
    int have_mig = 0;
    for (int i = 0; i < nvis; i++) have_mig |= vis[i].gi >= 0;
    for (int g = 0; g < si_cfg.ngpus; g++) {
        const si_gpu *G = &si_cfg.gpus[g];
        if (strcmp(G->uuid, tok) == 0) return add_gpu(g);
        for (int i = 0; G->mig && i < G->ngis; i++)
            for (int c = 0; c < G->gis[i].ncis; c++)
                if (strcmp(G->gis[i].cis[c].uuid, tok) == 0) {
                    if (have_mig || nvis >= MAX_VIS) return 1;  /* CUDA uses one MIG device per process */
                    vis[nvis] = (vdev){.gpu = g, .gi = i, .ci = c, .uuid = G->gis[i].cis[c].uuid, .ctx_entry = -1};
                    nvis++;
                    return 1;
                }
    }
    return 0;
}

CUresult cuInit(unsigned flags) {
    (void)flags;
    if (inited) return CUDA_SUCCESS;
    if (si_load() < 0) return CUDA_ERROR_NO_DEVICE;
    const char *env = getenv("CUDA_VISIBLE_DEVICES");
    nvis = 0;
    if (!env) {
        for (int g = 0; g < si_cfg.ngpus; g++) add_gpu(g);
    } else {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", env);
        char *save = NULL;  /* strtok_r: never leave glibc's strtok state pointing into this stack */
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            while (isspace((unsigned char)*tok)) tok++;
            int ok;
            if (isdigit((unsigned char)tok[0])) {
                int idx = atoi(tok), n = 0;
                ok = 0;
                for (int g = 0; g < si_cfg.ngpus; g++)
                    if (!si_cfg.gpus[g].mig && n++ == idx) ok = add_gpu(g);
            } else {
                ok = find_uuid(tok);
            }
            if (!ok) break;  /* CUDA ignores everything after an invalid entry */
        }
    }
    if (nvis == 0) return CUDA_ERROR_NO_DEVICE;
    inited = 1;
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v) {
    if (si_load() < 0) return CUDA_ERROR_NO_DEVICE;
    *v = si_cfg.cuda_version;
    return CUDA_SUCCESS;
}

#define NEED_INIT() do { if (!inited) return CUDA_ERROR_NOT_INITIALIZED; } while (0)
#define NEED_DEV(d) do { NEED_INIT(); if ((d) < 0 || (d) >= nvis) return CUDA_ERROR_INVALID_DEVICE; } while (0)
#define NEED_CTX() do { NEED_INIT(); if (!current) return CUDA_ERROR_INVALID_CONTEXT; } while (0)

CUresult cuDeviceGetCount(int *n) { NEED_INIT(); *n = nvis; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { NEED_DEV(ordinal); *d = ordinal; return CUDA_SUCCESS; }

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    NEED_DEV(d);
    snprintf(name, (size_t)len, "%s", si_cfg.gpus[vis[d].gpu].name);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(unsigned char *uuid16, CUdevice d) {
    NEED_DEV(d);
    const char *u = vis[d].uuid;
    int n = 0;
    for (const char *p = u; *p && n < 32; p++) {
        if (!isxdigit((unsigned char)*p)) continue;
        int v = isdigit((unsigned char)*p) ? *p - '0' : (tolower((unsigned char)*p) - 'a' + 10);
        if (n % 2 == 0) uuid16[n / 2] = (unsigned char)(v << 4); else uuid16[n / 2] |= (unsigned char)v;
        n++;
    }
    return CUDA_SUCCESS;
}

static int map_dev(int d) {
    if (vis[d].mapped) return 0;
    if (si_region_of(vis[d].gpu, vis[d].gi, &vis[d].region) != 0) return -1;
    vis[d].mapped = 1;
    return 0;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice d) {
    NEED_DEV(d);
    if (map_dev(d)) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = vis[d].region.size;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice d) {
    NEED_DEV(d);
    const si_gpu *G = &si_cfg.gpus[vis[d].gpu];
    int sms = vis[d].gi >= 0 ? (int)G->gis[vis[d].gi].slices * (G->sms > 1 ? G->sms / 7 + 1 : 1) : G->sms;
    switch (attrib) {
    case 1: *value = 1024; break;               /* MAX_THREADS_PER_BLOCK */
    case 10: *value = 32; break;                /* WARP_SIZE */
    case 16: *value = sms; break;               /* MULTIPROCESSOR_COUNT */
    case 75: *value = G->arch / 10; break;      /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *value = G->arch % 10; break;      /* COMPUTE_CAPABILITY_MINOR */
    default: return CUDA_ERROR_NOT_SUPPORTED;   /* unexpected: fail loudly in tests */
    }
    return CUDA_SUCCESS;
}

/* ---- contexts ------------------------------------------------------------------------------ */

static CUresult retain(int d) {
    vdev *v = &vis[d];
    if (v->retained++) return CUDA_SUCCESS;
    if (map_dev(d)) { v->retained = 0; return CUDA_ERROR_INVALID_DEVICE; }
    int mode = si_get_mode(v->uuid);
    int fd = si_lock(&v->region);
    si_entry tab[SI_TAB_ENTRIES];
    if (fd < 0 || si_table_read(fd, &v->region, tab) != 0) { si_unlock(fd); v->retained = 0; return CUDA_ERROR_INVALID_DEVICE; }
    int busy = 0;
    for (int i = 0; i < SI_TAB_ENTRIES; i++)
        if (tab[i].kind == SI_CONTEXT && tab[i].ci == v->ci && tab[i].pid != getpid()) busy = 1;
    if (mode == 2 || (mode == 3 && busy)) { si_unlock(fd); v->retained = 0; return CUDA_ERROR_DEVICE_UNAVAILABLE; }
    uint64_t overhead = si_cfg.gpus[v->gpu].context_overhead;
    uint64_t off = si_place(&v->region, tab, overhead);
    if (off == UINT64_MAX) { si_unlock(fd); v->retained = 0; return CUDA_ERROR_OUT_OF_MEMORY; }
    v->ctx_entry = si_add(tab, getpid(), SI_CONTEXT, v->ci, off, overhead);
    si_table_write(fd, tab);
    si_unlock(fd);
    return CUDA_SUCCESS;
}

static void drop(int d) {
    vdev *v = &vis[d];
    if (v->retained == 0 || --v->retained) return;
    int fd = si_lock(&v->region);
    si_entry tab[SI_TAB_ENTRIES];
    if (fd >= 0 && si_table_read(fd, &v->region, tab) == 0) {
        for (int i = 0; i < SI_TAB_ENTRIES; i++) {
            if (tab[i].kind == SI_FREE || tab[i].pid != getpid()) continue;
            if (si_cfg.scrub_on_free) memset(v->region.base + tab[i].off, 0, tab[i].size);
            memset(&tab[i], 0, sizeof tab[i]);
        }
        si_table_write(fd, tab);
    }
    si_unlock(fd);
    v->nallocs = 0;
    v->ctx_entry = -1;
    if (current == &contexts[d]) current = NULL;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice d) {
    NEED_DEV(d);
    CUresult r = retain(d);
    if (r) return r;
    contexts[d] = (context_t){0x43545854, d};
    *ctx = &contexts[d];
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice d) { NEED_DEV(d); drop(d); return CUDA_SUCCESS; }

CUresult cuCtxCreate(void **ctx, unsigned flags, CUdevice d) {
    (void)flags;
    CUresult r = cuDevicePrimaryCtxRetain(ctx, d);
    if (r == CUDA_SUCCESS) current = *ctx;
    return r;
}

CUresult cuCtxDestroy(void *ctx) {
    context_t *c = ctx;
    NEED_INIT();
    if (!c || c->magic != 0x43545854) return CUDA_ERROR_INVALID_CONTEXT;
    drop(c->dev);
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(void *ctx) {
    NEED_INIT();
    context_t *c = ctx;
    if (c && c->magic != 0x43545854) return CUDA_ERROR_INVALID_CONTEXT;
    current = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(void **ctx) { NEED_INIT(); *ctx = current; return CUDA_SUCCESS; }
CUresult cuCtxGetDevice(CUdevice *d) { NEED_CTX(); *d = current->dev; return CUDA_SUCCESS; }
CUresult cuCtxSynchronize(void) { NEED_CTX(); return CUDA_SUCCESS; }

CUresult cuStreamCreate(void **stream, unsigned flags) {
    (void)flags;
    NEED_CTX();
    *stream = &stream_token;
    return CUDA_SUCCESS;
}
CUresult cuStreamDestroy(void *stream) { (void)stream; NEED_CTX(); return CUDA_SUCCESS; }
CUresult cuStreamSynchronize(void *stream) { (void)stream; NEED_CTX(); return CUDA_SUCCESS; }

/* ---- memory -------------------------------------------------------------------------------- */

CUresult cuMemGetInfo(size_t *free, size_t *total) {
    NEED_CTX();
    vdev *v = &vis[current->dev];
    int fd = si_lock(&v->region);
    si_entry tab[SI_TAB_ENTRIES];
    if (fd < 0 || si_table_read(fd, &v->region, tab) != 0) { si_unlock(fd); return CUDA_ERROR_INVALID_CONTEXT; }
    si_unlock(fd);
    *free = si_free_bytes(&v->region, tab);
    *total = v->region.size;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytes) {
    NEED_CTX();
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    vdev *v = &vis[current->dev];
    if (v->nallocs >= MAX_ALLOCS) return CUDA_ERROR_OUT_OF_MEMORY;
    int fd = si_lock(&v->region);
    si_entry tab[SI_TAB_ENTRIES];
    if (fd < 0 || si_table_read(fd, &v->region, tab) != 0) { si_unlock(fd); return CUDA_ERROR_INVALID_CONTEXT; }
    uint64_t off = si_place(&v->region, tab, bytes);
    if (off == UINT64_MAX || si_add(tab, getpid(), SI_ALLOC, v->ci, off, bytes) < 0) {
        si_unlock(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    si_table_write(fd, tab);
    si_unlock(fd);
    v->alloc_off[v->nallocs] = off;
    v->alloc_size[v->nallocs] = bytes;
    v->nallocs++;
    *dptr = (CUdeviceptr)(uintptr_t)(v->region.base + off);
    return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr dptr) {
    NEED_CTX();
    vdev *v = &vis[current->dev];
    uint64_t off = (uint64_t)((unsigned char *)(uintptr_t)dptr - v->region.base);
    int k = -1;
    for (int i = 0; i < v->nallocs; i++) if (v->alloc_off[i] == off) k = i;
    if (k < 0) return CUDA_ERROR_INVALID_VALUE;
    int fd = si_lock(&v->region);
    si_entry tab[SI_TAB_ENTRIES];
    if (fd >= 0 && si_table_read(fd, &v->region, tab) == 0) {
        for (int i = 0; i < SI_TAB_ENTRIES; i++)
            if (tab[i].kind == SI_ALLOC && tab[i].pid == getpid() && tab[i].off == off) {
                if (si_cfg.scrub_on_free) memset(v->region.base + off, 0, tab[i].size);
                memset(&tab[i], 0, sizeof tab[i]);
            }
        si_table_write(fd, tab);
    }
    si_unlock(fd);
    v->alloc_off[k] = v->alloc_off[v->nallocs - 1];
    v->alloc_size[k] = v->alloc_size[v->nallocs - 1];
    v->nallocs--;
    return CUDA_SUCCESS;
}

/* The host address of [dptr, dptr+bytes) if it lies inside one of our allocations. */
static unsigned char *inside(CUdeviceptr dptr, uint64_t bytes) {
    if (!current) return NULL;
    vdev *v = &vis[current->dev];
    unsigned char *p = (unsigned char *)(uintptr_t)dptr;
    if (p < v->region.base) return NULL;
    uint64_t off = (uint64_t)(p - v->region.base);
    for (int i = 0; i < v->nallocs; i++)
        if (off >= v->alloc_off[i] && off + bytes <= v->alloc_off[i] + v->alloc_size[i]) return p;
    return NULL;
}

CUresult cuMemsetD8(CUdeviceptr dptr, unsigned char value, size_t n) {
    NEED_CTX();
    unsigned char *p = inside(dptr, n);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    memset(p, value, n);
    return CUDA_SUCCESS;
}
CUresult cuMemsetD8Async(CUdeviceptr dptr, unsigned char value, size_t n, void *s) { (void)s; return cuMemsetD8(dptr, value, n); }

CUresult cuMemsetD32(CUdeviceptr dptr, unsigned value, size_t n) {
    NEED_CTX();
    if (dptr % 4) return CUDA_ERROR_INVALID_VALUE;
    unsigned char *p = inside(dptr, (uint64_t)n * 4);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    unsigned *w = (unsigned *)p;
    if (value == 0) memset(p, 0, n * 4);
    else for (size_t i = 0; i < n; i++) w[i] = value;
    return CUDA_SUCCESS;
}
CUresult cuMemsetD32Async(CUdeviceptr dptr, unsigned value, size_t n, void *s) { (void)s; return cuMemsetD32(dptr, value, n); }

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
    NEED_CTX();
    unsigned char *p = inside(src, n);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    memcpy(dst, p, n);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, void *s) { (void)s; return cuMemcpyDtoH(dst, src, n); }

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
    NEED_CTX();
    unsigned char *p = inside(dst, n);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    memcpy(p, src, n);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, void *s) { (void)s; return cuMemcpyHtoD(dst, src, n); }

/* ---- modules and the verify kernel --------------------------------------------------------- */

static module_t modules[32];
static int nmodules;
static function_t count_words_fn;

static const char *find(const unsigned char *hay, size_t n, const char *needle) {
    return memmem(hay, n, needle, strlen(needle));
}

CUresult cuModuleLoadData(void **module, const void *image) {
    NEED_CTX();
    const unsigned char *img = image;
    int arch = si_cfg.gpus[vis[current->dev].gpu].arch;
    size_t len;
    if (memcmp(img, "\x7f" "ELF", 4) == 0) {
        if (img[4] != 2 || *(const uint16_t *)(img + 18) != 190) return CUDA_ERROR_INVALID_IMAGE;  /* EM_CUDA */
        uint32_t flags = *(const uint32_t *)(img + 48);
        int sm = img[8] >= 8 ? (int)((flags >> 8) & 0xff) : (int)(flags & 0xff);  /* ABI v8 (sm_100+) moved it */
        if (sm / 10 != arch / 10 || sm % 10 > arch % 10) return CUDA_ERROR_NO_BINARY_FOR_GPU;
        uint64_t shoff = *(const uint64_t *)(img + 40);
        uint16_t shentsize = *(const uint16_t *)(img + 58), shnum = *(const uint16_t *)(img + 60);
        len = shoff + (size_t)shentsize * shnum;
    } else {
        len = strlen((const char *)img);
        const char *v = find(img, len, ".version ");
        if (!v) return CUDA_ERROR_INVALID_PTX;
        int major = 0, minor = 0;
        if (sscanf(v + 9, "%d.%d", &major, &minor) != 2) return CUDA_ERROR_INVALID_PTX;
        if (major * 10 + minor > si_cfg.ptx_isa_max) return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
        const char *t = find(img, len, ".target sm_");
        if (!t || atoi(t + 11) > arch) return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    if (nmodules >= 32) return CUDA_ERROR_OUT_OF_MEMORY;
    modules[nmodules] = (module_t){0x4d4f4455, img, len, current->dev};
    *module = &modules[nmodules++];
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n, void *opts, void **vals) {
    (void)n; (void)opts; (void)vals;
    return cuModuleLoadData(module, image);
}

CUresult cuModuleUnload(void *module) {
    module_t *m = module;
    if (!m || m->magic != 0x4d4f4455) return CUDA_ERROR_INVALID_HANDLE;
    m->magic = 0;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(void **fn, void *module, const char *name) {
    NEED_CTX();
    module_t *m = module;
    if (!m || m->magic != 0x4d4f4455) return CUDA_ERROR_INVALID_HANDLE;
    if (strcmp(name, "count_words") != 0 || !find(m->image, m->len, name)) return CUDA_ERROR_NOT_FOUND;
    count_words_fn = (function_t){0x46554e43, m->dev};
    *fn = &count_words_fn;
    return CUDA_SUCCESS;
}

/* count_words(const ulonglong2 *p, u64 n16, u64 expect, u64 marker, u64 *out): out[0] += words equal
 * to neither expect nor marker, out[1] += words equal to marker, out[2] += 64-bit words read. */
CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void *stream, void **params, void **extra) {
    (void)shmem; (void)stream; (void)extra;
    NEED_CTX();
    function_t *f = fn;
    if (!f || f->magic != 0x46554e43) return CUDA_ERROR_INVALID_HANDLE;
    if (!params || (uint64_t)gx * gy * gz * bx * by * bz == 0) return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr p = *(CUdeviceptr *)params[0];
    uint64_t n16 = *(uint64_t *)params[1];
    const char *fault = getenv("DRA_STANDIN_KERNEL_FAULT");  /* a broken launch the control must catch */
    if (fault && strcmp(fault, "zero-length") == 0) n16 = 0;
    uint64_t expect = *(uint64_t *)params[2];
    uint64_t marker = *(uint64_t *)params[3];
    CUdeviceptr out = *(CUdeviceptr *)params[4];
    uint64_t *o = (uint64_t *)inside(out, 24);
    const uint64_t *w = (const uint64_t *)inside(p, n16 * 16);
    if (!o || (n16 && !w) || p % 16) return CUDA_ERROR_ILLEGAL_ADDRESS;
    uint64_t other = 0, marks = 0;
    for (uint64_t i = 0; i < 2 * n16; i++) {
        marks += w[i] == marker;
        other += w[i] != marker && w[i] != expect;
    }
    o[0] += other;
    o[1] += marks;
    o[2] += 2 * n16;
    return CUDA_SUCCESS;
}

/* ---- errors and symbol lookup -------------------------------------------------------------- */

static const char *err_name(CUresult e) {
    switch (e) {
    case 0: return "CUDA_SUCCESS";
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 46: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 200: return "CUDA_ERROR_INVALID_IMAGE";
    case 201: return "CUDA_ERROR_INVALID_CONTEXT";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 400: return "CUDA_ERROR_INVALID_HANDLE";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 801: return "CUDA_ERROR_NOT_SUPPORTED";
    default: return NULL;
    }
}

CUresult cuGetErrorName(CUresult e, const char **s) {
    *s = err_name(e);
    return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult e, const char **s) { return cuGetErrorName(e, s); }

/* NVRTC itself dlopens libcuda.so.1 and asks for private export tables: there are none here. */
CUresult cuGetExportTable(const void **table, const void *uuid) {
    (void)uuid;
    if (table) *table = NULL;
    return CUDA_ERROR_NOT_FOUND;
}

#define ENTRY(name) {#name, (void *)name}
static const struct { const char *name; void *fn; } table[] = {
    ENTRY(cuInit), ENTRY(cuDriverGetVersion), ENTRY(cuDeviceGetCount), ENTRY(cuDeviceGet), ENTRY(cuDeviceGetName),
    ENTRY(cuDeviceGetUuid), ENTRY(cuDeviceTotalMem), ENTRY(cuDeviceGetAttribute), ENTRY(cuDevicePrimaryCtxRetain),
    ENTRY(cuDevicePrimaryCtxRelease), ENTRY(cuCtxCreate), ENTRY(cuCtxDestroy), ENTRY(cuCtxSetCurrent),
    ENTRY(cuCtxGetCurrent), ENTRY(cuCtxGetDevice), ENTRY(cuCtxSynchronize), ENTRY(cuStreamCreate),
    ENTRY(cuStreamDestroy), ENTRY(cuStreamSynchronize), ENTRY(cuMemGetInfo), ENTRY(cuMemAlloc), ENTRY(cuMemFree),
    ENTRY(cuMemsetD8), ENTRY(cuMemsetD8Async), ENTRY(cuMemsetD32), ENTRY(cuMemsetD32Async), ENTRY(cuMemcpyDtoH),
    ENTRY(cuMemcpyDtoHAsync), ENTRY(cuMemcpyHtoD), ENTRY(cuMemcpyHtoDAsync), ENTRY(cuModuleLoadData),
    ENTRY(cuModuleLoadDataEx), ENTRY(cuModuleUnload), ENTRY(cuModuleGetFunction), ENTRY(cuLaunchKernel),
    ENTRY(cuGetErrorName), ENTRY(cuGetErrorString),
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    (void)flags;
    if (strcmp(symbol, "cuCtxCreate") == 0 && version >= 11040) {  /* _v3/_v4 take other arguments */
        *pfn = NULL;
        if (status) *status = 2;               /* CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT */
        return CUDA_ERROR_NOT_FOUND;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, symbol) == 0) {
            *pfn = table[i].fn;
            if (status) *status = 0;           /* CU_GET_PROC_ADDRESS_SUCCESS */
            return CUDA_SUCCESS;
        }
    *pfn = NULL;
    if (status) *status = 1;                   /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
