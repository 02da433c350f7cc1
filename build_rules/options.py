"""What a build system may ask for one kernel library, and the checks on it.

Every integration validates through here, so CMake (at configure time) and
Bazel (its own analysis-time copy of these rules, tested against this one)
reject the same inputs with the same words.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tileiras.errors import ExitCode, TileirasError
from tileiras.driver.options import GPU_NAMES

DEFAULT_GPU_NAMES: tuple[str, ...] = ("sm_90",)
OPT_LEVELS: tuple[int, ...] = (0, 1, 2, 3)
DEFAULT_OPT_LEVEL = 3
DEBUG_OPT_LEVEL = 0          # optimized device debugging is unsupported by the compiler
SOURCE_SUFFIXES: tuple[str, ...] = (".tileirbc", ".tileir", ".mlir")
HEADER_SUFFIXES: tuple[str, ...] = (".h", ".hpp")
# Characters a build system cannot carry through its own syntax safely
# (CMake lists split on ';', depfiles and Ninja break on newlines).
FORBIDDEN_PATH_CHARS: tuple[str, ...] = (";", "\n", "\r")


class PlanError(TileirasError):
    """A request no integration accepts: bad GPU name, option, source or header."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.INVALID_OPTIONS)


@dataclass(frozen=True)
class KernelOptions:
    """Compile options shared by every source of one library target."""

    gpu_names: tuple[str, ...] = DEFAULT_GPU_NAMES
    opt_level: int = DEFAULT_OPT_LEVEL
    lineinfo: bool = False
    device_debug: bool = False

    @classmethod
    def resolve(cls, gpu_names: list[str] | tuple[str, ...] | None = None, opt_level: int | str | None = None,
                lineinfo: bool = False, device_debug: bool = False) -> "KernelOptions":
        """Fill defaults and validate. An unset opt level is 0 with device debug, else 3."""
        gpus = tuple(gpu_names) if gpu_names else DEFAULT_GPU_NAMES
        check_gpu_names(gpus)
        if opt_level is None or opt_level == "":
            level = DEBUG_OPT_LEVEL if device_debug else DEFAULT_OPT_LEVEL
        else:
            level = parse_opt_level(opt_level)
        if device_debug and level != DEBUG_OPT_LEVEL:
            raise PlanError(f"DEVICE_DEBUG needs OPT_LEVEL {DEBUG_OPT_LEVEL} (optimized device debugging is "
                            f"not supported), got OPT_LEVEL {level}")
        return cls(gpus, level, bool(lineinfo), bool(device_debug))

    @property
    def newest_gpu(self) -> str:
        """The target whose PTX is embedded for JIT on GPUs newer than all of them."""
        return max(self.gpu_names, key=sm_number)


def sm_number(gpu: str) -> int:
    return int(gpu.split("_", 1)[1].rstrip("abf"))


def check_gpu_names(gpus: tuple[str, ...]) -> None:
    for gpu in gpus:
        if gpu not in GPU_NAMES:
            raise PlanError(f"unknown GPU name '{gpu}'; supported: {' '.join(GPU_NAMES)}")
    seen: set[str] = set()
    for gpu in gpus:
        if gpu in seen:
            raise PlanError(f"GPU name '{gpu}' is listed twice")
        seen.add(gpu)


def parse_opt_level(value: int | str) -> int:
    try:
        level = int(value)
    except (TypeError, ValueError):
        level = -1
    if level not in OPT_LEVELS or str(value).strip() not in {str(o) for o in OPT_LEVELS}:
        raise PlanError(f"OPT_LEVEL must be one of {' '.join(map(str, OPT_LEVELS))}, got '{value}'")
    return level


def check_path(path: str, what: str) -> None:
    if not path:
        raise PlanError(f"{what} path is empty")
    bad = [c for c in FORBIDDEN_PATH_CHARS if c in path]
    if bad:
        raise PlanError(f"{what} path {path!r} contains {bad[0]!r}, which build files cannot carry")


def check_source(path: str) -> None:
    check_path(path, "source")
    if not path.endswith(SOURCE_SUFFIXES):
        raise PlanError(f"source '{path}' is not TileIR: expected one of {' '.join(SOURCE_SUFFIXES)}")


def check_header(name: str) -> None:
    check_path(name, "header")
    parts = name.replace("\\", "/").split("/")
    if os.path.isabs(name) or ".." in parts or "" in parts:
        raise PlanError(f"header '{name}' must be a relative file name without '..', e.g. kernels.h")
    if not name.endswith(HEADER_SUFFIXES):
        raise PlanError(f"header '{name}' must end in {' or '.join(HEADER_SUFFIXES)}")
