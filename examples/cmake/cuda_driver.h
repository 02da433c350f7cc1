// The few CUDA driver calls the example needs to move data, loaded at run
// time like the launchers load the driver: the program links without CUDA
// and runs (reporting that there is no GPU) on machines without one.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#endif

class CudaDriver {
 public:
  using DevicePtr = unsigned long long;  // CUdeviceptr

  // Loads the driver; call after a launcher succeeded, so a context is current.
  bool load() {
#if defined(_WIN32)
    HMODULE lib = LoadLibraryA("nvcuda.dll");
    auto sym = [lib](const char* name) { return reinterpret_cast<void*>(GetProcAddress(lib, name)); };
#else
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    auto sym = [lib](const char* name) { return dlsym(lib, name); };
#endif
    if (!lib) return false;
    mem_alloc_ = reinterpret_cast<MemAlloc>(sym("cuMemAlloc_v2"));
    mem_free_ = reinterpret_cast<MemFree>(sym("cuMemFree_v2"));
    htod_ = reinterpret_cast<CopyHtoD>(sym("cuMemcpyHtoD_v2"));
    dtoh_ = reinterpret_cast<CopyDtoH>(sym("cuMemcpyDtoH_v2"));
    sync_ = reinterpret_cast<Sync>(sym("cuCtxSynchronize"));
    return mem_alloc_ && mem_free_ && htod_ && dtoh_ && sync_;
  }

  int alloc(DevicePtr* ptr, std::size_t bytes) { return mem_alloc_(ptr, bytes); }
  int free(DevicePtr ptr) { return mem_free_(ptr); }
  int to_device(DevicePtr dst, const void* src, std::size_t bytes) { return htod_(dst, src, bytes); }
  int to_host(void* dst, DevicePtr src, std::size_t bytes) { return dtoh_(dst, src, bytes); }
  int synchronize() { return sync_(); }

 private:
  using MemAlloc = int (*)(DevicePtr*, std::size_t);
  using MemFree = int (*)(DevicePtr);
  using CopyHtoD = int (*)(DevicePtr, const void*, std::size_t);
  using CopyDtoH = int (*)(void*, DevicePtr, std::size_t);
  using Sync = int (*)();
  MemAlloc mem_alloc_ = nullptr;
  MemFree mem_free_ = nullptr;
  CopyHtoD htod_ = nullptr;
  CopyDtoH dtoh_ = nullptr;
  Sync sync_ = nullptr;
};
