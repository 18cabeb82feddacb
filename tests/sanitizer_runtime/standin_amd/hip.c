/* Stand-in libamdhip64.so: the HIP runtime calls the sanitizer's HIP worker makes through
 * hip-python (which dlopens "libamdhip64.so" and dlsyms each function at its first call),
 * answering as ROCm/HIP include/hip/hip_runtime_api.h documents them (ROCm 7.0).
 *
 * Device visibility follows ROCr and HIP: ROCR_VISIBLE_DEVICES (indices or agent UUIDs
 * "GPU-<hex>") narrows the agents, then HIP_VISIBLE_DEVICES (indices) narrows those. A device
 * pointer is this process's mapping of the device's VRAM file plus the allocation's offset.
 */
#define _GNU_SOURCE
#include "amd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int hipError_t;
/* hip_runtime_api.h enum hipError_t */
#define hipSuccess 0
#define hipErrorInvalidValue 1
#define hipErrorOutOfMemory 2
#define hipErrorNotInitialized 3
#define hipErrorNoDevice 100
#define hipErrorInvalidDevice 101
/* hip_runtime_api.h enum hipMemcpyKind */
#define hipMemcpyHostToHost 0
#define hipMemcpyHostToDevice 1
#define hipMemcpyDeviceToHost 2
#define hipMemcpyDeviceToDevice 3
#define hipMemcpyDefault 4

typedef struct { char bytes[16]; } hipUUID;  /* hip_runtime_api.h hipUUID_t */

static int visible[AS_MAX_DEVS];
static int nvisible = -1;
static int current = -1;    /* index into visible */
static int have_context = -1;

static int match_rocr(int d, const char *tok) {
    if (strncmp(tok, "GPU-", 4) == 0) return strcmp(tok, as_cfg.devs[d].hip_uuid) == 0;
    char *end;
    long i = strtol(tok, &end, 10);
    return *end == 0 && i == d;
}

static void enumerate(void) {
    if (nvisible >= 0) return;
    nvisible = 0;
    if (as_load() != 0) return;
    int rocr[AS_MAX_DEVS], nrocr = 0;
    const char *env = getenv("ROCR_VISIBLE_DEVICES");
    for (int d = 0; d < as_cfg.ndevs; d++) {
        if (!env) { rocr[nrocr++] = d; continue; }
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", env);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
            if (match_rocr(d, tok)) { rocr[nrocr++] = d; break; }
    }
    env = getenv("HIP_VISIBLE_DEVICES");
    if (!env) {
        memcpy(visible, rocr, sizeof(int) * (size_t)nrocr);
        nvisible = nrocr;
        return;
    }
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", env);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int i = atoi(tok);
        if (i < 0 || i >= nrocr) break;  /* HIP stops at the first invalid index */
        visible[nvisible++] = rocr[i];
    }
}

/* The current device's config index, creating this process's context on it (counted in the
 * table with its overhead, so amd-smi lists this PID on the device). */
static int dev(void) {
    enumerate();
    if (nvisible <= 0) return -1;
    if (current < 0) current = 0;
    int d = visible[current];
    if (have_context != d) {
        int fd = as_lock(d);
        if (fd < 0) return -1;
        as_entry tab[AS_TAB];
        as_read(fd, d, tab);
        uint64_t off = as_place(d, tab, as_cfg.devs[d].context_overhead);
        if (off == UINT64_MAX) { as_unlock(fd); return -1; }
        as_add(tab, getpid(), 1, off, as_cfg.devs[d].context_overhead);
        as_write(fd, tab);
        as_unlock(fd);
        have_context = d;
    }
    return as_map(d) ? d : -1;
}

/* hipInit(unsigned int flags): "flags: Initialization flag, should be zero"; hipErrorNoDevice if none. */
hipError_t hipInit(unsigned int flags) {
    if (flags != 0) return hipErrorInvalidValue;
    enumerate();
    return nvisible > 0 ? hipSuccess : hipErrorNoDevice;
}

hipError_t hipDriverGetVersion(int *version) {
    if (!version) return hipErrorInvalidValue;
    if (as_load() != 0) return hipErrorNotInitialized;
    *version = as_cfg.hip_runtime_version;
    return hipSuccess;
}

hipError_t hipRuntimeGetVersion(int *version) { return hipDriverGetVersion(version); }

/* hipGetDeviceCount(int *count): hipErrorNoDevice when no device is visible. */
hipError_t hipGetDeviceCount(int *count) {
    if (!count) return hipErrorInvalidValue;
    enumerate();
    *count = nvisible;
    return nvisible > 0 ? hipSuccess : hipErrorNoDevice;
}

/* hipSetDevice(int deviceId): "Valid device id's are 0... (hipGetDeviceCount()-1)". */
hipError_t hipSetDevice(int id) {
    enumerate();
    if (id < 0 || id >= nvisible) return hipErrorInvalidDevice;
    current = id;
    return dev() < 0 ? hipErrorInvalidDevice : hipSuccess;
}

/* hipDeviceGetUuid(hipUUID *uuid, hipDevice_t device): 16 bytes; ROCm fills them with the
 * agent UUID's characters after "GPU-" (the form ROCR_VISIBLE_DEVICES accepts). */
hipError_t hipDeviceGetUuid(hipUUID *uuid, int device) {
    enumerate();
    if (!uuid) return hipErrorInvalidValue;
    if (device < 0 || device >= nvisible) return hipErrorInvalidDevice;
    const char *u = as_cfg.devs[visible[device]].hip_uuid;
    memset(uuid->bytes, 0, sizeof uuid->bytes);
    if (strncmp(u, "GPU-", 4) == 0) memcpy(uuid->bytes, u + 4, strnlen(u + 4, 16));
    return hipSuccess;
}

/* hipMemGetInfo(size_t *free, size_t *total) of the current device. */
hipError_t hipMemGetInfo(size_t *free_b, size_t *total) {
    if (!free_b || !total) return hipErrorInvalidValue;
    int d = dev();
    if (d < 0) return hipErrorNoDevice;
    int fd = as_lock(d);
    if (fd < 0) return hipErrorNotInitialized;
    as_entry tab[AS_TAB];
    as_read(fd, d, tab);
    as_unlock(fd);
    *total = as_cfg.devs[d].total;
    *free_b = as_cfg.devs[d].total - as_used(tab);
    return hipSuccess;
}

/* hipMalloc(void **ptr, size_t size): hipErrorOutOfMemory when it does not fit; size 0: *ptr NULL. */
hipError_t hipMalloc(void **ptr, size_t size) {
    if (!ptr) return hipErrorInvalidValue;
    if (size == 0) { *ptr = NULL; return hipSuccess; }
    int d = dev();
    if (d < 0) return hipErrorNoDevice;
    int fd = as_lock(d);
    if (fd < 0) return hipErrorNotInitialized;
    as_entry tab[AS_TAB];
    as_read(fd, d, tab);
    uint64_t off = as_place(d, tab, size);
    if (off == UINT64_MAX || as_add(tab, getpid(), 2, off, size) < 0) { as_unlock(fd); return hipErrorOutOfMemory; }
    as_write(fd, tab);
    as_unlock(fd);
    *ptr = as_map(d) + off;
    return hipSuccess;
}

/* hipFree(void *ptr): NULL is hipSuccess; a pointer hipMalloc did not return is hipErrorInvalidValue. */
hipError_t hipFree(void *ptr) {
    if (!ptr) return hipSuccess;
    int d = dev();
    if (d < 0) return hipErrorInvalidValue;
    uint64_t off = (uint64_t)((unsigned char *)ptr - as_map(d));
    int fd = as_lock(d);
    if (fd < 0) return hipErrorNotInitialized;
    as_entry tab[AS_TAB];
    as_read(fd, d, tab);
    for (int i = 0; i < AS_TAB; i++) {
        if (tab[i].kind == 2 && tab[i].pid == getpid() && tab[i].off == off) {
            memset(&tab[i], 0, sizeof tab[i]);
            as_write(fd, tab);
            as_unlock(fd);
            return hipSuccess;
        }
    }
    as_unlock(fd);
    return hipErrorInvalidValue;
}

static int in_device(int d, const void *p, size_t n) {
    const unsigned char *base = as_map(d);
    return base && (const unsigned char *)p >= base && (const unsigned char *)p + n <= base + as_cfg.devs[d].total;
}

/* hipMemset(void *dst, int value, size_t sizeBytes): fills sizeBytes bytes with (unsigned char)value.
 * memset_skip_tail models a broken fill (the verify must catch it). */
hipError_t hipMemset(void *dst, int value, size_t size) {
    int d = dev();
    if (d < 0) return hipErrorNoDevice;
    if (!in_device(d, dst, size)) return hipErrorInvalidValue;
    size_t skip = (size_t)as_cfg.memset_skip_tail < size ? (size_t)as_cfg.memset_skip_tail : 0;
    memset(dst, value, size - skip);
    return hipSuccess;
}

/* hipMemcpy(void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind). */
hipError_t hipMemcpy(void *dst, const void *src, size_t size, int kind) {
    int d = dev();
    if (d < 0) return hipErrorNoDevice;
    if ((kind == hipMemcpyDeviceToHost && !in_device(d, src, size)) ||
        (kind == hipMemcpyHostToDevice && !in_device(d, dst, size)))
        return hipErrorInvalidValue;
    if (kind < hipMemcpyHostToHost || kind > hipMemcpyDefault) return hipErrorInvalidValue;
    memmove(dst, src, size);
    return hipSuccess;
}

hipError_t hipDeviceSynchronize(void) { return dev() < 0 ? hipErrorNoDevice : hipSuccess; }

const char *hipGetErrorName(hipError_t e) {
    switch (e) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
    case hipErrorNotInitialized: return "hipErrorNotInitialized";
    case hipErrorNoDevice: return "hipErrorNoDevice";
    case hipErrorInvalidDevice: return "hipErrorInvalidDevice";
    default: return "hipErrorUnknown";
    }
}
