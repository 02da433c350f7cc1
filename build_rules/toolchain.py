"""How a build system runs the compiler, and which files make up the compiler.

The compiler is the `tileiras` and `build_rules` packages under one root: a
source checkout or the site-packages the wheel was installed into. Build
systems make every action depend on these files (CMake through a fingerprint
stamp, Bazel through the toolchain's inputs), so a compiler upgrade rebuilds.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

COMPILER_PACKAGES: tuple[str, ...] = ("tileiras", "build_rules")
# Files inside the packages that are not the compiler (the CMake package the
# wheel installs under tileiras/ does not change what a compile produces).
NOT_COMPILER_DIRS: tuple[str, ...] = ("__pycache__", "cmake_prefix")
# Modules the compiler imports at run time: checked when a build system
# configures, so a wrong Python fails there with a clear message, not at build time.
RUNTIME_MODULES: tuple[str, ...] = ("llvmlite", "numpy", "ml_dtypes")


def package_root() -> Path:
    """The directory that holds the tileiras and build_rules packages."""
    return Path(__file__).resolve().parent.parent


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


def compiler_files(root: Path | None = None) -> list[Path]:
    """Every file of the compiler packages, sorted (no bytecode caches, no CMake package)."""
    base = root or package_root()
    files: list[Path] = []
    for package in COMPILER_PACKAGES:
        for directory, dirs, names in os.walk(base / package):
            dirs[:] = sorted(d for d in dirs if d not in NOT_COMPILER_DIRS and not d.startswith("."))
            files += [Path(directory) / name for name in names
                      if not name.startswith(".") and not name.endswith((".pyc", ".pyo"))]
    return sorted(files)


def fingerprint(files: list[Path], root: Path | None = None) -> str:
    """A digest of the compiler: changes exactly when one of its files' content, name or set changes."""
    base = root or package_root()
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(base).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def missing_runtime_modules() -> list[str]:
    """Runtime dependencies this Python cannot import (found without importing them)."""
    return [name for name in RUNTIME_MODULES if importlib.util.find_spec(name) is None]


def compiler_version() -> str:
    from tileiras import __version__

    return __version__
