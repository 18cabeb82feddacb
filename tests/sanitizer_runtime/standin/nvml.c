/* Stand-in libnvidia-ml.so.1: the NVML entry points nvidia-ml-py (pynvml) calls for the sanitizer.
 *
 * Return codes, struct layouts and versioned structs follow nvml.h (API v12/13). Semantics kept
 * from the real library: a MIG device handle lists only the processes of its own compute
 * instance; a parent GPU handle in MIG mode aggregates (or fails, aggregate_error=4, for an
 * unprivileged caller); versioned structs are checked; compute mode on MIG follows the driver
 * generation's nvml.h (see nvmlDeviceSetComputeMode).
 */
#define _GNU_SOURCE
#include "standin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_IN_USE 19
#define NVML_ERROR_INSUFFICIENT_RESOURCES 23
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ERROR_UNKNOWN 999

#define MAGIC_DEV 0x4e564456
#define MAGIC_GI 0x4e564749
#define MAGIC_CI 0x4e564349

typedef struct { int magic; int gpu; int gi; int ci; } dev_t_;     /* gi < 0: the whole GPU */
typedef struct { int magic; int gpu; int gi; } gi_t_;
typedef dev_t_ *nvmlDevice_t;
typedef gi_t_ *nvmlGpuInstance_t;

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned pid; unsigned long long usedGpuMemory; unsigned gpuInstanceId, computeInstanceId; } nvmlProcessInfo_t;
typedef struct { unsigned start, size; } nvmlGpuInstancePlacement_t;
typedef struct { nvmlDevice_t device; unsigned id, profileId; nvmlGpuInstancePlacement_t placement; } nvmlGpuInstanceInfo_t;
typedef struct {
    unsigned id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount,
        decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;
typedef struct {
    unsigned version, id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount,
        decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
    char name[96];
} nvmlGpuInstanceProfileInfo_v2_t;

#define nvmlMemory_v2 ((unsigned)(sizeof(nvmlMemory_v2_t) | (2 << 24)))
#define nvmlGpuInstanceProfileInfo_v2 ((unsigned)(sizeof(nvmlGpuInstanceProfileInfo_v2_t) | (2 << 24)))

static dev_t_ gpu_h[SI_MAX_GPUS];
static dev_t_ mig_h[SI_MAX_GPUS][SI_MAX_GIS][SI_MAX_CIS];
static gi_t_ gi_h[SI_MAX_GPUS][SI_MAX_GIS];
static si_region regions[SI_MAX_GPUS][SI_MAX_GIS + 1];
static int initialized;

/* A MIG device handle is valid while its GI and CI exist (destroyed: the handle is stale). */
static int valid(const dev_t_ *h) {
    if (!h || h->magic != MAGIC_DEV) return 0;
    if (h->gi < 0) return 1;
    const si_gi *I = &si_cfg.gpus[h->gpu].gis[h->gi];
    return I->present && h->ci < I->ncis && !I->cis[h->ci].dead;
}

static si_region *region_of(const dev_t_ *h) { return &regions[h->gpu][h->gi + 1]; }

/* The configured enumeration error of this handle for `call`, or 0. */
static int fail(const dev_t_ *h, const char *call) {
    const si_gpu *G = &si_cfg.gpus[h->gpu];
    if (G->error && (!G->error_call[0] || strcmp(G->error_call, call) == 0)) return G->error;
    if (h->gi >= 0) {
        const si_gi *I = &G->gis[h->gi];
        if (I->error && (!I->error_call[0] || strcmp(I->error_call, call) == 0)) return I->error;
    }
    return 0;
}

#define CHECK(h, call)                                   \
    do {                                                 \
        if (!initialized) return NVML_ERROR_UNINITIALIZED; \
        if (!valid(h)) return NVML_ERROR_INVALID_ARGUMENT; \
        int e_ = fail(h, call);                          \
        if (e_) return e_;                               \
    } while (0)

int nvmlInitWithFlags(unsigned flags) {
    (void)flags;
    int loaded = si_load();
    if (loaded < 0) return NVML_ERROR_DRIVER_NOT_LOADED;
    if (loaded == 0 && initialized) return NVML_SUCCESS;  /* a new config path (tests): a new node */
    for (int g = 0; g < si_cfg.ngpus; g++) {
        const si_gpu *G = &si_cfg.gpus[g];
        gpu_h[g] = (dev_t_){MAGIC_DEV, g, -1, -1};
        if (!G->mig && si_region_of(g, -1, &regions[g][0]) != 0) return NVML_ERROR_UNKNOWN;
        for (int i = 0; i < G->ngis; i++) {
            gi_h[g][i] = (gi_t_){MAGIC_GI, g, i};
            if (G->mig && si_region_of(g, i, &regions[g][i + 1]) != 0) return NVML_ERROR_UNKNOWN;
            for (int c = 0; c < SI_MAX_CIS; c++) mig_h[g][i][c] = (dev_t_){MAGIC_DEV, g, i, c};
        }
    }
    initialized = 1;
    return NVML_SUCCESS;
}

int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
int nvmlInit(void) { return nvmlInitWithFlags(0); }
int nvmlShutdown(void) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    return NVML_SUCCESS;  /* keep the mappings: handles stay valid for a later nvmlInit */
}

const char *nvmlErrorString(int result) {
    switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 15: return "GPU is lost";
    case 17: return "Operating System Error";
    case 19: return "In use by another client";
    case 23: return "Insufficient Resources";
    case 25: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

int nvmlSystemGetDriverVersion(char *version, unsigned length) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (length < strlen(si_cfg.driver_version) + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(version, si_cfg.driver_version);
    return NVML_SUCCESS;
}

int nvmlSystemGetCudaDriverVersion(int *v) { if (!initialized) return NVML_ERROR_UNINITIALIZED; *v = si_cfg.cuda_version; return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

int nvmlDeviceGetCount_v2(unsigned *count) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    *count = (unsigned)si_cfg.ngpus;
    return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *device) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (index >= (unsigned)si_cfg.ngpus) return NVML_ERROR_INVALID_ARGUMENT;
    int e = fail(&gpu_h[index], "nvmlDeviceGetHandleByIndex_v2");
    if (e) return e;
    *device = &gpu_h[index];
    return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    for (int g = 0; g < si_cfg.ngpus; g++) {
        const si_gpu *G = &si_cfg.gpus[g];
        if (strcmp(G->uuid, uuid) == 0) { *device = &gpu_h[g]; return NVML_SUCCESS; }
        for (int i = 0; G->mig && i < G->ngis; i++)
            for (int c = 0; c < G->gis[i].ncis; c++)
                if (strcmp(G->gis[i].cis[c].uuid, uuid) == 0) { *device = &mig_h[g][i][c]; return NVML_SUCCESS; }
    }
    return NVML_ERROR_NOT_FOUND;
}

int nvmlDeviceGetIndex(nvmlDevice_t h, unsigned *index) { CHECK(h, "nvmlDeviceGetIndex"); *index = (unsigned)h->gpu; return 0; }

int nvmlDeviceGetMinorNumber(nvmlDevice_t h, unsigned *minor) {
    CHECK(h, "nvmlDeviceGetMinorNumber");
    if (h->gi >= 0) return NVML_ERROR_NOT_SUPPORTED;
    *minor = si_cfg.gpus[h->gpu].minor;
    return NVML_SUCCESS;
}

int nvmlDeviceGetUUID(nvmlDevice_t h, char *uuid, unsigned length) {
    CHECK(h, "nvmlDeviceGetUUID");
    const char *u = h->gi < 0 ? si_cfg.gpus[h->gpu].uuid : si_cfg.gpus[h->gpu].gis[h->gi].cis[h->ci].uuid;
    if (length < strlen(u) + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(uuid, u);
    return NVML_SUCCESS;
}

int nvmlDeviceGetName(nvmlDevice_t h, char *name, unsigned length) {
    CHECK(h, "nvmlDeviceGetName");
    char buf[200];
    if (h->gi < 0) snprintf(buf, sizeof buf, "%s", si_cfg.gpus[h->gpu].name);
    else snprintf(buf, sizeof buf, "%s MIG %ug.%llugb", si_cfg.gpus[h->gpu].name,
                  si_cfg.gpus[h->gpu].gis[h->gi].slices, si_cfg.gpus[h->gpu].gis[h->gi].memory_mb / 1024);
    if (length < strlen(buf) + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(name, buf);
    return NVML_SUCCESS;
}

int nvmlDeviceGetCudaComputeCapability(nvmlDevice_t h, int *major, int *minor) {
    CHECK(h, "nvmlDeviceGetCudaComputeCapability");
    *major = si_cfg.gpus[h->gpu].arch / 10;
    *minor = si_cfg.gpus[h->gpu].arch % 10;
    return NVML_SUCCESS;
}

int nvmlDeviceGetMigMode(nvmlDevice_t h, unsigned *current, unsigned *pending) {
    CHECK(h, "nvmlDeviceGetMigMode");
    if (h->gi >= 0 || si_cfg.gpus[h->gpu].arch < 80) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = (unsigned)si_cfg.gpus[h->gpu].mig;
    return NVML_SUCCESS;
}

int nvmlDeviceIsMigDeviceHandle(nvmlDevice_t h, unsigned *is_mig) {
    if (!valid(h)) return NVML_ERROR_INVALID_ARGUMENT;
    *is_mig = h->gi >= 0;
    return NVML_SUCCESS;
}

int nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t h, nvmlDevice_t *parent) {
    if (!valid(h) || h->gi < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *parent = &gpu_h[h->gpu];
    return NVML_SUCCESS;
}

int nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t h, unsigned *count) {
    CHECK(h, "nvmlDeviceGetMaxMigDeviceCount");
    const si_gpu *G = &si_cfg.gpus[h->gpu];
    unsigned n = 0;
    for (int i = 0; i < G->ngis; i++) n += (unsigned)G->gis[i].ncis;
    *count = G->mig ? (n > 7 ? n : 7) : 0;
    return NVML_SUCCESS;
}

int nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t h, unsigned index, nvmlDevice_t *mig) {
    CHECK(h, "nvmlDeviceGetMigDeviceHandleByIndex");
    const si_gpu *G = &si_cfg.gpus[h->gpu];
    if (!G->mig) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = 0;
    for (int i = 0; i < G->ngis; i++)
        for (int c = 0; c < G->gis[i].ncis; c++, n++)
            if (n == index && !G->gis[i].cis[c].dead) {
                int e = fail(&mig_h[h->gpu][i][c], "nvmlDeviceGetMigDeviceHandleByIndex");
                if (e) return e;
                *mig = &mig_h[h->gpu][i][c];
                return NVML_SUCCESS;
            }
    return NVML_ERROR_NOT_FOUND;
}

int nvmlDeviceGetGpuInstanceId(nvmlDevice_t h, unsigned *id) {
    CHECK(h, "nvmlDeviceGetGpuInstanceId");
    if (h->gi < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *id = si_cfg.gpus[h->gpu].gis[h->gi].id;
    return NVML_SUCCESS;
}

int nvmlDeviceGetComputeInstanceId(nvmlDevice_t h, unsigned *id) {
    CHECK(h, "nvmlDeviceGetComputeInstanceId");
    if (h->gi < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *id = si_cfg.gpus[h->gpu].gis[h->gi].cis[h->ci].id;
    return NVML_SUCCESS;
}

int nvmlDeviceGetGpuInstanceById(nvmlDevice_t h, unsigned id, nvmlGpuInstance_t *gi) {
    CHECK(h, "nvmlDeviceGetGpuInstanceById");
    const si_gpu *G = &si_cfg.gpus[h->gpu];
    if (h->gi >= 0 || !G->mig) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < G->ngis; i++)
        if (G->gis[i].present && G->gis[i].id == id) {
            dev_t_ probe = {MAGIC_DEV, h->gpu, i, 0};
            int e = fail(&probe, "nvmlDeviceGetGpuInstanceById");
            if (e) return e;
            *gi = &gi_h[h->gpu][i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

int nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t *info) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!gi || gi->magic != MAGIC_GI || !si_cfg.gpus[gi->gpu].gis[gi->gi].present) return NVML_ERROR_INVALID_ARGUMENT;
    dev_t_ probe = {MAGIC_DEV, gi->gpu, gi->gi, 0};
    int e = fail(&probe, "nvmlGpuInstanceGetInfo");
    if (e) return e;
    const si_gi *I = &si_cfg.gpus[gi->gpu].gis[gi->gi];
    info->device = &gpu_h[gi->gpu];
    info->id = I->id;
    info->profileId = I->profile_id;
    info->placement.start = I->placement_start;
    info->placement.size = I->placement_size;
    return NVML_SUCCESS;
}

static const si_gi *profile(nvmlDevice_t h, unsigned index) {
    const si_gpu *G = &si_cfg.gpus[h->gpu];
    for (int i = 0; i < G->ngis; i++)
        if (G->gis[i].profile_index == index) return &G->gis[i];
    return NULL;
}

int nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t h, unsigned index, nvmlGpuInstanceProfileInfo_t *info) {
    CHECK(h, "nvmlDeviceGetGpuInstanceProfileInfo");
    if (h->gi >= 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= 0x12) return NVML_ERROR_INVALID_ARGUMENT;
    const si_gi *I = profile(h, index);
    if (!I) return NVML_ERROR_NOT_SUPPORTED;
    memset(info, 0, sizeof *info);
    info->id = I->profile_id;
    info->sliceCount = I->slices;
    info->instanceCount = 7 / (I->slices ? I->slices : 1);
    info->multiprocessorCount = 14 * I->slices;
    info->memorySizeMB = I->memory_mb;
    return NVML_SUCCESS;
}

int nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t h, unsigned index, nvmlGpuInstanceProfileInfo_v2_t *info) {
    CHECK(h, "nvmlDeviceGetGpuInstanceProfileInfoV");
    if (info->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlGpuInstanceProfileInfo_t v1;
    int e = nvmlDeviceGetGpuInstanceProfileInfo(h, index, &v1);
    if (e) return e;
    memcpy(&info->id, &v1, sizeof v1);
    snprintf(info->name, sizeof info->name, "MIG %ug.%llugb", v1.sliceCount, v1.memorySizeMB / 1024);
    return NVML_SUCCESS;
}

/* (total, reserved, free) of the handle's memory. */
static void memory(nvmlDevice_t h, unsigned long long *total, unsigned long long *reserved, unsigned long long *free) {
    const si_gpu *G = &si_cfg.gpus[h->gpu];
    if (h->gi < 0 && G->mig) {  /* parent of MIG devices: its instances' memory is theirs */
        *total = G->total;
        *reserved = G->reserved;
        *free = G->total - G->reserved;
        return;
    }
    si_region *r = region_of(h);
    si_entry tab[SI_TAB_ENTRIES];
    int fd = si_lock(r);
    if (fd < 0 || si_table_read(fd, r, tab) != 0) memset(tab, 0, sizeof tab);
    si_unlock(fd);
    *total = r->size;
    *reserved = r->reserved;
    *free = si_free_bytes(r, tab);
}

int nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *m) {
    CHECK(h, "nvmlDeviceGetMemoryInfo");
    unsigned long long total, reserved, free;
    memory(h, &total, &reserved, &free);
    m->total = total;
    m->free = free;
    m->used = total - free;  /* v1: reserved memory counts as used */
    return NVML_SUCCESS;
}

int nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t *m) {
    CHECK(h, "nvmlDeviceGetMemoryInfo_v2");
    if (m->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    unsigned long long total, reserved, free;
    memory(h, &total, &reserved, &free);
    m->total = total;
    m->reserved = reserved;
    m->free = free;
    m->used = total - free - reserved;
    return NVML_SUCCESS;
}

/* Contexts of one region; ci >= 0 keeps only that compute instance's. */
static int collect(si_region *r, int ci, unsigned gi_id, const si_gi *I, nvmlProcessInfo_t *out, unsigned cap,
                   unsigned *n) {
    si_entry tab[SI_TAB_ENTRIES];
    int fd = si_lock(r);
    if (fd < 0) return NVML_ERROR_UNKNOWN;
    if (si_table_read(fd, r, tab) != 0) { si_unlock(fd); return NVML_ERROR_UNKNOWN; }
    si_unlock(fd);
    for (int i = 0; i < SI_TAB_ENTRIES; i++) {
        if (tab[i].kind != SI_CONTEXT || (ci >= 0 && tab[i].ci != ci)) continue;
        unsigned long long used = 0;
        for (int j = 0; j < SI_TAB_ENTRIES; j++)
            if (tab[j].kind != SI_FREE && tab[j].pid == tab[i].pid) used += tab[j].size;
        if (*n < cap && out) {
            out[*n].pid = (unsigned)tab[i].pid;
            out[*n].usedGpuMemory = used;
            out[*n].gpuInstanceId = I ? gi_id : 0xFFFFFFFFu;
            out[*n].computeInstanceId = I ? I->cis[tab[i].ci < 0 ? 0 : tab[i].ci].id : 0xFFFFFFFFu;
        }
        (*n)++;
    }
    return NVML_SUCCESS;
}

static int processes(nvmlDevice_t h, unsigned *count, nvmlProcessInfo_t *infos) {
    const si_gpu *G = &si_cfg.gpus[h->gpu];
    unsigned cap = infos ? *count : 0, n = 0;
    int e = 0;
    if (h->gi >= 0) {
        const si_gi *I = &G->gis[h->gi];
        e = collect(region_of(h), h->ci, I->id, I, infos, cap, &n);
    } else if (G->mig) {
        if (G->aggregate_error) return G->aggregate_error;
        for (int i = 0; i < G->ngis && !e; i++)
            e = collect(&regions[h->gpu][i + 1], -1, G->gis[i].id, &G->gis[i], infos, cap, &n);
    } else {
        e = collect(region_of(h), -1, 0, NULL, infos, cap, &n);
    }
    if (e) return e;
    *count = n;
    if (n > cap) return NVML_ERROR_INSUFFICIENT_SIZE;
    return NVML_SUCCESS;
}

int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned *count, nvmlProcessInfo_t *infos) {
    CHECK(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    return processes(h, count, infos);
}

int nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t h, unsigned *count, nvmlProcessInfo_t *infos) {
    return nvmlDeviceGetComputeRunningProcesses_v3(h, count, infos);
}

static int graphics(nvmlDevice_t h, unsigned *count, const char *call) {
    CHECK(h, call);
    if (h->gi >= 0) return NVML_ERROR_NOT_SUPPORTED;  /* no graphics contexts on MIG devices */
    *count = 0;
    return NVML_SUCCESS;
}

int nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t h, unsigned *count, nvmlProcessInfo_t *infos) {
    (void)infos;
    return graphics(h, count, "nvmlDeviceGetGraphicsRunningProcesses_v3");
}

int nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t h, unsigned *count, nvmlProcessInfo_t *infos) {
    (void)infos;
    return graphics(h, count, "nvmlDeviceGetGraphicsRunningProcesses_v2");
}

static const char *mode_uuid(nvmlDevice_t h) {
    return h->gi < 0 ? si_cfg.gpus[h->gpu].uuid : si_cfg.gpus[h->gpu].gis[h->gi].cis[h->ci].uuid;
}

/* Compute mode on MIG, per driver generation (the CUDA version of the NVML the driver ships):
 * - nvml.h CUDA 11.1 .. 13.2.1 (NVIDIA/go-nvml gen/nvml/nvml.h at 2976179, line 8564, on
 *   nvmlDeviceSetComputeMode): "@note On MIG-enabled GPUs, compute mode would be set to DEFAULT and
 *   changing it is not supported." and "NVML_ERROR_NOT_SUPPORTED if the device does not support this
 *   feature". So on a MIG device handle, or on the parent GPU in MIG mode, the mode reads DEFAULT and
 *   any other value is NOT_SUPPORTED; DEFAULT itself changes nothing: answered SUCCESS, or NOT_SUPPORTED
 *   with mig_default_refused=1 (the header allows both readings; which one a driver gives needs a GPU).
 * - nvml.h CUDA 13.3 (go-nvml 8b8585b, line 8770): "Set the compute mode for the device or MIG device"
 *   and "@note If MIG is enabled on a GPU, device must be MIG device handle." So a MIG device handle
 *   takes every mode; the parent GPU in MIG mode is not a valid target (INVALID_ARGUMENT: "if device
 *   is invalid"). */
#define SI_CUDA_PER_MIG_COMPUTE_MODE 13030

static int mig_side(nvmlDevice_t h) { return h->gi >= 0 || si_cfg.gpus[h->gpu].mig; }

int nvmlDeviceSetComputeMode(nvmlDevice_t h, int mode) {
    CHECK(h, "nvmlDeviceSetComputeMode");
    if (mode < 0 || mode > 3 || mode == 1) return NVML_ERROR_INVALID_ARGUMENT;
    if (mig_side(h) && si_cfg.cuda_version < SI_CUDA_PER_MIG_COMPUTE_MODE)
        return mode == 0 && !si_cfg.mig_default_refused ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
    if (h->gi < 0 && si_cfg.gpus[h->gpu].mig) return NVML_ERROR_INVALID_ARGUMENT;
    return si_set_mode(mode_uuid(h), mode) == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

int nvmlDeviceGetComputeMode(nvmlDevice_t h, int *mode) {
    CHECK(h, "nvmlDeviceGetComputeMode");
    *mode = mig_side(h) && si_cfg.cuda_version < SI_CUDA_PER_MIG_COMPUTE_MODE ? 0 : si_get_mode(mode_uuid(h));
    return NVML_SUCCESS;
}

/* --- MIG reconfiguration: GPU instances and compute instances at placements ---------------------
 *
 * The configured GIs are the GPU's possible placements ("slots"); `present` says whether a GI exists
 * there now. Creating and destroying them follows nvml.h: a GI or CI in use (a context on it, or
 * memory held by a process NVML does not list: unlisted_used) is not destroyed (NVML_ERROR_IN_USE);
 * a GI over memory slices another GI holds, or a CI over compute slices another CI holds, is not
 * created (NVML_ERROR_INSUFFICIENT_RESOURCES). Changes persist in <state_dir>/layout. The slot's
 * memory file is kept across destroy/create: whatever the previous tenant left is still there.
 */

typedef struct { int magic; int gpu; int gi; int ci; } ci_t_;
typedef ci_t_ *nvmlComputeInstance_t;
typedef struct { unsigned start, size; } nvmlComputeInstancePlacement_t;
typedef struct {
    nvmlDevice_t device;
    nvmlGpuInstance_t gpuInstance;
    unsigned id, profileId;
    nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;
typedef struct {
    unsigned id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount,
        sharedEncoderCount, sharedJpegCount, sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;
typedef struct {
    unsigned version, id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount,
        sharedEncoderCount, sharedJpegCount, sharedOfaCount;
    char name[96];
} nvmlComputeInstanceProfileInfo_v2_t;
#define nvmlComputeInstanceProfileInfo_v2 ((unsigned)(sizeof(nvmlComputeInstanceProfileInfo_v2_t) | (2 << 24)))

/* NVML_COMPUTE_INSTANCE_PROFILE_{1,2,3,4,7,8,6}_SLICE: compute slices of each profile index. */
static const unsigned ci_slices[] = {1, 2, 3, 4, 7, 8, 6};
#define CI_PROFILES ((unsigned)(sizeof ci_slices / sizeof ci_slices[0]))

static ci_t_ ci_h[SI_MAX_GPUS][SI_MAX_GIS][SI_MAX_CIS];

static int gpu_parent(nvmlDevice_t h, const char *call) {
    CHECK(h, call);
    if (h->gi >= 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (!si_cfg.gpus[h->gpu].mig) return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

/* The configured error of a GI slot for `call` (error / error_call knobs), or 0. */
static int slot_fail(int g, int i, const char *call) {
    dev_t_ probe = {MAGIC_DEV, g, i, 0};
    return fail(&probe, call);
}

static int gi_check(nvmlGpuInstance_t gi, const char *call) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!gi || gi->magic != MAGIC_GI || !si_cfg.gpus[gi->gpu].gis[gi->gi].present) return NVML_ERROR_INVALID_ARGUMENT;
    return slot_fail(gi->gpu, gi->gi, call);
}

static int ci_check(nvmlComputeInstance_t ci, const char *call) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!ci || ci->magic != MAGIC_CI) return NVML_ERROR_INVALID_ARGUMENT;
    const si_gi *I = &si_cfg.gpus[ci->gpu].gis[ci->gi];
    if (!I->present || ci->ci >= I->ncis || I->cis[ci->ci].dead) return NVML_ERROR_INVALID_ARGUMENT;
    return slot_fail(ci->gpu, ci->gi, call);
}

/* True if the slot's memory has a context (of compute instance `c`, or any if c < 0) or unlisted use. */
static int in_use(int g, int i, int c) {
    const si_gi *I = &si_cfg.gpus[g].gis[i];
    if (I->unlisted_used) return 1;  /* a process NVML does not list holds memory there */
    si_region *r = &regions[g][i + 1];
    si_entry tab[SI_TAB_ENTRIES];
    int fd = si_lock(r);
    if (fd < 0) return 1;
    int bad = si_table_read(fd, r, tab) != 0;
    si_unlock(fd);
    if (bad) return 1;
    for (int k = 0; k < SI_TAB_ENTRIES; k++)
        if (tab[k].kind != SI_FREE && (c < 0 || tab[k].ci == c)) return 1;
    return 0;
}

static int live_cis(const si_gi *I) {
    int n = 0;
    for (int c = 0; c < I->ncis; c++) n += !I->cis[c].dead;
    return n;
}

static int slot_of_profile(const si_gpu *G, unsigned profile_id) {
    for (int i = 0; i < G->ngis; i++)
        if (G->gis[i].profile_id == profile_id) return i;
    return -1;
}

int nvmlDeviceGetGpuInstanceProfileInfoByIdV(nvmlDevice_t h, unsigned profile_id, nvmlGpuInstanceProfileInfo_v2_t *info) {
    int e = gpu_parent(h, "nvmlDeviceGetGpuInstanceProfileInfoByIdV");
    if (e) return e;
    if (info->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    int i = slot_of_profile(&si_cfg.gpus[h->gpu], profile_id);
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    info->version = nvmlGpuInstanceProfileInfo_v2;
    return nvmlDeviceGetGpuInstanceProfileInfoV(h, si_cfg.gpus[h->gpu].gis[i].profile_index, info);
}

int nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t h, unsigned profile_id,
                                                  nvmlGpuInstancePlacement_t *placements, unsigned *count) {
    int e = gpu_parent(h, "nvmlDeviceGetGpuInstancePossiblePlacements_v2");
    if (e) return e;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    const si_gpu *G = &si_cfg.gpus[h->gpu];
    if (slot_of_profile(G, profile_id) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = 0;
    for (int i = 0; i < G->ngis; i++) {
        if (G->gis[i].profile_id != profile_id) continue;
        if (placements) {
            if (n >= *count) return NVML_ERROR_INSUFFICIENT_SIZE;
            placements[n] = (nvmlGpuInstancePlacement_t){G->gis[i].placement_start, G->gis[i].placement_size};
        }
        n++;
    }
    *count = n;
    return NVML_SUCCESS;
}

int nvmlDeviceGetGpuInstances(nvmlDevice_t h, unsigned profile_id, nvmlGpuInstance_t *gis, unsigned *count) {
    int e = gpu_parent(h, "nvmlDeviceGetGpuInstances");
    if (e) return e;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    const si_gpu *G = &si_cfg.gpus[h->gpu];
    if (slot_of_profile(G, profile_id) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = 0;
    for (int i = 0; i < G->ngis; i++)
        if (G->gis[i].present && G->gis[i].profile_id == profile_id) gis[n++] = &gi_h[h->gpu][i];
    *count = n;
    return NVML_SUCCESS;
}

static int overlaps(unsigned a, unsigned an, unsigned b, unsigned bn) { return a < b + bn && b < a + an; }

static int create_gi_at(nvmlDevice_t h, int i, nvmlGpuInstance_t *gi, const char *call) {
    si_gpu *G = &si_cfg.gpus[h->gpu];
    si_gi *I = &G->gis[i];
    int e = slot_fail(h->gpu, i, call);
    if (e) return e;
    for (int j = 0; j < G->ngis; j++)
        if (G->gis[j].present && overlaps(I->placement_start, I->placement_size, G->gis[j].placement_start,
                                          G->gis[j].placement_size))
            return NVML_ERROR_INSUFFICIENT_RESOURCES;  /* another GI holds (some of) these memory slices */
    I->present = 1;
    I->ncis = 0;
    gi_h[h->gpu][i] = (gi_t_){MAGIC_GI, h->gpu, i};
    if (si_layout_save() != 0) return NVML_ERROR_UNKNOWN;
    *gi = &gi_h[h->gpu][i];
    return NVML_SUCCESS;
}

int nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t h, unsigned profile_id,
                                             const nvmlGpuInstancePlacement_t *placement, nvmlGpuInstance_t *gi) {
    int e = gpu_parent(h, "nvmlDeviceCreateGpuInstanceWithPlacement");
    if (e) return e;
    if (!placement || !gi) return NVML_ERROR_INVALID_ARGUMENT;
    const si_gpu *G = &si_cfg.gpus[h->gpu];
    for (int i = 0; i < G->ngis; i++)
        if (G->gis[i].profile_id == profile_id && G->gis[i].placement_start == placement->start &&
            G->gis[i].placement_size == placement->size)
            return create_gi_at(h, i, gi, "nvmlDeviceCreateGpuInstanceWithPlacement");
    return NVML_ERROR_INVALID_ARGUMENT;  /* not a placement of this profile */
}

int nvmlDeviceCreateGpuInstance(nvmlDevice_t h, unsigned profile_id, nvmlGpuInstance_t *gi) {
    int e = gpu_parent(h, "nvmlDeviceCreateGpuInstance");
    if (e) return e;
    const si_gpu *G = &si_cfg.gpus[h->gpu];
    int found = 0;
    for (int i = 0; i < G->ngis; i++) {
        if (G->gis[i].profile_id != profile_id) continue;
        found = 1;
        if (create_gi_at(h, i, gi, "nvmlDeviceCreateGpuInstance") == NVML_SUCCESS) return NVML_SUCCESS;
    }
    return found ? NVML_ERROR_INSUFFICIENT_RESOURCES : NVML_ERROR_INVALID_ARGUMENT;
}

/* nvml.h line 13038 (go-nvml pkg/nvml/nvml.h at 2f9e261): "Destroy GPU instance"; IN_USE "if processes
 * (e.g. CUDA application) or compute instances are active on the GPU instance" (lines 13034-13036). The
 * header says nothing of the GI's memory, so whether a destroy + recreate over the same memory slices
 * leaves the old bytes is configured both ways: gi_destroy_scrub=0 keeps the slot's memory file (what the
 * previous GI's tenant left is there for the next GI at the placement), 1 zeroes it at the destroy. */
int nvmlGpuInstanceDestroy(nvmlGpuInstance_t gi) {
    int e = gi_check(gi, "nvmlGpuInstanceDestroy");
    if (e) return e;
    si_gi *I = &si_cfg.gpus[gi->gpu].gis[gi->gi];
    if (live_cis(I) || in_use(gi->gpu, gi->gi, -1)) return NVML_ERROR_IN_USE;  /* CIs or processes active */
    if (si_cfg.gi_destroy_scrub) {
        si_region r;
        if (si_region_of(gi->gpu, gi->gi, &r) != 0) return NVML_ERROR_UNKNOWN;
        memset(r.base, 0, r.size);
        munmap(r.base, r.size);
    }
    I->present = 0;
    I->ncis = 0;
    return si_layout_save() == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

static int ci_profile(nvmlGpuInstance_t gi, unsigned profile, unsigned eng, nvmlComputeInstanceProfileInfo_t *out,
                      const char *call) {
    int e = gi_check(gi, call);
    if (e) return e;
    const si_gi *I = &si_cfg.gpus[gi->gpu].gis[gi->gi];
    if (profile >= CI_PROFILES + 2) return NVML_ERROR_INVALID_ARGUMENT;  /* past ..._2_SLICE_REV1 */
    if (eng != 0 || profile >= CI_PROFILES || ci_slices[profile] > I->slices) return NVML_ERROR_NOT_SUPPORTED;
    memset(out, 0, sizeof *out);
    out->id = profile;
    out->sliceCount = ci_slices[profile];
    out->instanceCount = I->slices / ci_slices[profile];
    out->multiprocessorCount = 14 * ci_slices[profile];
    return NVML_SUCCESS;
}

int nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gi, unsigned profile, unsigned eng,
                                                 nvmlComputeInstanceProfileInfo_t *info) {
    return ci_profile(gi, profile, eng, info, "nvmlGpuInstanceGetComputeInstanceProfileInfo");
}

int nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gi, unsigned profile, unsigned eng,
                                                  nvmlComputeInstanceProfileInfo_v2_t *info) {
    if (info->version != nvmlComputeInstanceProfileInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlComputeInstanceProfileInfo_t v1;
    int e = ci_profile(gi, profile, eng, &v1, "nvmlGpuInstanceGetComputeInstanceProfileInfoV");
    if (e) return e;
    memcpy(&info->id, &v1, sizeof v1);
    const si_gi *I = &si_cfg.gpus[gi->gpu].gis[gi->gi];
    snprintf(info->name, sizeof info->name, "MIG %uc.%ug.%llugb", v1.sliceCount, I->slices, I->memory_mb / 1024);
    return NVML_SUCCESS;
}

static int create_ci(nvmlGpuInstance_t gi, unsigned profile, unsigned start, nvmlComputeInstance_t *ci) {
    si_gi *I = &si_cfg.gpus[gi->gpu].gis[gi->gi];
    unsigned size = ci_slices[profile];
    if (start + size > I->slices || start % size) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    int slot = -1;
    unsigned id = 0;
    for (int c = 0; c < I->ncis; c++) {
        const si_ci *C = &I->cis[c];
        if (C->dead) { if (slot < 0) slot = c; continue; }
        if (overlaps(start, size, C->placement_start, C->placement_size)) return NVML_ERROR_INSUFFICIENT_RESOURCES;
        if (C->id >= id) id = C->id + 1;
    }
    if (slot < 0) {
        if (I->ncis >= SI_MAX_CIS) return NVML_ERROR_INSUFFICIENT_RESOURCES;
        slot = I->ncis++;
    }
    si_ci *C = &I->cis[slot];
    unsigned gen = ++si_cfg.generation;
    *C = (si_ci){.index = slot, .id = id, .profile_index = profile, .placement_start = start, .placement_size = size};
    snprintf(C->uuid, sizeof C->uuid, "MIG-%08x-%04x-4%03x-8%03x-%012x", 0x5a000000u | gen, (unsigned)gi->gpu,
             (unsigned)gi->gi, (unsigned)slot, gen);
    ci_h[gi->gpu][gi->gi][slot] = (ci_t_){MAGIC_CI, gi->gpu, gi->gi, slot};
    if (si_layout_save() != 0) return NVML_ERROR_UNKNOWN;
    *ci = &ci_h[gi->gpu][gi->gi][slot];
    return NVML_SUCCESS;
}

int nvmlGpuInstanceCreateComputeInstanceWithPlacement(nvmlGpuInstance_t gi, unsigned profile_id,
                                                      const nvmlComputeInstancePlacement_t *placement,
                                                      nvmlComputeInstance_t *ci) {
    int e = gi_check(gi, "nvmlGpuInstanceCreateComputeInstanceWithPlacement");
    if (e) return e;
    if (!placement || !ci || profile_id >= CI_PROFILES) return NVML_ERROR_INVALID_ARGUMENT;
    if (placement->size != ci_slices[profile_id]) return NVML_ERROR_INVALID_ARGUMENT;
    return create_ci(gi, profile_id, placement->start, ci);
}

int nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gi, unsigned profile_id, nvmlComputeInstance_t *ci) {
    int e = gi_check(gi, "nvmlGpuInstanceCreateComputeInstance");
    if (e) return e;
    if (!ci || profile_id >= CI_PROFILES) return NVML_ERROR_INVALID_ARGUMENT;
    const si_gi *I = &si_cfg.gpus[gi->gpu].gis[gi->gi];
    for (unsigned start = 0; start + ci_slices[profile_id] <= I->slices; start += ci_slices[profile_id])
        if (create_ci(gi, profile_id, start, ci) == NVML_SUCCESS) return NVML_SUCCESS;
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
}

int nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gi, unsigned profile_id, nvmlComputeInstance_t *cis,
                                       unsigned *count) {
    int e = gi_check(gi, "nvmlGpuInstanceGetComputeInstances");
    if (e) return e;
    if (!count || profile_id >= CI_PROFILES + 2) return NVML_ERROR_INVALID_ARGUMENT;
    const si_gi *I = &si_cfg.gpus[gi->gpu].gis[gi->gi];
    unsigned n = 0;
    for (int c = 0; c < I->ncis; c++) {
        if (I->cis[c].dead || I->cis[c].profile_index != profile_id) continue;
        ci_h[gi->gpu][gi->gi][c] = (ci_t_){MAGIC_CI, gi->gpu, gi->gi, c};
        cis[n++] = &ci_h[gi->gpu][gi->gi][c];
    }
    *count = n;
    return NVML_SUCCESS;
}

int nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t *info) {
    int e = ci_check(ci, "nvmlComputeInstanceGetInfo_v2");
    if (e) return e;
    const si_ci *C = &si_cfg.gpus[ci->gpu].gis[ci->gi].cis[ci->ci];
    info->device = &gpu_h[ci->gpu];
    info->gpuInstance = &gi_h[ci->gpu][ci->gi];
    info->id = C->id;
    info->profileId = C->profile_index;
    info->placement = (nvmlComputeInstancePlacement_t){C->placement_start, C->placement_size};
    return NVML_SUCCESS;
}

int nvmlComputeInstanceDestroy(nvmlComputeInstance_t ci) {
    int e = ci_check(ci, "nvmlComputeInstanceDestroy");
    if (e) return e;
    si_gi *I = &si_cfg.gpus[ci->gpu].gis[ci->gi];
    if (in_use(ci->gpu, ci->gi, ci->ci)) return NVML_ERROR_IN_USE;  /* processes active on the CI */
    I->cis[ci->ci].dead = 1;
    I->cis[ci->ci].uuid[0] = 0;
    if (!live_cis(I)) I->ncis = 0;
    return si_layout_save() == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

/* --- health: ECC, row remapping, page retirement, recovery action, XID events, driver state ----------
 *
 * Signatures and return codes: go-nvml pkg/nvml/nvml.h at 2f9e261. The GPU's health lives in
 * <state_dir>/health-gpu<g> ("key=value" lines, read at every call, so a test changes it while a claim
 * holds the device: standin.Node.set_health) and its critical XIDs in <state_dir>/xid-gpu<g> (one code a
 * line, appended by standin.Node.xid). Absent keys: a healthy data-center GPU (ECC on, nothing pending,
 * persistence mode on). Reads on a MIG device handle answer for its GPU (the counters are GPU-wide). */

#define NVML_ERROR_TIMEOUT 10
#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230  /* nvml.h line 2808; first in the CUDA 12.8 header (go-nvml f420a32) */
#define SI_CUDA_RECOVERY_ACTION 12080
#define XID_CRITICAL 0x8ULL  /* nvmlEventTypeXidCriticalError, nvml.h line 3186 */

static long long health(int g, const char *key, long long dflt) {
    char path[600], line[200];
    snprintf(path, sizeof path, "%s/health-gpu%d", si_cfg.state_dir, g);
    FILE *f = fopen(path, "r");
    if (!f) return dflt;
    size_t n = strlen(key);
    long long value = dflt;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == '=') value = strtoll(line + n + 1, NULL, 0);
    fclose(f);
    return value;
}

/* nvml.h line 6907: NOT_SUPPORTED "if the device does not support this feature" (no ECC: GeForce). */
int nvmlDeviceGetEccMode(nvmlDevice_t h, int *current, int *pending) {
    CHECK(h, "nvmlDeviceGetEccMode");
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    if (!health(h->gpu, "ecc_supported", 1)) return NVML_ERROR_NOT_SUPPORTED;
    *current = (int)health(h->gpu, "ecc_enabled", 1);
    *pending = (int)health(h->gpu, "ecc_pending", *current);
    return NVML_SUCCESS;
}

/* nvml.h line 7007: "Requires ECC Mode to be enabled"; errorType 0 corrected / 1 uncorrected
 * (nvmlMemoryErrorType_t), counterType 0 volatile / 1 aggregate (nvmlEccCounterType_t). */
int nvmlDeviceGetTotalEccErrors(nvmlDevice_t h, int error_type, int counter_type, unsigned long long *count) {
    CHECK(h, "nvmlDeviceGetTotalEccErrors");
    if (!count || error_type < 0 || error_type > 1 || counter_type < 0 || counter_type > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!health(h->gpu, "ecc_supported", 1) || !health(h->gpu, "ecc_enabled", 1)) return NVML_ERROR_NOT_SUPPORTED;
    static const char *keys[2][2] = {{"ecc_volatile_corrected", "ecc_aggregate_corrected"},
                                     {"ecc_volatile_uncorrected", "ecc_aggregate_uncorrected"}};
    long long v = health(h->gpu, keys[error_type][counter_type], 0);
    if (counter_type == 1) v += health(h->gpu, keys[error_type][0], 0);  /* aggregate includes volatile */
    *count = (unsigned long long)v;
    return NVML_SUCCESS;
}

/* nvml.h line 8455: "For Ampere or newer"; line 8438: "On MIG-enabled GPUs with active instances,
 * querying the number of remapped rows is not supported" (NOT_SUPPORTED "If MIG is enabled"). */
int nvmlDeviceGetRemappedRows(nvmlDevice_t h, unsigned *corr, unsigned *unc, unsigned *pending, unsigned *failure) {
    CHECK(h, "nvmlDeviceGetRemappedRows");
    if (!corr || !unc || !pending || !failure) return NVML_ERROR_INVALID_ARGUMENT;
    const si_gpu *G = &si_cfg.gpus[h->gpu];
    if (G->arch < 80) return NVML_ERROR_NOT_SUPPORTED;
    if (G->mig)
        for (int i = 0; i < G->ngis; i++)
            if (G->gis[i].present) return NVML_ERROR_NOT_SUPPORTED;
    *corr = (unsigned)health(h->gpu, "remap_corrected", 0);
    *unc = (unsigned)health(h->gpu, "remap_uncorrected", 0);
    *pending = (unsigned)health(h->gpu, "remap_pending", 0);
    *failure = (unsigned)health(h->gpu, "remap_failure", 0);
    return NVML_SUCCESS;
}

/* nvml.h line 8428: "For Kepler or newer"; isPending is an nvmlEnableState_t. */
int nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t h, int *is_pending) {
    CHECK(h, "nvmlDeviceGetRetiredPagesPendingStatus");
    if (!is_pending) return NVML_ERROR_INVALID_ARGUMENT;
    *is_pending = health(h->gpu, "retired_pending", 0) ? 1 : 0;
    return NVML_SUCCESS;
}

typedef union { double d; int si; unsigned ui; unsigned long ul; unsigned long long ull; long long sll; } nvmlValue_t;
typedef struct {
    unsigned fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType;
    int nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

/* nvml.h line 10251: SUCCESS "if any values were populated"; each value's own status in nvmlReturn.
 * The recovery-action field is NOT_SUPPORTED by an NVML older than the CUDA 12.8 one (R570). */
int nvmlDeviceGetFieldValues(nvmlDevice_t h, int n, nvmlFieldValue_t *values) {
    CHECK(h, "nvmlDeviceGetFieldValues");
    if (!values || n <= 0) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < n; i++) {
        values[i].timestamp = 0;
        values[i].latencyUsec = 0;
        /* recovery_field_status: the per-field status a driver gives (which one an NVML that predates
         * the field answers, NOT_SUPPORTED or INVALID_ARGUMENT, is not in any header: both are modelled). */
        long long status = health(h->gpu, "recovery_field_status", -1);
        if (values[i].fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION && status > 0) {
            values[i].nvmlReturn = (int)status;
        } else if (values[i].fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION &&
                   si_cfg.cuda_version >= SI_CUDA_RECOVERY_ACTION) {
            values[i].valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
            values[i].nvmlReturn = NVML_SUCCESS;
            values[i].value.ull = 0;
            values[i].value.ui = (unsigned)health(h->gpu, "recovery_action", 0);
        } else {
            values[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
    }
    return NVML_SUCCESS;
}

/* nvml.h line 5454. */
int nvmlDeviceGetPersistenceMode(nvmlDevice_t h, int *mode) {
    CHECK(h, "nvmlDeviceGetPersistenceMode");
    if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = health(h->gpu, "persistence", 1) ? 1 : 0;
    return NVML_SUCCESS;
}

typedef struct { unsigned environment, ccFeature, devToolsMode; } nvmlConfComputeSystemState_t;

/* nvml.h line 7906 ("For Ampere or newer"): NVML_CC_SYSTEM_ENVIRONMENT_* / _FEATURE_* / _DEVTOOLS_MODE_*
 * (lines 3698-3712). Node-wide: read from GPU 0's health file (cc_environment, cc_feature, cc_devtools). */
int nvmlSystemGetConfComputeState(nvmlConfComputeSystemState_t *state) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!state) return NVML_ERROR_INVALID_ARGUMENT;
    if (si_cfg.ngpus == 0 || si_cfg.gpus[0].arch < 80) return NVML_ERROR_NOT_SUPPORTED;
    state->environment = (unsigned)health(0, "cc_environment", 0);
    state->ccFeature = (unsigned)health(0, "cc_feature", 0);
    state->devToolsMode = (unsigned)health(0, "cc_devtools", 0);
    return NVML_SUCCESS;
}

/* XID events (nvml.h lines 9903, 9939, 10000). A set remembers, per GPU, how many lines of xid-gpu<g>
 * it has delivered; registering starts at the current end (events before it are not seen). The wait
 * never blocks: with nothing new it answers NVML_ERROR_TIMEOUT at once (the agent polls with 0 ms). */
typedef struct { nvmlDevice_t device; unsigned long long eventType, eventData; unsigned gpuInstanceId, computeInstanceId; }
    nvmlEventData_t;
typedef struct { int magic; unsigned long long mask[SI_MAX_GPUS]; long delivered[SI_MAX_GPUS]; } event_set_t;
typedef event_set_t *nvmlEventSet_t;
#define MAGIC_EVENTS 0x4e564553
#define SI_MAX_EVENT_SETS 4096  /* one per runtime a test process builds; never freed by the agent */
static event_set_t event_sets[SI_MAX_EVENT_SETS];

/* The XID codes of GPU g so far; returns how many (at most cap stored in out). */
static long xids(int g, unsigned long long *out, long cap) {
    char path[600], line[64];
    snprintf(path, sizeof path, "%s/xid-gpu%d", si_cfg.state_dir, g);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    long n = 0;
    while (fgets(line, sizeof line, f)) {
        if (out && n < cap) out[n] = strtoull(line, NULL, 0);
        n++;
    }
    fclose(f);
    return n;
}

int nvmlEventSetCreate(nvmlEventSet_t *set) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < SI_MAX_EVENT_SETS; i++)
        if (event_sets[i].magic != MAGIC_EVENTS) {
            memset(&event_sets[i], 0, sizeof event_sets[i]);
            event_sets[i].magic = MAGIC_EVENTS;
            *set = &event_sets[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
}

int nvmlDeviceGetSupportedEventTypes(nvmlDevice_t h, unsigned long long *types) {
    CHECK(h, "nvmlDeviceGetSupportedEventTypes");
    if (!types) return NVML_ERROR_INVALID_ARGUMENT;
    *types = XID_CRITICAL;
    return NVML_SUCCESS;
}

int nvmlDeviceRegisterEvents(nvmlDevice_t h, unsigned long long types, nvmlEventSet_t set) {
    CHECK(h, "nvmlDeviceRegisterEvents");
    if (!set || set->magic != MAGIC_EVENTS || h->gi >= 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (types & ~XID_CRITICAL) return NVML_ERROR_NOT_SUPPORTED;  /* only XIDs are modelled */
    if (!set->mask[h->gpu]) set->delivered[h->gpu] = xids(h->gpu, NULL, 0);
    set->mask[h->gpu] |= types;
    return NVML_SUCCESS;
}

int nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeoutms) {
    (void)timeoutms;
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!set || set->magic != MAGIC_EVENTS || !data) return NVML_ERROR_INVALID_ARGUMENT;
    for (int g = 0; g < si_cfg.ngpus; g++) {
        if (!(set->mask[g] & XID_CRITICAL)) continue;
        unsigned long long codes[256];
        long n = xids(g, codes, 256);
        if (n > set->delivered[g] && set->delivered[g] < 256) {
            *data = (nvmlEventData_t){&gpu_h[g], XID_CRITICAL, codes[set->delivered[g]], 0xFFFFFFFFu, 0xFFFFFFFFu};
            set->delivered[g]++;
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_TIMEOUT;
}

int nvmlEventSetFree(nvmlEventSet_t set) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!set || set->magic != MAGIC_EVENTS) return NVML_ERROR_INVALID_ARGUMENT;
    set->magic = 0;
    return NVML_SUCCESS;
}
