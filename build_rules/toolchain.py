"""How a build system runs the compiler, and which files make up the compiler.

The compiler is the `tileiras` and `build_rules` packages under one root: a
source checkout or the site-packages the wheel was installed into (see
tileiras.cache.compiler_files, which the compile cache's keys use too). Build
systems make every action depend on these files (CMake through a fingerprint
stamp, Bazel through the toolchain's inputs), so a compiler upgrade rebuilds.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from tileiras.cache.compiler_files import compiler_files, fingerprint, package_root  # noqa: F401  (re-exported)

# Modules the compiler imports at run time: checked when a build system
# configures, so a wrong Python fails there with a clear message, not at build time.
RUNTIME_MODULES: tuple[str, ...] = ("llvmlite", "numpy", "ml_dtypes")


def launcher_path() -> Path:
    return Path(__file__).resolve().parent / "launch.py"


@dataclass(frozen=True)
class Toolchain:
    """The argv prefix that runs each tool of the chain."""

    tileiras: tuple[str, ...]
    tileir: tuple[str, ...]

    def command(self, tool: str) -> tuple[str, ...]:
        return {"tileiras": self.tileiras, "tileir": self.tileir}[tool]


def default_toolchain(python: str | None = None) -> Toolchain:
    """Run the tools through launch.py with this (or the given) Python."""
    interpreter = python or sys.executable
    launcher = str(launcher_path())
    return Toolchain((interpreter, launcher, "tileiras"), (interpreter, launcher, "tileir"))


def missing_runtime_modules() -> list[str]:
    """Runtime dependencies this Python cannot import (found without importing them)."""
    return [name for name in RUNTIME_MODULES if importlib.util.find_spec(name) is None]


def compiler_version() -> str:
    from tileiras import __version__

    return __version__
