"""Compile one bytecode module with our tileiras or NVIDIA's, measuring the CPU time spent.

Shared by tests/test_realistic_compile.py and benchmarks/sass.py. CPU time (user + system of
the compiler process and its children, ptxas included) is the figure compared between the two
compilers: on a machine shared with other jobs it varies far less than wall time.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"


@dataclass(frozen=True)
class Compiled:
    ok: bool
    cubin: Path
    cpu_s: float
    wall_s: float
    message: str = ""            # the compiler's first error line when not ok
    dynamic_smem: int | None = None   # bytes, from our launch metadata (ours only)
    block: tuple[int, int, int] | None = None


def manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def nvidia_tileiras() -> Path | None:
    """NVIDIA's tileiras from the nvidia-cuda-tileiras wheel (an oracle, never the product)."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(base) / "cu13" / "bin" / "tileiras"
        if candidate.exists():
            return candidate
    return None


# Runs the compiler as its child and adopts every process the compiler leaves behind (our
# driver does not wait for its LLVM worker), so that the CPU time of the whole process tree is
# counted: writes "cpu_seconds max_rss_kib" of all reaped descendants to the file argv[1]
# (benchmarks/tile_scaling.py reads the peak memory too).
_TREE_CPU = """
import ctypes, os, resource, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER
code = subprocess.call(sys.argv[2:])
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
u = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write(f"{u.ru_utime + u.ru_stime} {u.ru_maxrss}")
sys.exit(code)
"""


def _run(argv: list[str], timeout: float) -> tuple[subprocess.CompletedProcess | None, float, float]:
    """Run to completion; (process or None on timeout, CPU seconds, wall seconds). The CPU time
    is that of the compiler's whole process tree (children it does not wait for included), apart
    from any other compile running concurrently."""
    import signal
    import tempfile
    import threading

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("r", suffix=".cpu") as cpu_file:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", _TREE_CPU, cpu_file.name, *argv], stdout=out,
                                stderr=err, text=True, cwd=ROOT, env=env, start_new_session=True)
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        text = cpu_file.read().strip()
        cpu = float(text.split()[0]) if text else usage.ru_utime + usage.ru_stime
        if wall >= timeout and proc.returncode < 0:
            return None, cpu, wall
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, proc.returncode, out.read(), err.read()), cpu, wall


def _error_line(proc: subprocess.CompletedProcess | None, timeout: float) -> str:
    if proc is None:
        return f"timed out after {timeout:.0f} s"
    lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    first = (errors or lines or [f"exit {proc.returncode}"])[0]     # the first says why
    # NVIDIA's prefixes a diagnostic with its whole debug-info attribute: keep file:line:col
    loc = re.match(r'#cuda_tile\.di_loc<loc\("([^"]*)":(\d+):(\d+)\).*?>: (\w+: .*)$', first)
    return (f"{loc[1]}:{loc[2]}:{loc[3]}: {loc[4]}" if loc else first)[:300]


_BYTECODE_READY = False


def _compile_python_once() -> None:
    """Write the tree's .pyc files before the first timed compile: a user's installed tileiras has
    them, and without them (PYTHONDONTWRITEBYTECODE, a fresh clone) every compile would also pay
    for compiling the whole package from source, about 0.25 s."""
    global _BYTECODE_READY
    if not _BYTECODE_READY:
        import compileall
        compileall.compile_dir(str(ROOT / "tileiras"), quiet=1)
        _BYTECODE_READY = True


def compile_ours(bytecode: Path, gpu: str, out: Path, timeout: float = 600) -> Compiled:
    _compile_python_once()
    argv = [sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--emit-metadata",
            "--gpu-name", gpu, str(bytecode), "-o", str(out)]
    proc, cpu, wall = _run(argv, timeout)
    ok = proc is not None and proc.returncode == 0 and out.exists()
    smem = block = None
    meta = Path(str(out) + ".json")
    if ok and meta.exists():
        kernels = json.loads(meta.read_text()).get("kernels", [])
        if kernels:
            smem = int(kernels[0].get("dynamic_smem", 0))
            block = tuple(kernels[0].get("block", (0, 0, 0)))
    return Compiled(ok, out, cpu, wall, "" if ok else _error_line(proc, timeout), smem, block)


def compile_nvidia(bytecode: Path, gpu: str, out: Path, timeout: float = 600) -> Compiled:
    tool = nvidia_tileiras()
    if tool is None:
        return Compiled(False, out, 0.0, 0.0, "NVIDIA's tileiras is not installed "
                        "(pip install nvidia-cuda-tileiras)")
    proc, cpu, wall = _run([str(tool), "--gpu-name", gpu, str(bytecode), "-o", str(out)], timeout)
    ok = proc is not None and proc.returncode == 0 and out.exists()
    return Compiled(ok, out, cpu, wall, "" if ok else _error_line(proc, timeout))


MAX_TIME_RATIO = 10.0   # ours / NVIDIA's CPU time, per kernel (issue 14)


def check_time_ratio(mine: Compiled, theirs: Compiled, what: str) -> None:
    """Assert that ours compiled and took at most MAX_TIME_RATIO times NVIDIA's CPU time."""
    assert mine.ok, f"{what}: {mine.message}"
    ratio = mine.cpu_s / max(theirs.cpu_s, 0.05)
    assert ratio <= MAX_TIME_RATIO, (f"{what}: {mine.cpu_s:.1f} s of CPU, "
                                     f"NVIDIA's {theirs.cpu_s:.1f} s ({ratio:.1f}x)")


class CorpusCompiles:
    """A corpus's kernels compiled by both compilers into one temp folder (removed at exit), each
    (kernel, target) once per test session, and the checks the corpus tests make of them.
    `files`: kernel name -> bytecode path; `symbols`: kernel name -> the kernel's name in the cubin."""

    def __init__(self, prefix: str, files: dict[str, Path], symbols: dict[str, str]) -> None:
        import atexit
        import functools
        import shutil
        import tempfile

        self.work = Path(tempfile.mkdtemp(prefix=prefix))
        atexit.register(shutil.rmtree, self.work, True)
        self.files, self.symbols = files, symbols
        self.ours = functools.lru_cache(maxsize=None)(self._ours)
        self.nvidia = functools.lru_cache(maxsize=None)(self._nvidia)

    def _ours(self, name: str, gpu: str) -> Compiled:
        return compile_ours(self.files[name], gpu, self.work / f"{name}.{gpu}.ours.cubin")

    def _nvidia(self, name: str, gpu: str) -> Compiled:
        result = compile_nvidia(self.files[name], gpu, self.work / f"{name}.{gpu}.nvidia.cubin")
        assert result.ok, f"NVIDIA's tileiras rejects {name} for {gpu}: {result.message}"
        return result

    def check_compiles(self, name: str, gpu: str) -> None:
        """Ours compiles the kernel for `gpu` into a cubin that holds it."""
        import sass_stats  # benchmarks/: the test modules put it on the path

        result = self.ours(name, gpu)
        assert result.ok, f"{name} for {gpu}: {result.message}"
        assert self.symbols[name] in sass_stats.cubin_stats(result.cubin), f"{name}: no such kernel in the cubin"

    def check_compile_time(self, name: str, gpu: str) -> None:
        check_time_ratio(self.ours(name, gpu), self.nvidia(name, gpu), f"{name} for {gpu}")

    def compile_tests(self, sample: list[tuple[str, str]], full: list[tuple[str, str]]) -> tuple:
        """test_compiles and test_compile_time over `sample`, and their `-m sweep` twins over `full`,
        for a test module to bind under those names."""
        import pytest

        def over(pairs: list[tuple[str, str]], check, sweep: bool = False):
            def test(name: str, gpu: str) -> None:
                check(name, gpu)

            test = pytest.mark.parametrize("name,gpu", pairs, ids=pair_ids(pairs))(test)
            return pytest.mark.sweep(test) if sweep else test

        return (over(sample, self.check_compiles), over(sample, self.check_compile_time),
                over(full, self.check_compiles, sweep=True), over(full, self.check_compile_time, sweep=True))


def pair_ids(pairs: list[tuple[str, str]]) -> list[str]:
    """pytest ids of (kernel, target) pairs: `kernel-target`."""
    return [f"{n}-{g}" for n, g in pairs]
