/* The Bazel example: two TileIR kernels linked into a C program like any cc_library.
 *
 *   c = a + b      (vadd)
 *   y = 2 * c      (vscale)
 *
 * Without a CUDA driver or GPU it reports that it was built, shows the launcher's
 * answer, and exits 0. With a GPU it runs both kernels and checks every element.
 * It needs no CUDA headers or libraries at build time: like the launchers, it
 * loads the driver at run time.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels.h"

enum { N = 4096, TILE = 256 }; /* TILE matches the kernels' tile size */

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;

/* Just the driver entry points this example needs, found with dlsym. */
struct driver {
    CUresult (*init)(unsigned);
    CUresult (*device_get_count)(int *);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*memcpy_htod)(CUdeviceptr, const void *, size_t);
    CUresult (*memcpy_dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*ctx_synchronize)(void);
    CUresult (*mem_free)(CUdeviceptr);
};

static int load_driver(struct driver *d) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    struct { void **slot; const char *name; } table[] = {
        {(void **)&d->init, "cuInit"},
        {(void **)&d->device_get_count, "cuDeviceGetCount"},
        {(void **)&d->device_get, "cuDeviceGet"},
        {(void **)&d->primary_ctx_retain, "cuDevicePrimaryCtxRetain"},
        {(void **)&d->ctx_set_current, "cuCtxSetCurrent"},
        {(void **)&d->mem_alloc, "cuMemAlloc_v2"},
        {(void **)&d->memcpy_htod, "cuMemcpyHtoD_v2"},
        {(void **)&d->memcpy_dtoh, "cuMemcpyDtoH_v2"},
        {(void **)&d->ctx_synchronize, "cuCtxSynchronize"},
        {(void **)&d->mem_free, "cuMemFree_v2"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i)
        if (!(*table[i].slot = dlsym(lib, table[i].name))) return 0;
    int count = 0;
    return d->init(0) == 0 && d->device_get_count(&count) == 0 && count > 0;
}

/* No GPU: the launchers must say so (they never touch the NULL arguments then). */
static int report_no_gpu(void) {
    int rc_add = vadd_launch(NULL, 1, 1, 1, NULL, 0, 1, NULL, 0, 1, NULL, 0, 1);
    int rc_scale = vscale_launch(NULL, 1, 1, 1, NULL, 0, 1, NULL, 0, 1, 2.0f);
    int expected = (rc_add == TILEIR_ERROR_NO_DRIVER || rc_add == TILEIR_ERROR_NO_DEVICE) && rc_scale == rc_add;
    printf("vector_demo: built with kernels vadd and vscale; no GPU present (%s), nothing to run\n",
           rc_add == TILEIR_ERROR_NO_DRIVER ? "no CUDA driver" : "no CUDA device");
    if (!expected) {
        fprintf(stderr, "vector_demo: expected both launchers to report no driver/device, got %d and %d\n",
                rc_add, rc_scale);
        return 1;
    }
    return 0;
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        int rc_ = (call);                                                             \
        if (rc_ != 0) {                                                               \
            fprintf(stderr, "vector_demo: %s failed with %d\n", #call, rc_);          \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

static float *dev(CUdeviceptr p) { return (float *)(uintptr_t)p; }

static int run_on_gpu(struct driver *d) {
    static float a[N], b[N], y[N];
    for (int i = 0; i < N; ++i) {
        a[i] = (float)i;
        b[i] = (float)(3 * i + 1);
    }
    CUdevice device;
    CUcontext context;
    CUdeviceptr da, db, dc, dy;
    const size_t bytes = sizeof(float) * N;
    CHECK(d->device_get(&device, 0));
    CHECK(d->primary_ctx_retain(&context, device));
    CHECK(d->ctx_set_current(context));
    CHECK(d->mem_alloc(&da, bytes));
    CHECK(d->mem_alloc(&db, bytes));
    CHECK(d->mem_alloc(&dc, bytes));
    CHECK(d->mem_alloc(&dy, bytes));
    CHECK(d->memcpy_htod(da, a, bytes));
    CHECK(d->memcpy_htod(db, b, bytes));
    CHECK(vadd_launch(NULL, N / TILE, 1, 1, dev(da), N, 1, dev(db), N, 1, dev(dc), N, 1));
    CHECK(vscale_launch(NULL, N / TILE, 1, 1, dev(dc), N, 1, dev(dy), N, 1, 2.0f));
    CHECK(d->ctx_synchronize());
    CHECK(d->memcpy_dtoh(y, dy, bytes));
    int bad = 0;
    for (int i = 0; i < N; ++i)
        if (y[i] != 2.0f * (a[i] + b[i])) ++bad; /* exact: small integers in f32 */
    d->mem_free(da);
    d->mem_free(db);
    d->mem_free(dc);
    d->mem_free(dy);
    if (bad) {
        fprintf(stderr, "vector_demo: %d of %d elements wrong\n", bad, N);
        return 1;
    }
    printf("vector_demo: vadd and vscale ran on the GPU; all %d elements correct\n", N);
    return 0;
}

int main(void) {
    struct driver d;
    return load_driver(&d) ? run_on_gpu(&d) : report_no_gpu();
}
