"""A C program links the host object and its header with gcc and only -ldl, and runs.

Without a GPU the launchers must return the documented codes: TILEIR_ERROR_NO_DRIVER
when libcuda.so.1 is absent, TILEIR_ERROR_NO_DEVICE when the driver finds no GPU.
A fake libcuda.so.1 (built here, found through LD_LIBRARY_PATH) then records what
the launchers ask of the driver: module loading once per context under
concurrency, block size / shared memory / cluster per device, argument bytes.
With a real GPU (`-m gpu`) the vector add runs and is checked.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import shutil
import struct
import subprocess
import sys
from tileiras.ir.record import replace
from pathlib import Path

import pytest

from tileiras.codegen.metadata import ModuleMetadata
from tileiras.codegen.nvptx import llvm_to_ptx
from tileiras.codegen.ptxas import assemble

DATA = Path(__file__).parent / "data" / "llvm"
ROOT = Path(__file__).parent.parent

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or sys.platform != "linux",
                                reason="needs gcc on Linux")


def multi_kernel_ir() -> str:
    """vadd, axpb and allparams in one module (duplicate declarations dropped)."""
    seen: set[str] = set()
    lines = []
    for name in ("vadd", "scalars", "allparams"):
        for line in (DATA / f"{name}.ll").read_text().splitlines():
            if line.startswith(("declare ", "target triple")):
                if line in seen:
                    continue
                seen.add(line)
            lines.append(line)
    return "\n".join(lines) + "\n"


def metadata_for(gpu: str) -> ModuleMetadata:
    kernels = []
    for name in ("vadd", "scalars", "allparams"):
        kernels += list(ModuleMetadata.from_json((DATA / f"{name}.meta.json").read_text()).kernels)
    if gpu == "sm_90":  # a different launch shape per target: the launcher must pick by device
        kernels[1] = replace(kernels[1], block=(128, 1, 1), dynamic_smem=1024, cluster=(2, 1, 1))
    return ModuleMetadata(tuple(kernels), gpu)


def tileir(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", *args], cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kernels.o + kernels.h for sm_80 and sm_90 (+ sm_90 PTX), made with `tileir package` / `tileir header`."""
    work = tmp_path_factory.mktemp("package")
    ir = multi_kernel_ir()
    args = []
    for gpu in ("sm_80", "sm_90"):
        ptx = llvm_to_ptx(ir, gpu)
        (work / f"k.{gpu}.ptx").write_text(ptx)
        (work / f"k.{gpu}.cubin").write_bytes(assemble(ptx, gpu))
        (work / f"k.{gpu}.json").write_text(metadata_for(gpu).to_json())
        args += ["--metadata", f"k.{gpu}.json", "--cubin", f"{gpu}=k.{gpu}.cubin"]
    done = tileir("package", *args, "--ptx", "sm_90=k.sm_90.ptx", "-o", "kernels.o", "--fatbin-out",
                  "kernels.fatbin", cwd=work)
    assert done.returncode == 0, done.stderr
    done = tileir("header", "--metadata", "k.sm_80.json", "--metadata", "k.sm_90.json", "-o", "kernels.h", cwd=work)
    assert done.returncode == 0, done.stderr
    return work


PROGRAM = r"""
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "kernels.h"

static int simple(void) {
    int rc1 = vadd_launch((CUstream)0x1234, 3, 2, 1, (float*)0x10, (float*)0x20, (float*)0x30, 1000);
    int rc2 = axpb_launch(NULL, 5, 1, 1, (float*)0x40, 7, 1.5f, -5, 2.5f);
    int rc3 = allparams_launch(NULL, 1, 1, 1, (int64_t*)0x50, 1, -3, -300, -70000, -5000000000LL,
                               0x3c00, 0x3f80, 2.0f, -4.0);
    printf("rc %d %d %d\n", rc1, rc2, rc3);
    return 0;
}

static void *worker(void *arg) {
    int *failures = (int *)arg;
    for (int i = 0; i < 200; i++)
        if (vadd_launch(NULL, 1, 1, 1, 0, 0, 0, i) != 0) __sync_fetch_and_add(failures, 1);
    return NULL;
}

static int threads(void) {
    pthread_t t[8];
    int failures = 0;
    for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, worker, &failures);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    printf("failures %d\n", failures);
    return 0;
}

static int contexts(void) {
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    int (*set_current)(void *) = (int (*)(void *))dlsym(cuda, "cuCtxSetCurrent");
    int last = 0;
    for (int round = 0; round < 2; round++)
        for (long ctx = 1; ctx <= 65; ctx++) {
            set_current((void *)(0x100000 + ctx * 16));
            last = vadd_launch(NULL, 1, 1, 1, 0, 0, 0, 1);
            if (ctx <= 64 && last != 0) { printf("unexpected %d\n", last); return 1; }
        }
    printf("rc65 %d\n", last);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "threads")) return threads();
    if (argc > 1 && !strcmp(argv[1], "contexts")) return contexts();
    return simple();
}
"""

FAKE_DRIVER = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef struct { unsigned gx, gy, gz, bx, by, bz, smem; void *stream; void *attrs; unsigned nattrs; } LaunchConfig;
typedef struct { unsigned id, pad, x, y, z; } LaunchAttribute;

static __thread void *current;
static int loads, launches;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static const char *mode(void) { const char *m = getenv("FAKE_CUDA_MODE"); return m ? m : "ok"; }
static int quiet(void) { return getenv("FAKE_CUDA_QUIET") != NULL; }

CUresult cuInit(unsigned flags) { return strcmp(mode(), "nodevice") ? (flags ? 1 : 0) : 100; }
CUresult cuCtxGetCurrent(void **ctx) { *ctx = current; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { current = ctx; return 0; }
CUresult cuDeviceGet(int *dev, int ordinal) { *dev = ordinal; return 0; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { *ctx = (void *)(uintptr_t)(0x1000 + dev); return 0; }
CUresult cuCtxGetDevice(int *dev) { *dev = 0; return 0; }
CUresult cuCtxGetId(void *ctx, unsigned long long *id) { *id = (uintptr_t)ctx; return 0; }
CUresult cuDeviceGetAttribute(int *value, int attr, int dev) {
    const char *cc = getenv("FAKE_CUDA_CC");
    int c = cc ? atoi(cc) : 90;
    if (attr != 75 && attr != 76) return 1;
    *value = attr == 75 ? c / 10 : c % 10;
    return 0;
}
CUresult cuModuleLoadData(void **module, const void *image) {
    if (((const uint32_t *)image)[0] != 0xBA55ED50u) return 200;
    if (!strcmp(mode(), "badimage")) return 200;
    pthread_mutex_lock(&lock); loads++; pthread_mutex_unlock(&lock);
    *module = (void *)image;
    if (!quiet()) printf("load ctx=%p\n", current);
    return 0;
}
CUresult cuModuleGetFunction(void **fn, void *module, const char *name) { *fn = strdup(name); return 0; }
CUresult cuFuncSetAttribute(void *fn, int attr, int value) {
    if (!quiet()) printf("attr %s %d %d\n", (const char *)fn, attr, value);
    return 0;
}
static void show(const char *fn, void **params) {
    static const char *sizes[] = {"vadd", "8884", "axpb", "84484", "allparams", "8112482248", 0};
    const char *sig = "";
    for (int i = 0; sizes[i]; i += 2) if (!strcmp(sizes[i], fn)) sig = sizes[i + 1];
    printf(" params");
    for (int i = 0; sig[i]; i++) {
        int n = sig[i] - '0';
        unsigned long long v = 0;
        memcpy(&v, params[i], n);
        printf(" %llx", v);
    }
    printf("\n");
}
CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void *stream, void **params, void **extra) {
    pthread_mutex_lock(&lock); launches++; pthread_mutex_unlock(&lock);
    if (quiet()) return 0;
    printf("launch %s grid=%u,%u,%u block=%u,%u,%u smem=%u stream=%p extra=%p",
           (const char *)fn, gx, gy, gz, bx, by, bz, smem, stream, (void *)extra);
    show((const char *)fn, params);
    return 0;
}
CUresult cuLaunchKernelEx(const LaunchConfig *cfg, void *fn, void **params, void **extra) {
    const LaunchAttribute *attr = (const LaunchAttribute *)cfg->attrs;
    pthread_mutex_lock(&lock); launches++; pthread_mutex_unlock(&lock);
    printf("launchex %s grid=%u,%u,%u block=%u,%u,%u smem=%u stream=%p nattrs=%u attr=%u cluster=%u,%u,%u",
           (const char *)fn, cfg->gx, cfg->gy, cfg->gz, cfg->bx, cfg->by, cfg->bz, cfg->smem, cfg->stream,
           cfg->nattrs, attr->id, attr->x, attr->y, attr->z);
    show((const char *)fn, params);
    return 0;
}
__attribute__((destructor)) static void report(void) { printf("loads=%d launches=%d\n", loads, launches); }
"""


@pytest.fixture(scope="module")
def program(package: Path) -> Path:
    (package / "main.c").write_text(PROGRAM)
    exe = package / "main"
    # Only -ldl: the CUDA driver is opened at run time; pthread is part of glibc >= 2.34.
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", str(exe), "main.c", "kernels.o", "-ldl"],
                   cwd=package, check=True, capture_output=True)
    return exe


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    libdir = tmp_path_factory.mktemp("fake_cuda")
    (libdir / "fake.c").write_text(FAKE_DRIVER)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(libdir / "libcuda.so.1"), str(libdir / "fake.c"),
                    "-lpthread"], check=True, capture_output=True)
    return libdir


def run(exe: Path, *args: str, libdir: Path | None = None, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    if libdir is not None:
        environment["LD_LIBRARY_PATH"] = str(libdir)
    environment.update(env)
    done = subprocess.run([str(exe), *args], env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def header_constant(package: Path, name: str) -> int:
    match = re.search(rf"#define {name} \((-?\d+)\)", (package / "kernels.h").read_text())
    assert match
    return int(match.group(1))


def driver_present() -> bool:
    return ctypes.util.find_library("cuda") is not None or any(
        Path(d, "libcuda.so.1").exists() for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib"))


def test_links_with_only_ldl_and_reports_no_driver(package: Path, program: Path) -> None:
    if driver_present():
        pytest.skip("a CUDA driver is installed on this machine")
    no_driver = header_constant(package, "TILEIR_ERROR_NO_DRIVER")
    assert no_driver == -1
    assert run(program).strip() == f"rc {no_driver} {no_driver} {no_driver}"


def test_no_device(package: Path, program: Path, fake_driver: Path) -> None:
    no_device = header_constant(package, "TILEIR_ERROR_NO_DEVICE")
    assert no_device == -2
    out = run(program, libdir=fake_driver, FAKE_CUDA_MODE="nodevice")
    assert out.splitlines()[0] == f"rc {no_device} {no_device} {no_device}"
    assert "loads=0 launches=0" in out


def test_driver_errors_pass_through(program: Path, fake_driver: Path) -> None:
    out = run(program, libdir=fake_driver, FAKE_CUDA_MODE="badimage")
    assert out.splitlines()[0] == "rc 200 200 200"


def launches(out: str) -> dict[str, str]:
    return {line.split()[1]: line for line in out.splitlines() if line.startswith(("launch ", "launchex "))}


def test_launches_on_sm90_device(program: Path, fake_driver: Path) -> None:
    out = run(program, libdir=fake_driver, FAKE_CUDA_CC="90")
    lines = out.splitlines()
    assert lines.count("load ctx=0x1000") == 1          # primary context of device 0, loaded once
    assert lines[-1] == "loads=1 launches=3"
    seen = launches(out)
    assert seen["vadd"] == ("launch vadd grid=3,2,1 block=128,1,1 smem=0 stream=0x1234 extra=(nil) "
                            "params 10 20 30 3e8")
    # sm_90 metadata: 128 threads, 1 KiB dynamic shared memory, a 2x1x1 cluster -> cuLaunchKernelEx.
    assert seen["axpb"] == ("launchex axpb grid=5,1,1 block=128,1,1 smem=1024 stream=(nil) nattrs=1 attr=4 "
                            "cluster=2,1,1 params 40 7 3fc00000 fffffffffffffffb 40200000")
    assert "attr axpb 8 1024" in lines                   # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    assert seen["allparams"].endswith(
        "params 50 1 fd fed4 fffeee90 fffffffed5fa0e00 3c00 3f80 40000000 c010000000000000")


@pytest.mark.parametrize("cc, block", [("80", "256"), ("86", "256"), ("89", "256"), ("120", "128")])
def test_launch_shape_is_chosen_per_device(program: Path, fake_driver: Path, cc: str, block: str) -> None:
    out = run(program, libdir=fake_driver, FAKE_CUDA_CC=cc)
    axpb = launches(out)["axpb"]
    assert f"block={block},1,1" in axpb
    assert axpb.startswith("launchex") == (block == "128")


def test_threads_share_one_module_load(program: Path, fake_driver: Path) -> None:
    out = run(program, "threads", libdir=fake_driver, FAKE_CUDA_QUIET="1")
    assert out.splitlines() == ["failures 0", "loads=1 launches=1600"]


def test_one_load_per_context_and_a_bounded_table(package: Path, program: Path, fake_driver: Path) -> None:
    out = run(program, "contexts", libdir=fake_driver, FAKE_CUDA_QUIET="1")
    too_many = header_constant(package, "TILEIR_ERROR_TOO_MANY_CONTEXTS")
    assert out.splitlines() == [f"rc65 {too_many}", "loads=64 launches=128"]


def test_cplusplus_program_links_too(package: Path, fake_driver: Path) -> None:
    if shutil.which("g++") is None:
        pytest.skip("no g++")
    (package / "main.cc").write_text(
        '#include "kernels.h"\n#include <cstdio>\n'
        "int main() { std::printf(\"rc %d\\n\", vadd_launch(nullptr, 1, 1, 1, nullptr, nullptr, nullptr, 4)); }\n")
    exe = package / "main_cc"
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-o", str(exe), "main.cc", "kernels.o", "-ldl"],
                   cwd=package, check=True, capture_output=True)
    assert run(exe, libdir=fake_driver, FAKE_CUDA_QUIET="1").splitlines()[0] == "rc 0"


def gpu_available() -> bool:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


@pytest.mark.gpu
def test_vector_add_on_a_real_gpu(tmp_path: Path) -> None:
    if not gpu_available():
        pytest.skip("no CUDA GPU on this machine")
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuInit(0)
    major, minor = ctypes.c_int(), ctypes.c_int()
    cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, 0)
    cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, 0)
    gpu = f"sm_{major.value}{minor.value}"
    ptx = llvm_to_ptx((DATA / "vadd.ll").read_text(), gpu)
    (tmp_path / "k.cubin").write_bytes(assemble(ptx, gpu))
    (tmp_path / "k.json").write_text(
        replace(ModuleMetadata.from_json((DATA / "vadd.meta.json").read_text()), gpu=gpu).to_json())
    assert tileir("package", "--metadata", "k.json", "--cubin", f"{gpu}=k.cubin", "-o", "k.o",
                  "--header", "kernels.h", cwd=tmp_path).returncode == 0
    (tmp_path / "main.c").write_text(GPU_PROGRAM)
    subprocess.run(["gcc", "-o", "main", "main.c", "k.o", "-ldl"], cwd=tmp_path, check=True)
    out = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr


GPU_PROGRAM = r"""
#include <dlfcn.h>
#include <stdio.h>
#include "kernels.h"
typedef int (*alloc_t)(unsigned long long *, size_t);
typedef int (*copy_h2d_t)(unsigned long long, const void *, size_t);
typedef int (*copy_d2h_t)(void *, unsigned long long, size_t);
typedef int (*sync_t)(void);
int main(void) {
    enum { N = 1000 };
    float a[N], b[N], c[N];
    for (int i = 0; i < N; i++) { a[i] = (float)i; b[i] = 2.0f * i; c[i] = -1.0f; }
    /* The first launch initialises the driver and makes the primary context current. */
    int rc = vadd_launch(NULL, 0, 1, 1, NULL, NULL, NULL, 0);
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    alloc_t alloc = (alloc_t)dlsym(cuda, "cuMemAlloc_v2");
    copy_h2d_t h2d = (copy_h2d_t)dlsym(cuda, "cuMemcpyHtoD_v2");
    copy_d2h_t d2h = (copy_d2h_t)dlsym(cuda, "cuMemcpyDtoH_v2");
    sync_t sync = (sync_t)dlsym(cuda, "cuCtxSynchronize");
    unsigned long long da, db, dc;
    alloc(&da, sizeof a); alloc(&db, sizeof b); alloc(&dc, sizeof c);
    h2d(da, a, sizeof a); h2d(db, b, sizeof b);
    rc = vadd_launch(NULL, (N + 127) / 128, 1, 1, (float *)da, (float *)db, (float *)dc, N);
    if (rc != 0) { printf("launch failed %d\n", rc); return 1; }
    sync();
    d2h(c, dc, sizeof c);
    for (int i = 0; i < N; i++) if (c[i] != 3.0f * i) { printf("wrong c[%d]=%f\n", i, c[i]); return 1; }
    printf("ok\n");
    return 0;
}
"""


def test_fatbin_written_beside_the_object_is_embedded(package: Path) -> None:
    fatbin = (package / "kernels.fatbin").read_bytes()
    obj = (package / "kernels.o").read_bytes()
    assert struct.unpack_from("<I", fatbin)[0] == 0xBA55ED50
    assert fatbin in obj
