/* The library's C interface for ctypes: stable names and plain integer
 * arguments around the generated launchers, and their error codes. */
#include <stdint.h>

#include "vecops_kernels.h"

#if defined(_WIN32)
#define VECOPS_API __declspec(dllexport)
#else
#define VECOPS_API __attribute__((visibility("default")))
#endif

VECOPS_API int vecops_error_no_driver(void) { return TILEIR_ERROR_NO_DRIVER; }
VECOPS_API int vecops_error_no_device(void) { return TILEIR_ERROR_NO_DEVICE; }

/* c = a + b over n floats; a, b, c are device addresses. */
VECOPS_API int vecops_vadd(uint32_t blocks, uint64_t a, uint64_t b, uint64_t c, int32_t n) {
  return vadd_launch(0, blocks, 1, 1, (float*)(uintptr_t)a, n, 1, (float*)(uintptr_t)b, n, 1,
                     (float*)(uintptr_t)c, n, 1);
}

/* y = alpha * x over n floats; x, y are device addresses. */
VECOPS_API int vecops_vscale(uint32_t blocks, uint64_t x, uint64_t y, int32_t n, float alpha) {
  return vscale_launch(0, blocks, 1, 1, (float*)(uintptr_t)x, n, 1, (float*)(uintptr_t)y, n, 1, alpha);
}
