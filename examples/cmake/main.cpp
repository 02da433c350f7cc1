// Calls the launchers add_tileir_kernel() generated and checks the results
// against the CPU. Without a GPU it says so and exits 0: the point there is
// that the kernels compiled, packaged and linked.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda_driver.h"
#include "vector_kernels.h"

namespace {

constexpr uint32_t kTile = 256;       // elements per block, fixed when the kernels were exported
constexpr int32_t kCount = 100003;    // not a multiple of kTile: the last block is partial
constexpr float kAlpha = 2.5f;

float* as_ptr(CudaDriver::DevicePtr p) { return reinterpret_cast<float*>(static_cast<uintptr_t>(p)); }

#define CHECK(call)                                                          \
  do {                                                                       \
    int rc_ = (call);                                                        \
    if (rc_ != 0) {                                                          \
      std::fprintf(stderr, "%s failed with %d\n", #call, rc_);              \
      return 1;                                                              \
    }                                                                        \
  } while (0)

}  // namespace

int main() {
  // A launch over empty arrays touches no memory: it tells whether a GPU is there.
  int probe = vadd_launch(nullptr, 1, 1, 1, nullptr, 0, 1, nullptr, 0, 1, nullptr, 0, 1);
  if (probe == TILEIR_ERROR_NO_DRIVER || probe == TILEIR_ERROR_NO_DEVICE) {
    std::printf("vector_ops: built with kernels vadd and vscale; no GPU present (%s), nothing to run\n",
                probe == TILEIR_ERROR_NO_DRIVER ? "no CUDA driver" : "no CUDA device");
    return 0;
  }
  CHECK(probe);

  CudaDriver cuda;
  if (!cuda.load()) {
    std::fprintf(stderr, "vector_ops: the launcher found a GPU but the CUDA driver API is incomplete\n");
    return 1;
  }
  const std::size_t bytes = sizeof(float) * kCount;
  std::vector<float> a(kCount), b(kCount), c(kCount), y(kCount);
  for (int32_t i = 0; i < kCount; ++i) {
    a[i] = 0.5f * static_cast<float>(i);
    b[i] = 1000.0f - static_cast<float>(i % 977);
  }
  CudaDriver::DevicePtr da = 0, db = 0, dc = 0, dy = 0;
  CHECK(cuda.alloc(&da, bytes));
  CHECK(cuda.alloc(&db, bytes));
  CHECK(cuda.alloc(&dc, bytes));
  CHECK(cuda.alloc(&dy, bytes));
  CHECK(cuda.to_device(da, a.data(), bytes));
  CHECK(cuda.to_device(db, b.data(), bytes));

  const uint32_t blocks = (kCount + kTile - 1) / kTile;
  CHECK(vadd_launch(nullptr, blocks, 1, 1, as_ptr(da), kCount, 1, as_ptr(db), kCount, 1, as_ptr(dc), kCount, 1));
  CHECK(vscale_launch(nullptr, blocks, 1, 1, as_ptr(da), kCount, 1, as_ptr(dy), kCount, 1, kAlpha));
  CHECK(cuda.synchronize());
  CHECK(cuda.to_host(c.data(), dc, bytes));
  CHECK(cuda.to_host(y.data(), dy, bytes));

  int wrong = 0;
  for (int32_t i = 0; i < kCount; ++i) {
    if (c[i] != a[i] + b[i] || y[i] != kAlpha * a[i]) {
      if (++wrong <= 5)
        std::fprintf(stderr, "mismatch at %d: vadd %g (want %g), vscale %g (want %g)\n", i, c[i], a[i] + b[i],
                     y[i], kAlpha * a[i]);
    }
  }
  cuda.free(da);
  cuda.free(db);
  cuda.free(dc);
  cuda.free(dy);
  if (wrong) {
    std::fprintf(stderr, "vector_ops: %d of %d results wrong\n", wrong, kCount);
    return 1;
  }
  std::printf("vector_ops: vadd and vscale match the CPU on %d elements\n", kCount);
  return 0;
}
