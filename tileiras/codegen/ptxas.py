"""PTX -> cubin with NVIDIA's `ptxas`, found without any system CUDA install.

Where ptxas comes from, in order: `$CUDA_ROOT/bin/ptxas`, `$CUDA_HOME/bin/ptxas`,
`$CUDA_PATH/bin/ptxas` (the first of those variables that is set and holds a
ptxas), else the one in the `nvidia-cuda-nvcc` wheel (`nvidia/cu13/bin`).

Each run happens in a private temporary directory with fixed file names, so
the cubin does not depend on the caller's directory or on the temp name. The
directory lives in this process's scratch folder (`tileiras.scratch`) and
ptxas dies with the compiler (`children`), so a killed compile leaves
neither behind for long.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache

from tileiras.errors import CompileError, ExitCode, TileirasError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only: this module is on the cache-hit path, which does not import typing
    from pathlib import Path
    from typing import Sequence

# Finding ptxas is on the cache-hit path (it is part of the cubin key), so the
# modules that only running it needs (subprocess, scratch folders, the target
# table, re, pathlib) are imported where they are used: paths are strings until then.

ENV_VARS: tuple[str, ...] = ("CUDA_ROOT", "CUDA_HOME", "CUDA_PATH")
# Where the nvidia-cuda-nvcc wheels put the tools, under the `nvidia` namespace package.
WHEEL_BIN_DIRS: tuple[str, ...] = ("cu13/bin", "cuda_nvcc/bin")
_EXE = "ptxas.exe" if sys.platform == "win32" else "ptxas"
_PTX_NAME = "kernel.ptx"
_CUBIN_NAME = "kernel.cubin"
_NV_HOST_NAME = "nvhost.o"    # the .nv.host object (codegen/nv_host.py), when the PTX has hidden TMA parameters


def find_ptxas() -> Path:
    """The ptxas executable this process uses."""
    from pathlib import Path

    return Path(ptxas_path())


def ptxas_path() -> str:
    """find_ptxas() as a string (the cache-hit path names ptxas without importing pathlib)."""
    return _find_ptxas(tuple(os.environ.get(name, "") for name in ENV_VARS))


@lru_cache(maxsize=8)
def _find_ptxas(env_values: tuple[str, ...]) -> str:
    for value in env_values:
        if value:
            candidate = os.path.join(value, "bin", _EXE)
            if os.path.isfile(candidate):
                return candidate
    for directory in _wheel_dirs():
        candidate = os.path.join(directory, _EXE)
        if os.path.isfile(candidate):
            return candidate
    raise CompileError(
        "error: cannot find ptxas: install the 'nvidia-cuda-nvcc' wheel "
        "(pip install nvidia-cuda-nvcc) or set CUDA_ROOT, CUDA_HOME or CUDA_PATH to a CUDA toolkit")


def _wheel_dirs() -> list[str]:
    """`nvidia/<...>/bin` of the wheel, located without importing anything heavy."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    roots = list(spec.submodule_search_locations or []) if spec else []
    return [os.path.join(root, sub) for root in roots for sub in WHEEL_BIN_DIRS]


def prepare() -> None:
    """Do now what assembling will need (imports, finding ptxas) while something else runs."""
    from .. import scratch  # noqa: F401
    from . import children, tool  # noqa: F401  (subprocess)

    children.preexec()  # loads prctl

    ptxas_path()


def ptxas_version() -> str:
    """ptxas's release, e.g. '13.5.37' (the V... of `ptxas --version`)."""
    path = find_ptxas()
    stat = path.stat()
    return _version_of(str(path), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=8)
def _version_of(path: str, size: int, mtime_ns: int) -> str:
    from .tool import describe_status, run_tool

    result = run_tool([path, "--version"], timeout=60)
    text = result.stdout.decode("utf-8", errors="replace")
    import re

    match = re.search(r"\bV([0-9]+(?:\.[0-9]+)+)", text)
    if result.returncode != 0 or match is None:
        raise CompileError(f"error: '{path} --version' did not report a version ({describe_status(result.returncode)})")
    return match.group(1)


def ptx_isa_unsupported(version: tuple[int, int]) -> str:
    """Why this ptxas cannot read PTX ISA `version` ("" when it can): CUDA 13.x's reads 9.x up to 9.<x>."""
    try:
        release = tuple(int(x) for x in ptxas_version().split(".")[:2])
    except (TileirasError, ValueError, OSError) as exc:
        return f"ptxas's release is unknown ({exc})"
    if release < (version[0] + 4, version[1]):
        return f"ptxas {release[0]}.{release[1]} does not read PTX ISA {version[0]}.{version[1]}"
    return ""


def ptxas_arch(ptx: str, gpu: str) -> str:
    """The `-arch` for assembling `ptx` on `gpu`: sm_XXa/sm_XXf when the PTX's `.target` says so."""
    from . import targets

    row = targets.lookup(gpu)
    if row.suffix:
        return row.name
    from .nvptx import ptx_target

    declared = ptx_target(ptx)
    if declared and declared[-1] in "af" and declared[:-1] == row.name:
        return declared
    return row.name


def ptxas_argv(ptx: str, gpu: str, opt_level: int = 3, lineinfo: bool = False, debug: bool = False,
               extra: Sequence[str] = (), nv_host: bool = False) -> list[str]:
    """The ptxas command line, relative to the private run directory.

    PTX that carries DWARF (`.target sm_XX, debug`) is assembled with -g: ptxas
    refuses it at any other level ("Optimized debugging not supported"), so -g means -O0.
    With `nv_host`, ptxas embeds the run directory's .nv.host object in the cubin (`--nv-host`).
    """
    from .nvptx import ptx_has_dwarf

    if opt_level not in (0, 1, 2, 3):
        raise TileirasError(f"error: invalid optimization level {opt_level} (expected 0..3)", ExitCode.INVALID_OPTIONS)
    debug = debug or ptx_has_dwarf(ptx)
    level = 0 if debug else opt_level
    argv = [ptxas_path(), "-arch", ptxas_arch(ptx, gpu), "--opt-level", str(level)]
    if lineinfo and not debug:
        argv.append("--generate-line-info")
    if debug:
        argv.append("--device-debug")
    argv += list(extra)
    if nv_host:
        argv.append(f"--nv-host={_NV_HOST_NAME}")
    argv += ["-o", _CUBIN_NAME, _PTX_NAME]
    return argv


class _Running:
    """One ptxas run in its private directory: `start` returns at once, `finish` waits for it."""

    def __init__(self, argv: list[str], ptx: str, nv_host: bytes | None = None) -> None:
        from ..scratch import TempDir
        from .tool import start_tool

        self.argv = argv
        self._dir = TempDir(prefix="ptxas-")  # in this process's folder: reclaimed even after a kill -9
        try:
            with open(os.path.join(self._dir.name, _PTX_NAME), "w", encoding="utf-8") as handle:
                handle.write(ptx)
            if nv_host is not None:
                with open(os.path.join(self._dir.name, _NV_HOST_NAME), "wb") as binary:
                    binary.write(nv_host)
            self._tool = start_tool(argv, cwd=self._dir.name)
        except BaseException:
            self._dir.cleanup()
            raise

    def finish(self) -> tuple[bytes, str]:
        """(cubin, ptxas's stderr)."""
        from .tool import describe_status

        try:
            result = self._tool.wait()
            if result.returncode != 0:
                raise CompileError(
                    f"error: ptxas {self.argv[2]} failed ({describe_status(result.returncode)}):\n"
                    f"{result.stderr_text or result.stdout.decode('utf-8', errors='replace').strip()}")
            try:
                with open(os.path.join(self._dir.name, _CUBIN_NAME), "rb") as handle:
                    cubin = handle.read()
            except OSError:
                raise CompileError(f"error: ptxas {self.argv[2]} exited 0 but wrote no cubin") from None
            return cubin, result.stderr_text
        finally:
            self._dir.cleanup()

    def cancel(self) -> None:
        self._tool.proc.kill()
        self._tool.proc.communicate()
        self._dir.cleanup()


def _run(argv: list[str], ptx: str) -> tuple[bytes, str]:
    return _Running(argv, ptx).finish()


class PendingCubin:
    """`assemble` started: ptxas runs while the caller does other work (or starts more ptxas)."""

    def __init__(self, ptx: str, gpu: str, opt_level: int = 3, lineinfo: bool = False, debug: bool = False,
                 extra: Sequence[str] = (), nv_host: bytes | None = None) -> None:
        self._run = _Running(ptxas_argv(ptx, gpu, opt_level, lineinfo, debug, extra, nv_host is not None), ptx,
                             nv_host)
        self.verbose = "-v" in extra
        self.info = ""  # with -v: ptxas's resource report (registers, spills), for the remarks
        self.warnings = ""  # what was passed on to stderr (the compile cache keeps it beside the cubin)

    def cancel(self) -> None:
        self._run.cancel()

    def result(self) -> bytes:
        cubin, warnings = self._run.finish()
        if self.verbose:  # the report is data, not warnings: keep it off stderr
            self.info = warnings
            warnings = "\n".join(line for line in warnings.splitlines()
                                 if not line.startswith(("ptxas info", "    ")))
        if warnings:
            print(warnings, file=sys.stderr)
        self.warnings = warnings
        if not cubin.startswith(b"\x7fELF"):
            raise CompileError("error: ptxas wrote something that is not an ELF cubin")
        return cubin


def assemble(ptx: str, gpu: str, opt_level: int = 3, lineinfo: bool = False, debug: bool = False,
             extra: Sequence[str] = (), nv_host: bytes | None = None) -> bytes:
    """Assemble `ptx` into a cubin for `gpu`; ptxas warnings are passed on to stderr. `nv_host`: the
    `.nv.host` object (codegen/nv_host.py) that fills the PTX's hidden tensor-map parameters."""
    return PendingCubin(ptx, gpu, opt_level, lineinfo, debug, extra, nv_host).result()


def parallel_runs() -> int:
    """How many ptxas processes to keep running at once: one per CPU this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


_ENTRY = r"Compiling entry function '([^']+)'"
_FRAME = r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
_USED = r"Used (\d+) registers"
_SMEM = r"(\d+) bytes smem"


def resource_usage(ptx: str, gpu: str, opt_level: int = 3, extra: Sequence[str] = ()) -> dict[str, dict[str, int]]:
    """Per entry function, from `ptxas -v`: registers, spill_stores, spill_loads, stack_frame, smem."""
    import re  # here: finding ptxas (the cache-hit path) does not need it

    _, report = _run(ptxas_argv(ptx, gpu, opt_level, extra=["-v", *extra]), ptx)
    usage: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in report.splitlines():
        if (match := re.search(_ENTRY, line)) is not None:
            current = usage.setdefault(match.group(1), {
                "registers": 0, "spill_stores": 0, "spill_loads": 0, "stack_frame": 0, "smem": 0})
        elif current is None:
            continue
        elif (match := re.search(_FRAME, line)) is not None:
            current["stack_frame"], current["spill_stores"], current["spill_loads"] = map(int, match.groups())
        elif (match := re.search(_USED, line)) is not None:
            current["registers"] = int(match.group(1))
            if (smem := re.search(_SMEM, line)) is not None:
                current["smem"] = int(smem.group(1))
    return usage
