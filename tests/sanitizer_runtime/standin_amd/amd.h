/* Stand-in AMD GPU stack for the sanitizer tests: shared state of libamd_smi.so and libamdhip64.so.
 *
 * Not a driver: a host-memory model of what the AMD backend touches through the real Python
 * bindings (amdsmi's ctypes wrapper, hip-python's Cython bindings). Both libraries read one flat
 * config file ($DRA_AMD_STANDIN_CONFIG, lines "key=value", written by standin_amd/__init__.py) and
 * share a state directory across processes:
 *   mem-<dev>   the VRAM of one device (a whole GPU, or one compute partition), a MAP_SHARED file;
 *   tab-<dev>   its allocation table (HIP contexts and allocations with their owner PID; flock'ed).
 * An entry whose owner is gone is dropped by the next process that looks; its bytes are zeroed
 * only when the config says ras=1 (amdgpu wipes VRAM on release when RAS is enabled).
 */
#ifndef DRA_AMD_STANDIN_H
#define DRA_AMD_STANDIN_H

#include <stdint.h>
#include <stddef.h>

#define AS_MAX_DEVS 16
#define AS_TAB 256

typedef struct {
    int32_t pid;
    int32_t kind;      /* 1 context, 2 allocation */
    uint64_t off;
    uint64_t size;
} as_entry;

typedef struct {
    char uuid[64];          /* amdsmi_get_gpu_device_uuid */
    char hip_uuid[64];      /* amdsmi_enumeration_info_t.hip_uuid: the ROCr agent UUID "GPU-<16 hex>" */
    unsigned card, render, hip_id, hsa_id;
    uint64_t bdf;           /* amdsmi_bdf_t.as_uint */
    unsigned partition_id;  /* amdsmi_kfd_info_t.current_partition_id */
    unsigned kfd_node;
    char compute_partition[16];
    char memory_partition[16];
    uint64_t total;         /* VRAM bytes really backed */
    uint64_t context_overhead;
    uint64_t ecc_enabled;   /* amdsmi_get_gpu_ecc_enabled: bitmask of blocks */
    uint64_t ecc_uncorrectable;
    int error;              /* amdsmi status returned by error_call (or every call on this handle) */
    char error_call[96];
    char extra_pids[256];   /* PIDs amdsmi lists beside the HIP users (comma separated) */
} as_dev;

typedef struct {
    int loaded;
    char state_dir[512];
    char driver_version[64];
    int hip_runtime_version;
    int ras;                /* amdgpu wipes VRAM on release */
    int residue_byte;       /* -1: none; else the byte a new mem file starts with (a tenant's leftovers) */
    int memset_skip_tail;   /* bytes hipMemset silently leaves untouched at the end (a broken fill) */
    int ndevs;
    as_dev devs[AS_MAX_DEVS];
} as_config;

extern as_config as_cfg;

int as_load(void);                          /* 0 ok, -1: no config */
void as_reset(void);                        /* forget the config (amdsmi_init reads it again) */
unsigned char *as_map(int dev);             /* this process's mapping of the device's VRAM */
int as_lock(int dev);                       /* flock'ed table fd, -1 on error */
void as_unlock(int fd);
int as_read(int fd, int dev, as_entry *tab);/* reads the table, drops (and maybe wipes) dead owners */
int as_write(int fd, const as_entry *tab);
int as_alive(int pid);
uint64_t as_used(const as_entry *tab);
uint64_t as_place(int dev, const as_entry *tab, uint64_t size); /* first fit, 2 MiB aligned; UINT64_MAX if none */
int as_add(as_entry *tab, int pid, int kind, uint64_t off, uint64_t size);

#endif
