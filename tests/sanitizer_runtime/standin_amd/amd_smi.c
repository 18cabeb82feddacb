/* Stand-in libamd_smi.so: the calls the sanitizer's AMD backend makes through the amdsmi Python
 * package (amdsmi_wrapper.py binds them with ctypes), answering as amdsmi.h documents them
 * (ROCm/amdsmi include/amd_smi/amdsmi.h, ROCm 7.0). Struct layouts are the wrapper's (_pack_ = 1,
 * explicit PADDING fields). Every other symbol the wrapper binds at import exists too (stubs.c,
 * generated from the installed wrapper by the tests) and answers AMDSMI_STATUS_NOT_SUPPORTED.
 *
 * Handles: one socket per physical GPU (devices sharing a PCI BDF, i.e. the partitions of one GPU),
 * one processor handle per device (a whole GPU, or a compute partition, as amd-smi lists them).
 */
#include "amd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint32_t amdsmi_status_t;
/* amdsmi.h amdsmi_status_t */
#define AMDSMI_STATUS_SUCCESS 0
#define AMDSMI_STATUS_INVAL 1
#define AMDSMI_STATUS_NOT_SUPPORTED 2
#define AMDSMI_STATUS_OUT_OF_RESOURCES 15
#define AMDSMI_STATUS_INSUFFICIENT_SIZE 41
#define AMDSMI_STATUS_INIT_ERROR 18
#define AMDSMI_STATUS_NOT_INIT 32
#define AMDSMI_STATUS_NOT_FOUND 31
#define AMDSMI_STATUS_ARG_PTR_NULL 53
#define AMDSMI_INIT_AMD_GPUS 2       /* amdsmi_init_flags_t */
#define AMDSMI_MEM_TYPE_VRAM 0       /* amdsmi_memory_type_t */

typedef void *amdsmi_socket_handle;
typedef void *amdsmi_processor_handle;

typedef struct __attribute__((packed)) {
    uint32_t drm_render, drm_card, hsa_id, hip_id;
    char hip_uuid[256];
} amdsmi_enumeration_info_t;

typedef struct __attribute__((packed)) {
    uint64_t kfd_id;
    uint32_t node_id;
    uint32_t current_partition_id;
    uint32_t reserved[12];
} amdsmi_kfd_info_t;

typedef struct __attribute__((packed)) {
    char driver_version[256], driver_date[256], driver_name[256];
} amdsmi_driver_info_t;

typedef struct __attribute__((packed)) {
    char name[256];
    uint32_t pid;
    uint8_t pad0[4];
    uint64_t mem;
    struct __attribute__((packed)) { uint64_t gfx, enc; uint32_t reserved[12]; } engine_usage;
    struct __attribute__((packed)) { uint64_t gtt_mem, cpu_mem, vram_mem; uint32_t reserved[10]; } memory_usage;
    char container_name[256];
    uint32_t cu_occupancy;
    uint32_t reserved[11];
} amdsmi_proc_info_t;

typedef struct __attribute__((packed)) {
    uint64_t correctable_count, uncorrectable_count, deferred_count, reserved[5];
} amdsmi_error_count_t;

/* The wrapper's ctypes layouts (amdsmi_wrapper.py, _pack_ = 1): a drift fails the build, not a test. */
_Static_assert(sizeof(amdsmi_proc_info_t) == 704, "amdsmi_proc_info_t");
_Static_assert(sizeof(amdsmi_enumeration_info_t) == 272, "amdsmi_enumeration_info_t");
_Static_assert(sizeof(amdsmi_kfd_info_t) == 64, "amdsmi_kfd_info_t");
_Static_assert(sizeof(amdsmi_driver_info_t) == 768, "amdsmi_driver_info_t");
_Static_assert(sizeof(amdsmi_error_count_t) == 64, "amdsmi_error_count_t");

static int initialised;

#define SOCKET_BASE 0x5000
#define DEVICE_BASE 0x7000

/* The device a handle names and the configured error of the call, or -1 with *status set. */
static int dev_of(amdsmi_processor_handle h, const char *call, amdsmi_status_t *status) {
    if (!initialised) { *status = AMDSMI_STATUS_NOT_INIT; return -1; }
    long d = (long)(uintptr_t)h - DEVICE_BASE;
    if (d < 0 || d >= as_cfg.ndevs) { *status = AMDSMI_STATUS_INVAL; return -1; }
    as_dev *v = &as_cfg.devs[d];
    if (v->error && (!v->error_call[0] || strcmp(v->error_call, call) == 0)) { *status = (amdsmi_status_t)v->error; return -1; }
    *status = AMDSMI_STATUS_SUCCESS;
    return (int)d;
}

/* amdsmi.h: amdsmi_status_t amdsmi_init(uint64_t init_flags); AMDSMI_INIT_AMD_GPUS initialises GPUs only. */
amdsmi_status_t amdsmi_init(uint64_t flags) {
    as_reset();  /* a test process re-initialises with another node's config */
    if (as_load() != 0) return AMDSMI_STATUS_INIT_ERROR;  /* no driver: "amdgpu driver not loaded" */
    if (!(flags & AMDSMI_INIT_AMD_GPUS)) return AMDSMI_STATUS_NOT_SUPPORTED;
    initialised = 1;
    return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_shut_down(void) {
    initialised = 0;
    return AMDSMI_STATUS_SUCCESS;
}

/* Sockets: distinct BDFs in device order. */
static int sockets(uint64_t *bdfs) {
    int n = 0;
    for (int d = 0; d < as_cfg.ndevs; d++) {
        int seen = 0;
        for (int s = 0; s < n; s++) if (bdfs[s] == as_cfg.devs[d].bdf) seen = 1;
        if (!seen) bdfs[n++] = as_cfg.devs[d].bdf;
    }
    return n;
}

/* amdsmi.h amdsmi_get_socket_handles(uint32_t *socket_count, amdsmi_socket_handle *socket_handles):
 * with socket_handles NULL, *socket_count returns the number of sockets; else up to *socket_count
 * handles are written and *socket_count is set to the number written. */
amdsmi_status_t amdsmi_get_socket_handles(uint32_t *count, amdsmi_socket_handle *handles) {
    if (!initialised) return AMDSMI_STATUS_NOT_INIT;
    if (!count) return AMDSMI_STATUS_ARG_PTR_NULL;
    uint64_t bdfs[AS_MAX_DEVS];
    uint32_t n = (uint32_t)sockets(bdfs);
    if (handles) {
        if (*count < n) n = *count;
        for (uint32_t s = 0; s < n; s++) handles[s] = (void *)(uintptr_t)(SOCKET_BASE + s);
    }
    *count = n;
    return AMDSMI_STATUS_SUCCESS;
}

/* amdsmi.h amdsmi_get_processor_handles(amdsmi_socket_handle, uint32_t *processor_count,
 * amdsmi_processor_handle *processor_handles): the same count-then-fill protocol per socket. */
amdsmi_status_t amdsmi_get_processor_handles(amdsmi_socket_handle socket, uint32_t *count,
                                             amdsmi_processor_handle *handles) {
    if (!initialised) return AMDSMI_STATUS_NOT_INIT;
    if (!count) return AMDSMI_STATUS_ARG_PTR_NULL;
    uint64_t bdfs[AS_MAX_DEVS];
    int ns = sockets(bdfs);
    long s = (long)(uintptr_t)socket - SOCKET_BASE;
    if (s < 0 || s >= ns) return AMDSMI_STATUS_INVAL;
    uint32_t n = 0;
    for (int d = 0; d < as_cfg.ndevs; d++) {
        if (as_cfg.devs[d].bdf != bdfs[s]) continue;
        if (handles && n < *count) handles[n] = (void *)(uintptr_t)(DEVICE_BASE + d);
        n++;
    }
    if (handles && n > *count) n = *count;
    *count = n;
    return AMDSMI_STATUS_SUCCESS;
}

/* amdsmi.h amdsmi_get_gpu_device_uuid(handle, unsigned int *uuid_length, char *uuid):
 * AMDSMI_STATUS_INSUFFICIENT_SIZE if the buffer is too short for the string. */
amdsmi_status_t amdsmi_get_gpu_device_uuid(amdsmi_processor_handle h, uint32_t *len, char *uuid) {
    amdsmi_status_t st;
    int d = dev_of(h, "amdsmi_get_gpu_device_uuid", &st);
    if (d < 0) return st;
    if (!len || !uuid) return AMDSMI_STATUS_ARG_PTR_NULL;
    size_t need = strlen(as_cfg.devs[d].uuid) + 1;
    if (*len < need) return AMDSMI_STATUS_INSUFFICIENT_SIZE;
    memcpy(uuid, as_cfg.devs[d].uuid, need);
    *len = (uint32_t)need;
    return AMDSMI_STATUS_SUCCESS;
}

/* amdsmi.h amdsmi_get_gpu_enumeration_info (ROCm 6.4+): DRM card and render minor, HSA and HIP
 * ids and the HIP UUID of the processor. */
amdsmi_status_t amdsmi_get_gpu_enumeration_info(amdsmi_processor_handle h, amdsmi_enumeration_info_t *info) {
    amdsmi_status_t st;
    int d = dev_of(h, "amdsmi_get_gpu_enumeration_info", &st);
    if (d < 0) return st;
    if (!info) return AMDSMI_STATUS_ARG_PTR_NULL;
    as_dev *v = &as_cfg.devs[d];
    memset(info, 0, sizeof *info);
    info->drm_render = v->render;
    info->drm_card = v->card;
    info->hsa_id = v->hsa_id;
    info->hip_id = v->hip_id;
    snprintf(info->hip_uuid, sizeof info->hip_uuid, "%s", v->hip_uuid);
    return AMDSMI_STATUS_SUCCESS;
}

/* amdsmi.h amdsmi_get_gpu_kfd_info: KFD id, KFD node id, current_partition_id (the XCP index). */
amdsmi_status_t amdsmi_get_gpu_kfd_info(amdsmi_processor_handle h, amdsmi_kfd_info_t *info) {
    amdsmi_status_t st;
    int d = dev_of(h, "amdsmi_get_gpu_kfd_info", &st);
    if (d < 0) return st;
    if (!info) return AMDSMI_STATUS_ARG_PTR_NULL;
    memset(info, 0, sizeof *info);
    info->kfd_id = 0x1000ULL + (uint64_t)d;
    info->node_id = as_cfg.devs[d].kfd_node;
    info->current_partition_id = as_cfg.devs[d].partition_id;
    return AMDSMI_STATUS_SUCCESS;
}

/* amdsmi.h amdsmi_get_gpu_device_bdf(handle, amdsmi_bdf_t *bdf). */
amdsmi_status_t amdsmi_get_gpu_device_bdf(amdsmi_processor_handle h, uint64_t *bdf) {
    amdsmi_status_t st;
    int d = dev_of(h, "amdsmi_get_gpu_device_bdf", &st);
    if (d < 0) return st;
    if (!bdf) return AMDSMI_STATUS_ARG_PTR_NULL;
    *bdf = as_cfg.devs[d].bdf;
    return AMDSMI_STATUS_SUCCESS;
}

static amdsmi_status_t copy_str(char *dst, uint32_t len, const char *src) {
    if (!dst) return AMDSMI_STATUS_ARG_PTR_NULL;
    if (len < strlen(src) + 1) return AMDSMI_STATUS_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return AMDSMI_STATUS_SUCCESS;
}

/* amdsmi.h amdsmi_get_gpu_compute_partition(handle, char *compute_partition, uint32_t len):
 * "SPX", "DPX", "TPX", "QPX", "CPX"; AMDSMI_STATUS_NOT_SUPPORTED on GPUs without partitions. */
amdsmi_status_t amdsmi_get_gpu_compute_partition(amdsmi_processor_handle h, char *out, uint32_t len) {
    amdsmi_status_t st;
    int d = dev_of(h, "amdsmi_get_gpu_compute_partition", &st);
    if (d < 0) return st;
    if (strcmp(as_cfg.devs[d].compute_partition, "none") == 0) return AMDSMI_STATUS_NOT_SUPPORTED;
    return copy_str(out, len, as_cfg.devs[d].compute_partition);
}

/* amdsmi.h amdsmi_get_gpu_memory_partition: "NPS1", "NPS2", "NPS4", "NPS8". */
amdsmi_status_t amdsmi_get_gpu_memory_partition(amdsmi_processor_handle h, char *out, uint32_t len) {
    amdsmi_status_t st;
    int d = dev_of(h, "amdsmi_get_gpu_memory_partition", &st);
    if (d < 0) return st;
    if (strcmp(as_cfg.devs[d].memory_partition, "none") == 0) return AMDSMI_STATUS_NOT_SUPPORTED;
    return copy_str(out, len, as_cfg.devs[d].memory_partition);
}

/* amdsmi.h amdsmi_get_gpu_memory_total(handle, amdsmi_memory_type_t, uint64_t *total): bytes. */
amdsmi_status_t amdsmi_get_gpu_memory_total(amdsmi_processor_handle h, uint32_t type, uint64_t *total) {
    amdsmi_status_t st;
    int d = dev_of(h, "amdsmi_get_gpu_memory_total", &st);
    if (d < 0) return st;
    if (!total) return AMDSMI_STATUS_ARG_PTR_NULL;
    if (type != AMDSMI_MEM_TYPE_VRAM) return AMDSMI_STATUS_NOT_SUPPORTED;
    *total = as_cfg.devs[d].total;
    return AMDSMI_STATUS_SUCCESS;
}

/* amdsmi.h amdsmi_get_gpu_memory_usage(handle, amdsmi_memory_type_t, uint64_t *used): bytes in use. */
amdsmi_status_t amdsmi_get_gpu_memory_usage(amdsmi_processor_handle h, uint32_t type, uint64_t *used) {
    amdsmi_status_t st;
    int d = dev_of(h, "amdsmi_get_gpu_memory_usage", &st);
    if (d < 0) return st;
    if (!used) return AMDSMI_STATUS_ARG_PTR_NULL;
    if (type != AMDSMI_MEM_TYPE_VRAM) return AMDSMI_STATUS_NOT_SUPPORTED;
    int fd = as_lock(d);
    if (fd < 0) return AMDSMI_STATUS_INVAL;
    as_entry tab[AS_TAB];
    as_read(fd, d, tab);
    as_unlock(fd);
    *used = as_used(tab);
    return AMDSMI_STATUS_SUCCESS;
}

/* amdsmi.h amdsmi_get_gpu_process_list(handle, uint32_t *max_processes, amdsmi_proc_info_t *list):
 * max_processes "will permanently be changed to reflect the actual number of processes running";
 * AMDSMI_STATUS_OUT_OF_RESOURCES: "filled list buffer with data, but number of actual running processes
 * is larger than the size provided". As amd_smi.cc does: *max_processes 0 (or no process) asks for the
 * count (SUCCESS); a NULL list otherwise is AMDSMI_STATUS_INVAL. A process is listed on the processor
 * (partition) it has a context on: here, the live owners of its table entries. */
amdsmi_status_t amdsmi_get_gpu_process_list(amdsmi_processor_handle h, uint32_t *max, amdsmi_proc_info_t *list) {
    amdsmi_status_t st;
    int d = dev_of(h, "amdsmi_get_gpu_process_list", &st);
    if (d < 0) return st;
    if (!max) return AMDSMI_STATUS_ARG_PTR_NULL;
    int pids[AS_TAB + 64];
    uint64_t mem[AS_TAB + 64];
    int n = 0;
    int fd = as_lock(d);
    if (fd < 0) return AMDSMI_STATUS_INVAL;
    as_entry tab[AS_TAB];
    as_read(fd, d, tab);
    as_unlock(fd);
    for (int i = 0; i < AS_TAB; i++) {
        if (!tab[i].kind) continue;
        int j = 0;
        while (j < n && pids[j] != tab[i].pid) j++;
        if (j == n) { pids[n] = tab[i].pid; mem[n] = 0; n++; }
        mem[j] += tab[i].size;
    }
    char extra[256];
    snprintf(extra, sizeof extra, "%s", as_cfg.devs[d].extra_pids);
    for (char *tok = strtok(extra, ","); tok && n < AS_TAB + 64; tok = strtok(NULL, ",")) {
        int pid = atoi(tok);
        if (pid > 0 && as_alive(pid)) { pids[n] = pid; mem[n] = 0; n++; }
    }
    uint32_t cap = *max;
    if (cap == 0 || n == 0) { *max = (uint32_t)n; return AMDSMI_STATUS_SUCCESS; }
    if (!list) return AMDSMI_STATUS_INVAL;
    uint32_t fill = (uint32_t)n < cap ? (uint32_t)n : cap;
    for (uint32_t i = 0; i < fill; i++) {
        memset(&list[i], 0, sizeof list[i]);
        snprintf(list[i].name, sizeof list[i].name, "pid%d", pids[i]);
        list[i].pid = (uint32_t)pids[i];
        list[i].mem = mem[i];
        list[i].memory_usage.vram_mem = mem[i];
    }
    *max = (uint32_t)n;
    return (uint32_t)n > cap ? AMDSMI_STATUS_OUT_OF_RESOURCES : AMDSMI_STATUS_SUCCESS;
}

/* amdsmi.h amdsmi_get_gpu_driver_info: driver name ("amdgpu"), version and date strings. */
amdsmi_status_t amdsmi_get_gpu_driver_info(amdsmi_processor_handle h, amdsmi_driver_info_t *info) {
    amdsmi_status_t st;
    int d = dev_of(h, "amdsmi_get_gpu_driver_info", &st);
    if (d < 0) return st;
    if (!info) return AMDSMI_STATUS_ARG_PTR_NULL;
    memset(info, 0, sizeof *info);
    snprintf(info->driver_name, sizeof info->driver_name, "amdgpu");
    snprintf(info->driver_version, sizeof info->driver_version, "%s", as_cfg.driver_version);
    snprintf(info->driver_date, sizeof info->driver_date, "2015/01/01 00:00");
    return AMDSMI_STATUS_SUCCESS;
}

/* amdsmi.h amdsmi_get_gpu_ecc_enabled(handle, uint64_t *enabled_blocks): a bitmask of
 * amdsmi_gpu_block_t with ECC (RAS) enabled; 0: none. */
amdsmi_status_t amdsmi_get_gpu_ecc_enabled(amdsmi_processor_handle h, uint64_t *blocks) {
    amdsmi_status_t st;
    int d = dev_of(h, "amdsmi_get_gpu_ecc_enabled", &st);
    if (d < 0) return st;
    if (!blocks) return AMDSMI_STATUS_ARG_PTR_NULL;
    *blocks = as_cfg.devs[d].ecc_enabled;
    return AMDSMI_STATUS_SUCCESS;
}

/* amdsmi.h amdsmi_get_gpu_total_ecc_count(handle, amdsmi_error_count_t *ec): summed over blocks. */
amdsmi_status_t amdsmi_get_gpu_total_ecc_count(amdsmi_processor_handle h, amdsmi_error_count_t *ec) {
    amdsmi_status_t st;
    int d = dev_of(h, "amdsmi_get_gpu_total_ecc_count", &st);
    if (d < 0) return st;
    if (!ec) return AMDSMI_STATUS_ARG_PTR_NULL;
    memset(ec, 0, sizeof *ec);
    ec->uncorrectable_count = as_cfg.devs[d].ecc_uncorrectable;
    return AMDSMI_STATUS_SUCCESS;
}
