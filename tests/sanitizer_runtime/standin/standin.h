/* Stand-in NVIDIA driver for the sanitizer tests: shared state of libnvidia-ml.so.1 and libcuda.so.1.
 *
 * Not a driver: a host-memory model of the parts of one that the sanitizer's real backends touch
 * (pynvml from nvidia-ml-py, cuda.bindings from cuda-bindings). Both libraries read the same
 * flat config file (path in $DRA_STANDIN_CONFIG, lines "key=value", written by standin.py) and
 * share one state directory across processes:
 *   mem-<region>   the device memory of one GPU or one MIG GPU instance (a MAP_SHARED file),
 *   tab-<region>   its allocation table (contexts and allocations, owner PID; flock'ed),
 *   mode-<uuid>    the NVML compute mode of a GPU or MIG device (persists like the driver's).
 * An entry whose owner PID is gone (or a zombie) is released by the next process that looks,
 * zeroing its bytes only when the config says scrub_on_free=1 (the driver's scrub-on-free).
 */
#ifndef DRA_STANDIN_H
#define DRA_STANDIN_H

#include <stdint.h>
#include <stddef.h>

#define SI_MAX_GPUS 8
#define SI_MAX_GIS 8
#define SI_MAX_CIS 8
#define SI_TAB_ENTRIES 512

enum { SI_FREE = 0, SI_CONTEXT = 1, SI_ALLOC = 2 };

typedef struct {
    int32_t pid;
    int32_t kind;
    int32_t ci;       /* compute instance index (MIG) or -1 */
    int32_t pad;
    uint64_t off;
    uint64_t size;
} si_entry;

typedef struct {
    int index;        /* CI index inside its GI */
    unsigned id;
    unsigned profile_index;   /* NVML_COMPUTE_INSTANCE_PROFILE_* (also its profile id here) */
    unsigned placement_start; /* compute slices inside the GI */
    unsigned placement_size;
    int dead;                 /* destroyed (nvmlComputeInstanceDestroy): no handle, no UUID */
    char uuid[96];
} si_ci;

typedef struct {
    int index;
    unsigned id;
    unsigned profile_index;   /* NVML_GPU_INSTANCE_PROFILE_* */
    unsigned profile_id;      /* nvmlGpuInstanceProfileInfo_t.id */
    unsigned slices;
    unsigned placement_start;
    unsigned placement_size;
    unsigned long long memory_mb;   /* profile memorySizeMB (naming) */
    uint64_t total;                 /* backed bytes of this instance */
    uint64_t reserved;
    uint64_t unlisted_used;
    int error;                      /* NVML error for error_call on this GI's handles */
    char error_call[96];
    int present;                    /* the GI exists (a slot: nvmlGpuInstanceDestroy / Create... change it) */
    int ncis;
    si_ci cis[SI_MAX_CIS];
} si_gi;

typedef struct {
    int index;
    char uuid[96];
    char name[96];
    unsigned minor;
    int arch;                 /* 90 = sm_90 */
    int sms;
    uint64_t total;
    uint64_t reserved;
    uint64_t context_overhead;
    uint64_t unlisted_used;
    int mig;
    int aggregate_error;      /* error of process listing on the parent handle in MIG mode */
    int error;
    char error_call[96];
    int ngis;
    si_gi gis[SI_MAX_GIS];
} si_gpu;

typedef struct {
    int loaded;
    char state_dir[512];
    char caps_dir[512];       /* the driver's /proc/driver/nvidia/capabilities ("" : not published) */
    char driver_version[64];
    int cuda_version;         /* cuDriverGetVersion, e.g. 12080 */
    int ptx_isa_max;          /* 87 = PTX ISA 8.7 */
    int scrub_on_free;
    int gi_destroy_scrub;     /* nvmlGpuInstanceDestroy zeroes the GI's memory (unknown on real drivers) */
    int mig_default_refused;  /* pre-13.3 MIG: DEFAULT refused too (NOT_SUPPORTED), not a no-op */
    int residue_byte;         /* -1: none */
    uint64_t residue_len;     /* 0: whole region */
    int ngpus;
    unsigned generation;      /* counter for the UUIDs of compute instances created at run time */
    si_gpu gpus[SI_MAX_GPUS];
} si_config;

/* A memory region: one whole GPU (gi < 0) or one GPU instance. */
typedef struct {
    int gpu;
    int gi;
    uint64_t size;
    uint64_t reserved;
    uint64_t unlisted_used;
    unsigned char *base;      /* this process's mapping */
} si_region;

extern si_config si_cfg;

int si_load(void);  /* $DRA_STANDIN_CONFIG: 1 (re)loaded, 0 unchanged, -1 missing */
const char *si_key(const si_region *r, char *buf, size_t n);
int si_region_of(int gpu, int gi, si_region *out);   /* maps the memory (creates it with residue) */
int si_lock(const si_region *r);                     /* returns fd (flock held); -1 on error */
void si_unlock(int fd);
int si_table_read(int fd, const si_region *r, si_entry *tab);  /* also releases dead owners' entries */
int si_table_write(int fd, const si_entry *tab);
int si_pid_alive(int pid);
uint64_t si_used(const si_entry *tab);
uint64_t si_free_bytes(const si_region *r, const si_entry *tab);
/* First fit, 2 MiB aligned; returns offset or UINT64_MAX. */
uint64_t si_place(const si_region *r, const si_entry *tab, uint64_t size);
int si_add(si_entry *tab, int pid, int kind, int ci, uint64_t off, uint64_t size);
int si_get_mode(const char *uuid);                   /* NVML compute mode, default 0 */
int si_set_mode(const char *uuid, int mode);
/* MIG layout changes (GI/CI create/destroy) persist in <state_dir>/layout, applied by si_load in
 * every process that loads the stand-in afterwards (the CUDA worker, tenants). */
int si_layout_save(void);
/* The MIG capability ``access`` files of every live GI and CI under caps_dir, as the driver publishes
 * them (gpu<minor>/mig/gi<G>/access, .../ci<C>/access, "DeviceFileMinor: N"); gone ones removed. */
void si_caps_publish(void);

#endif
