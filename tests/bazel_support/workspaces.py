"""Throw-away Bazel workspaces the Bazel tests build (all offline)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from bazel_runner import REPO_ROOT

EXAMPLE_DIR = REPO_ROOT / "examples" / "bazel"
FAKE_COMPILER_DIR = Path(__file__).resolve().parent / "fake_compiler"


def copy_example(dest: Path) -> Path:
    """A private copy of examples/bazel (tests edit kernels; the tree stays clean)."""
    shutil.copytree(EXAMPLE_DIR, dest, ignore=shutil.ignore_patterns("bazel-*", "__pycache__", "user.bazelrc"))
    return dest


def set_gpu_names(workspace: Path, gpu_names: list[str]) -> None:
    """Rewrite the example's `gpu_names = [...]`."""
    build = workspace / "BUILD.bazel"
    text, count = re.subn(r"gpu_names = \[[^\]]*\]", "gpu_names = %s" % repr(gpu_names).replace("'", '"'),
                          build.read_text())
    assert count == 1, "examples/bazel/BUILD.bazel must set gpu_names exactly once"
    build.write_text(text)


_WORKSPACE = """\
workspace(name = "{name}")

local_repository(name = "tileiras", path = "/overridden/by/--override_repository")
{register}
load("@tileiras//bazel:repositories.bzl", "tileiras_dependencies")

tileiras_dependencies()
"""

_FAKE_BUILD = """\
load("@tileiras//bazel:defs.bzl", "tileir_library")
load("@tileiras//bazel:toolchain.bzl", "tileir_toolchain")

# A user-registered compiler build: the fake compiler, run by the host Python.
tileir_toolchain(
    name = "fake_impl",
    interpreter = "@tileiras_python//:python3",
    launcher = "fake_compiler/fake_launch.py",
    srcs = glob(["fake_compiler/*.py"]),
)

toolchain(
    name = "fake_toolchain",
    toolchain = ":fake_impl",
    toolchain_type = "@tileiras//bazel:toolchain_type",
)

# The same compiler as prebuilt executables (picked with --extra_toolchains).
tileir_toolchain(
    name = "prebuilt_impl",
    tileiras = "fake_compiler/tileiras.sh",
    tileir = "fake_compiler/tileir.sh",
    srcs = glob(["fake_compiler/*.py"]),
)

toolchain(
    name = "prebuilt_toolchain",
    toolchain = ":prebuilt_impl",
    toolchain_type = "@tileiras//bazel:toolchain_type",
)

tileir_library(
    name = "kernels",
    srcs = ["alpha.tileirbc", "beta.tileirbc"],
    gpu_names = ["sm_90", "sm_100"],
)

cc_binary(
    name = "app",
    srcs = ["app.c"],
    deps = [":kernels"],
)
"""

_FAKE_APP = """\
#include <stdio.h>
#include "kernels.h"

int main(void) {
    int a = alpha_launch(0, 1, 1, 1, 0);
    int b = beta_launch(0, 1, 1, 1, 0);
    printf("alpha=%d beta=%d no_driver=%d\\n", a, b, TILEIR_ERROR_NO_DRIVER);
    return (a == TILEIR_ERROR_NO_DRIVER && b == TILEIR_ERROR_NO_DRIVER) ? 0 : 1;
}
"""


def make_fake_workspace(dest: Path) -> Path:
    """A workspace whose tileir_library runs the fake compiler through a user toolchain."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(FAKE_COMPILER_DIR, dest / "fake_compiler", ignore=shutil.ignore_patterns("__pycache__"))
    # Registered before tileiras_dependencies(): the first matching toolchain wins.
    register = '\nregister_toolchains("//:fake_toolchain")\n'
    (dest / "WORKSPACE").write_text(_WORKSPACE.format(name="fake_toolchain_test", register=register))
    (dest / "BUILD.bazel").write_text(_FAKE_BUILD)
    (dest / "app.c").write_text(_FAKE_APP)
    for tool in ("tileiras", "tileir"):  # prebuilt tools: scripts that run the fake with this Python
        script = dest / "fake_compiler" / f"{tool}.sh"
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -B "$(dirname "$0")/fake_launch.py" {tool} "$@"\n')
        script.chmod(0o755)
    (dest / "alpha.tileirbc").write_bytes(b"alpha v1")
    (dest / "beta.tileirbc").write_bytes(b"beta v1")
    return dest


# Targets that must fail at analysis, with the message each must print.
BAD_TARGETS: dict[str, tuple[str, str]] = {
    "bad_gpu": ('gpu_names = ["sm_90", "sm_91"]', "unknown GPU name 'sm_91' in gpu_names; supported: sm_80 sm_86"),
    "twice_gpu": ('gpu_names = ["sm_90", "sm_90"]', "GPU name 'sm_90' is listed twice in gpu_names"),
    "empty_gpu": ("gpu_names = []", "gpu_names is empty; supported: sm_80"),
    "bad_opt": ("opt_level = 4", "opt_level must be one of 0 1 2 3, got '4'"),
    "debug_opt": ("device_debug = True", "device_debug needs opt_level 0 (optimized device debugging is not supported)"),
    "bad_header": ('header = "kernels.txt"', "header 'kernels.txt' must end in .h or .hpp"),
    "escaping_header": ('header = "../kernels.h"', "header '../kernels.h' must be a relative file name without '..'"),
}


def make_bad_options_workspace(dest: Path) -> Path:
    """One tileir_library per entry of BAD_TARGETS (plus a good one), on the default toolchain."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "WORKSPACE").write_text(_WORKSPACE.format(name="bad_options_test", register=""))
    (dest / "k.tileirbc").write_bytes((EXAMPLE_DIR / "kernels" / "vadd.tileirbc").read_bytes())
    rules = ['load("@tileiras//bazel:defs.bzl", "tileir_library")\n',
             'tileir_library(name = "good", srcs = ["k.tileirbc"], gpu_names = ["sm_90", "sm_100"])\n']
    for name, (attr, _) in BAD_TARGETS.items():
        rules.append(f'tileir_library(name = "{name}", srcs = ["k.tileirbc"], {attr})\n')
    (dest / "BUILD.bazel").write_text("\n".join(rules))
    return dest
