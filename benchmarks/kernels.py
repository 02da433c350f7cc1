"""Kernel run time: our cubin against NVIDIA's cubin for the same bytecode (and torch where
installed), on the realistic configurations of tests/realistic/manifest.json.

    python benchmarks/kernels.py --sample              # the default test sample
    python benchmarks/kernels.py --only mm_f16 --repeats 50
    python benchmarks/kernels.py --save DIR            # compile only: cubins + facts into DIR
    python benchmarks/kernels.py --load DIR            # on the GPU machine: no compiler needed

Every configuration is compiled by both compilers for the GPU present (or, without one, for
--gpu-name, default sm_90). What can be checked without a GPU is checked first, for both cubins:
the kernel symbol, the parameter block against the cuTile calling convention (array = ptr,
shape..., strides...; extra bytes NVIDIA's compiler appends, its TMA descriptors, are shown as
hidden), threads per CTA, registers per CTA and shared memory against the target's limits.
With a GPU (cuda-bindings and a driver), both cubins are launched the way cuTile's launcher
launches: arguments flattened as above, threads from the cubin's REQNTID, and dynamic shared
memory of (the device's opt-in maximum - the kernel's static size), set with
cuFuncSetAttribute. Times are the median of --repeats launches between CUDA events, reported
with TFLOP/s (matmul, attention) or GB/s of compulsory traffic (everything else). Without a GPU
the script says so and exits 0.

Before timing, each cubin runs once on the same inputs with its outputs zeroed, and our outputs
are compared with NVIDIA's (the oracle): the largest difference relative to the largest NVIDIA
value, and the elements off by more than the dtype's tolerance. With a GPU every configuration
runs in its own process (a kernel that faults or hangs spoils its CUDA context): a crash, a
hang (--timeout) or a mismatch is a failure and the exit code is 1. --save/--load split the
work for a GPU machine that has no compiler: the first compiles both sides for --gpu-name and
checks them offline; the second needs only numpy, ml_dtypes and cuda-bindings (torch optional).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))   # the tree's compiler, not an installed copy
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "realistic"))
import compilers  # noqa: E402
import sass_stats  # noqa: E402

# opt-in shared memory per block (bytes) and registers per SM, per target
SMEM_OPTIN: dict[str, int] = {
    "sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_87": 163 * 1024, "sm_89": 99 * 1024,
    "sm_90": 227 * 1024, "sm_100": 227 * 1024, "sm_103": 227 * 1024, "sm_120": 99 * 1024,
}
REGS_PER_SM = 64 * 1024
COMPUTE_FAMILIES = frozenset({"matmul", "bmm", "splitk", "attention"})
PARAM_SIZE = {"ptr": 8, "i32": 4, "float32": 4}


def abi(config: dict) -> list[tuple[str, Any]]:
    """The cuTile (cutile_python_v1) entry parameters: (kind, value source) in order."""
    out: list[tuple[str, Any]] = []
    for p in config["params"]:
        if p["kind"] == "array":
            out.append(("ptr", p["name"]))
            out += [("i32", n) for n in p["shape"]]
            out += [("i32", s) for s in p["strides"]]
        elif p["kind"] == "scalar":
            out.append((p["dtype"], p["value"]))
    return out


def offline_check(config: dict, gpu: str, cubin: Path, dynamic_smem: int | None) -> tuple[list[str], dict]:
    """Problems that would stop a launch, found from the cubin alone; and the facts used."""
    problems: list[str] = []
    stats = sass_stats.cubin_stats(cubin)
    info = sass_stats.parse_elf_info(sass_stats.cuobjdump(cubin, "-elf")).get(config["symbol"])
    kstats = stats.get(config["symbol"])
    if kstats is None or info is None:
        return [f"no kernel named {config['symbol']}"], {}
    expected = [PARAM_SIZE[kind] for kind, _ in abi(config)]
    got = [size for _, _, size in info.params]
    if got[:len(expected)] != expected:
        problems.append(f"parameters {got[:len(expected)]} bytes, the cuTile convention needs {expected}")
    user_bytes = info.params[len(expected) - 1][1] + expected[-1] if len(info.params) >= len(expected) else 0
    hidden = max(0, (info.param_bytes or 0) - user_bytes)
    threads = kstats.threads or 0
    if not 0 < threads <= 1024:
        problems.append(f"threads per CTA {threads or 'unknown'}")
    if (kstats.registers or 0) * threads > REGS_PER_SM:
        problems.append(f"{kstats.registers} registers x {threads} threads exceed {REGS_PER_SM}")
    smem = (kstats.shared_static or 0) + (dynamic_smem or 0)
    if smem > SMEM_OPTIN.get(gpu, 0):
        problems.append(f"shared memory {smem} B over {gpu}'s {SMEM_OPTIN.get(gpu)} B")
    facts = {"threads": threads, "registers": kstats.registers, "smem": smem,
             "hidden_param_bytes": hidden}
    return problems, facts


# ------------------------------------------------------------------------------------ GPU

def _device() -> Any:
    """(driver module, device) or None when no GPU can be used."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    try:
        err, = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or count == 0:
            return None
        err, dev = driver.cuDeviceGet(0)
        return (driver, dev) if err == driver.CUresult.CUDA_SUCCESS else None
    except Exception:
        return None


def _ok(driver: Any, result: Any, what: str) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what}: {getattr(err, 'name', err)}")
    return rest[0] if len(rest) == 1 else rest


class Gpu:
    def __init__(self, driver: Any, device: Any) -> None:
        self.d, self.dev = driver, device
        attr = driver.CUdevice_attribute
        major = _ok(driver, driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), "cc")
        minor = _ok(driver, driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), "cc")
        self.gpu = f"sm_{major}{minor}"
        self.smem_optin = _ok(driver, driver.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device), "smem opt-in")
        self.name = _ok(driver, driver.cuDeviceGetName(64, device), "name").split(b"\0")[0].decode()
        # the primary context: the one torch uses too
        self.ctx = _ok(driver, driver.cuDevicePrimaryCtxRetain(device), "context")
        _ok(driver, driver.cuCtxSetCurrent(self.ctx), "set context")

    def upload(self, data: bytes) -> int:
        ptr = _ok(self.d, self.d.cuMemAlloc(max(1, len(data))), "cuMemAlloc")
        buf = (ctypes.c_char * len(data)).from_buffer_copy(data)
        _ok(self.d, self.d.cuMemcpyHtoD(ptr, ctypes.addressof(buf), len(data)), "cuMemcpyHtoD")
        return int(ptr)

    def free(self, ptr: int) -> None:
        self.d.cuMemFree(ptr)

    def zero(self, ptr: int, nbytes: int) -> None:
        _ok(self.d, self.d.cuMemsetD8(ptr, 0, nbytes), "cuMemsetD8")

    def download(self, ptr: int, nbytes: int) -> bytes:
        buf = ctypes.create_string_buffer(nbytes)
        _ok(self.d, self.d.cuMemcpyDtoH(ctypes.addressof(buf), ptr, nbytes), "cuMemcpyDtoH")
        return buf.raw

    def time_cubin(self, cubin: bytes, config: dict, pointers: dict[str, int], block: int,
                   repeats: int, before: Callable[[], None] = lambda: None,
                   after: Callable[[], None] = lambda: None) -> float:
        """Median milliseconds per launch of the configuration's kernel in `cubin`; `before` and
        `after` run around its first launch (zero the outputs, read them back)."""
        d = self.d
        image = ctypes.create_string_buffer(cubin, len(cubin))
        module = _ok(d, d.cuModuleLoadData(ctypes.addressof(image)), "cuModuleLoadData")
        try:
            func = _ok(d, d.cuModuleGetFunction(module, config["symbol"].encode()), "cuModuleGetFunction")
            static = _ok(d, d.cuFuncGetAttribute(
                d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, func), "static smem")
            dynamic = max(0, self.smem_optin - static)      # cuTile's launcher's rule
            _ok(d, d.cuFuncSetAttribute(
                func, d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic),
                "cuFuncSetAttribute")
            args = []
            for kind, source in abi(config):
                if kind == "ptr":
                    args.append(ctypes.c_uint64(pointers[source]))
                elif kind == "i32":
                    args.append(ctypes.c_int32(int(source)))
                else:
                    args.append(ctypes.c_float(float(source)))
            argv = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
            gx, gy, gz = config["grid"]

            def launch() -> None:
                _ok(d, d.cuLaunchKernel(func, gx, gy, gz, block, 1, 1, dynamic, 0,
                                        ctypes.addressof(argv), 0), "cuLaunchKernel")
            return self._time(launch, repeats, before, after)
        finally:
            d.cuModuleUnload(module)

    def _time(self, launch: Callable[[], None], repeats: int, before: Callable[[], None],
              after: Callable[[], None]) -> float:
        d = self.d
        start = _ok(d, d.cuEventCreate(0), "event")
        stop = _ok(d, d.cuEventCreate(0), "event")
        before()
        launch()
        _ok(d, d.cuCtxSynchronize(), "kernel execution")
        after()
        times = []
        for _ in range(max(1, repeats)):
            _ok(d, d.cuEventRecord(start, 0), "record")
            launch()
            _ok(d, d.cuEventRecord(stop, 0), "record")
            _ok(d, d.cuEventSynchronize(stop), "kernel execution")
            times.append(_ok(d, d.cuEventElapsedTime(start, stop), "elapsed"))
        d.cuEventDestroy(start)
        d.cuEventDestroy(stop)
        return statistics.median(times)


def _np_dtype(name: str) -> Any:
    import ml_dtypes
    import numpy as np

    return np.dtype({"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "bfloat16": ml_dtypes.bfloat16}.get(
        name, name))


def nbytes(param: dict) -> int:
    import numpy as np

    return int(np.prod(param["shape"])) * _np_dtype(param["dtype"]).itemsize


# largest |ours - NVIDIA's| / largest |NVIDIA's| an output may show: f32 accumulation in another
# order over K up to 4096, rounded to the output's type
TOLERANCE = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 3e-2, "float8_e4m3fn": 1.3e-1,
             "int8": 0.0, "int32": 0.0}


def compare(param: dict, ours: bytes, theirs: bytes, tf32: bool = False) -> tuple[bool, str]:
    """Our output against NVIDIA's (`tf32`: an f32 output of tf32 inputs): (agrees, summary)."""
    import numpy as np

    dt = _np_dtype(param["dtype"])
    a = np.frombuffer(ours, dt).astype(np.float64)
    b = np.frombuffer(theirs, dt).astype(np.float64)
    tol = 1e-2 if tf32 else TOLERANCE.get(param["dtype"], 1e-2)     # tf32: 10-bit mantissas
    nan_a, nan_b = int(np.isnan(a).sum()), int(np.isnan(b).sum())
    finite = ~(np.isnan(a) | np.isnan(b))
    scale = float(np.abs(b[finite]).max()) if finite.any() else 0.0
    diff = np.abs(a - b)[finite]
    worst = float(diff.max()) / scale if scale and diff.size else float(diff.max() if diff.size else 0)
    bad = int((diff > tol * max(scale, 1e-30)).sum()) + abs(nan_a - nan_b)
    ok = bad == 0 and nan_a == nan_b
    return ok, (f"{param['name']}: max |diff| {worst:.2e} of max |nvidia| {scale:.3g}, "
                f"{bad} of {a.size} off by > {tol:g}" + (f", NaN ours {nan_a} nvidia {nan_b}"
                                                         if nan_a or nan_b else ""))


def host_data(param: dict, seed: int) -> bytes:
    """Inputs in [-1, 1) (small integers for int8), in the array's storage format."""
    import numpy as np

    rng = np.random.default_rng(seed)
    shape = tuple(param["shape"])
    if param["dtype"] in ("int8", "int32"):
        return rng.integers(-4, 4, shape).astype(param["dtype"]).tobytes()
    return rng.uniform(-1, 1, shape).astype(np.float32).astype(_np_dtype(param["dtype"])).tobytes()


# family -> torch expression over the config's arrays (torch tensors by parameter name)
TORCH: dict[str, Callable[[Any, dict, dict], Callable[[], Any]]] = {
    "matmul": lambda torch, t, c: (lambda: torch.matmul(t["a"], t["b"]))
    if t["a"].dtype in (torch.float16, torch.bfloat16, torch.float32) else None,
    "bmm": lambda torch, t, c: lambda: torch.bmm(t["a"], t["b"]),
    "attention": lambda torch, t, c: lambda: torch.nn.functional.scaled_dot_product_attention(
        t["q"].unsqueeze(0), t["k"].unsqueeze(0), t["v"].unsqueeze(0),
        is_causal=bool(_const(c, "CAUSAL"))),
    "layernorm": lambda torch, t, c: lambda: torch.nn.functional.layer_norm(
        t["x"], (t["x"].shape[-1],), t["w"], t["b"], 1e-5),
    "rmsnorm": lambda torch, t, c: (lambda: torch.nn.functional.rms_norm(
        t["x"], (t["x"].shape[-1],), t["w"], 1e-6)) if hasattr(torch.nn.functional, "rms_norm") else None,
    "softmax": lambda torch, t, c: lambda: torch.softmax(t["x"], dim=-1),
    "reduction": lambda torch, t, c: (lambda: torch.sum(t["x"], dim=1)) if c["kernel"] == "row_sum"
    else (lambda: torch.amax(t["x"], dim=1)),
    "elementwise": lambda torch, t, c: lambda: torch.add(t["a"], t["b"], out=t["c"]),
    "transpose": lambda torch, t, c: lambda: t["y"].copy_(t["x"].t()),
}


def _const(config: dict, name: str) -> Any:
    return next(p["value"] for p in config["params"] if p.get("name") == name)


def torch_time(config: dict, repeats: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available() or config["family"] not in TORCH:
        return None
    names = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
             "int8": torch.int8, "int32": torch.int32, "float8_e4m3fn": torch.float8_e4m3fn}
    tensors = {}
    for p in config["params"]:
        if p["kind"] == "array":
            dt = names[p["dtype"]]
            base = torch.empty(p["shape"], device="cuda", dtype=torch.float32).uniform_(-1, 1)
            tensors[p["name"]] = base.to(dt)
    torch.backends.cuda.matmul.allow_tf32 = bool(_const(config, "TF32")) if config["family"] == "matmul" else False
    fn = TORCH[config["family"]](torch, tensors, config)
    if fn is None:
        return None
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(max(1, repeats)):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def rate(config: dict, ms: float | None) -> str:
    if ms is None or ms <= 0:
        return "-"
    if config["family"] in COMPUTE_FAMILIES:
        return f"{config['flops'] / ms / 1e9:.1f} TFLOP/s"
    return f"{config['bytes'] / ms / 1e6:.0f} GB/s"


# ------------------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="TEXT")
    parser.add_argument("--sample", action="store_true")
    parser.add_argument("--gpu-name", default="sm_90", help="target when no GPU is present")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--save", type=Path, metavar="DIR",
                        help="compile and check offline only, writing the cubins to DIR")
    parser.add_argument("--load", type=Path, metavar="DIR",
                        help="run the cubins --save wrote (no compiler needed)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds one configuration may run (--load)")
    parser.add_argument("--no-torch", action="store_true", help="time only the two cubins")
    parser.add_argument("--child", metavar="NAME", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.load is None and (sass_stats.cuobjdump_path() is None or compilers.nvidia_tileiras() is None):
        print("error: needs cuobjdump, nvdisasm and NVIDIA's tileiras (pip install "
              "nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm nvidia-cuda-tileiras)", file=sys.stderr)
        return 2
    found = None if args.save else _device()
    gpu = Gpu(*found) if found else None
    target = gpu.gpu if gpu else args.gpu_name
    configs = [c for c in compilers.manifest()["configs"]
               if (not args.only or any(o in c["name"] for o in args.only))
               and (not args.sample or c["sample"]) and target in c["targets"]
               and (args.child is None or c["name"] == args.child)]
    if args.child:
        if gpu is None or not configs:
            print("error: no GPU or no such configuration", file=sys.stderr)
            return 2
        row, agree = run_on_gpu(gpu, configs[0], _load(args.load, configs)[args.child], args.repeats,
                                not args.no_torch)
        print(json.dumps({"row": row, "agree": agree}))
        return 0 if agree else 1
    if not configs:
        print("error: no configuration matches the filters", file=sys.stderr)
        return 1
    if args.load and gpu is None:
        print("no GPU is present: nothing to run")
        return 0
    print(f"device: {gpu.name} ({gpu.gpu})" if gpu else
          f"no GPU is present: compiling for {target} and checking what can be checked "
          "without one; nothing is timed")
    failures = 0
    rows = []
    if args.load:
        index = json.loads((args.load / "index.json").read_text())
        gpu = None          # the children take the device; this process only reports
        for config in configs:
            if config["name"] not in index:
                continue
            row, agree = run_isolated(args.load, config["name"], args.repeats, args.timeout,
                                      args.no_torch)
            failures += not agree
            rows.append({"name": config["name"],
                         **{side: facts_text(facts) for side, facts in index[config["name"]].items()}, **row})
            print(config["name"], json.dumps(row), flush=True)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            work = args.save or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            index: dict[str, dict] = {}
            for config in configs:
                row, built, unlaunchable = build(config, target, work)
                failures += unlaunchable > 0
                index[config["name"]] = {side: facts for side, (_, facts) in built.items()}
                if gpu is not None and built:
                    timed, agree = run_on_gpu(gpu, config, built, args.repeats, not args.no_torch)
                    row.update(timed)
                    failures += not agree
                rows.append(row)
            if args.save:
                (work / "index.json").write_text(json.dumps(index, indent=1))
    for row in rows:
        print(row.pop("name"))
        for key, value in row.items():
            print(f"  {key:>10}: {value}")
    if gpu is None and not args.load:
        print("no GPU is present: timing skipped" + (f"; cubins in {args.save}" if args.save else ""))
    return 1 if failures else 0


def facts_text(facts: dict) -> str:
    """A built cubin's launch facts, as the report prints them."""
    return (f"ok: {facts['threads']} thr, {facts['registers']} regs, {facts['smem'] / 1024:.0f} KiB smem"
            + (f", +{facts['hidden_param_bytes']} B hidden params" if facts["hidden_param_bytes"] else ""))


def build(config: dict, target: str, work: Path) -> tuple[dict[str, Any], dict, int]:
    """Both compilers' cubins for `config` in `work`, checked offline: (report row, built, sides
    whose cubin cannot launch)."""
    src = compilers.HERE / config["file"]
    row: dict[str, Any] = {"name": config["name"]}
    built = {}
    unlaunchable = 0
    for side, fn in (("ours", compilers.compile_ours), ("nvidia", compilers.compile_nvidia)):
        res = fn(src, target, work / f"{config['name']}.{side}.cubin")
        if not res.ok:
            row[side] = f"compile failed: {res.message[:70]}"
            continue
        problems, facts = offline_check(config, target, res.cubin, res.dynamic_smem)
        if problems:
            unlaunchable += 1
            row[side] = "; ".join(problems)
            continue
        built[side] = (res.cubin.read_bytes(), facts)
        row[side] = facts_text(facts)
    return row, built, unlaunchable


def run_on_gpu(gpu: Gpu, config: dict, built: dict, repeats: int,
               torch: bool = True) -> tuple[dict[str, str], bool]:
    """Times (and our outputs against NVIDIA's) of the built cubins: (rows, all agree)."""
    out: dict[str, str] = {}
    pointers = {}
    outputs = [p for p in config["params"] if p["kind"] == "array" and p.get("output")]
    results: dict[str, dict[str, bytes]] = {}
    agree = True
    try:
        for i, p in enumerate(config["params"]):
            if p["kind"] == "array":
                pointers[p["name"]] = gpu.upload(host_data(p, seed=i))
        times: dict[str, float | None] = {}
        for side in ("nvidia", "ours"):
            if side not in built:
                continue
            cubin, facts = built[side]
            print(f"running {side}'s cubin", file=sys.stderr, flush=True)   # a hang names its side

            def zero() -> None:
                for p in outputs:
                    gpu.zero(pointers[p["name"]], nbytes(p))

            def keep(side: str = side) -> None:
                results[side] = {p["name"]: gpu.download(pointers[p["name"]], nbytes(p))
                                 for p in outputs}
            try:
                times[side] = gpu.time_cubin(cubin, config, pointers, facts["threads"], repeats,
                                             zero, keep)
            except RuntimeError as exc:
                times[side] = None
                agree = False
                out[f"{side} run"] = f"failed: {exc}"
                if "execution" in str(exc) or "ILLEGAL" in str(exc):
                    break          # the context is spoilt: nothing after this can run
        if "ours" in results and "nvidia" in results:
            for p in outputs:
                ok, text = compare(p, results["ours"][p["name"]], results["nvidia"][p["name"]],
                                   tf32=any(q.get("name") == "TF32" and q.get("value") for q in config["params"]))
                agree &= ok
                out[f"{'agrees' if ok else 'DIFFERS'}"] = text
        if agree and torch:
            times["torch"] = torch_time(config, repeats)
        for side, ms in times.items():
            if ms is not None:
                out[f"{side} time"] = f"{ms * 1000:.1f} us  {rate(config, ms)}"
        if times.get("ours") and times.get("nvidia"):
            out["ours/nvidia"] = f"{times['ours'] / times['nvidia']:.2f}x the time"
    finally:
        for ptr in pointers.values():
            gpu.free(ptr)
    return out, agree


def run_isolated(load: Path, name: str, repeats: int, timeout: float,
                 no_torch: bool) -> tuple[dict[str, str], bool]:
    """One configuration from --load in a child process: a fault or hang spoils only it."""
    argv = [sys.executable, __file__, "--load", str(load), "--child", name, "--repeats", str(repeats),
            *(["--no-torch"] if no_torch else [])]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        last = (err.strip().splitlines() or ["before the first launch"])[-1]
        return {"FAILED": f"no answer in {timeout:g} s (a hang?), last: {last}"}, False
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode not in (0, 1) or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"FAILED": f"exit {proc.returncode}: {' | '.join(tail)}"}, False
    answer = json.loads(lines[-1])
    return answer["row"], answer["agree"]


def _load(load: Path, configs: list[dict]) -> dict[str, dict]:
    index = json.loads((load / "index.json").read_text())
    return {c["name"]: {side: ((load / f"{c['name']}.{side}.cubin").read_bytes(), facts)
                        for side, facts in index[c["name"]].items()}
            for c in configs if c["name"] in index}


if __name__ == "__main__":
    sys.exit(main())
