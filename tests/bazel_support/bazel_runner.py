"""Run Bazel offline in a throw-away output root (tests and benchmarks).

Every Bazel state a run creates (server, output base, repository cache) lives
under one directory the caller owns; `shutdown()` stops the server. The
@tileiras repository is pointed at this checkout and the downloaded
repositories at the local stand-ins (offline_bazelrc.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from offline_bazelrc import offline_bazelrc_text

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_DIR = REPO_ROOT / "examples" / "bazel"


def bazel_executable() -> str | None:
    return shutil.which("bazel")


def copy_example(dest: Path) -> Path:
    """A private copy of examples/bazel (tests edit kernels; the tree stays clean)."""
    shutil.copytree(EXAMPLE_DIR, dest, ignore=shutil.ignore_patterns("bazel-*", "__pycache__"))
    return dest


@dataclass
class Bazel:
    """One workspace, one private Bazel server under `state_dir`."""

    workspace: Path
    state_dir: Path
    python: str = sys.executable
    extra_rc: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        rc = offline_bazelrc_text()
        # The workspace's local_repository(name = "tileiras") points somewhere
        # else in a copy; this checkout is the one under test.
        rc += "".join(f"{cmd} --override_repository=tileiras={REPO_ROOT}\n" for cmd in ("build", "query", "fetch", "sync"))
        rc += "build --symlink_prefix=/\n"  # no bazel-* links in the workspace
        rc += "build --nosandbox_debug\n"  # Debian's /etc/bazel/bazelrc turns it on
        rc += "".join(line + "\n" for line in self.extra_rc)
        self.rc_path = self.state_dir / "test.bazelrc"
        self.rc_path.write_text(rc)

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["TILEIRAS_PYTHON"] = self.python
        env.pop("USE_BAZEL_VERSION", None)
        return env

    def startup(self) -> list[str]:
        return [
            bazel_executable() or "bazel",
            f"--output_user_root={self.state_dir / 'root'}",
            f"--bazelrc={self.rc_path}",
            "--host_jvm_args=-Xmx2g",
        ]

    def run(self, *args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(self.startup() + list(args), cwd=self.workspace, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"bazel {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
        return proc

    def info(self, key: str) -> str:
        return self.run("info", key).stdout.strip()

    def shutdown(self) -> None:
        subprocess.run(self.startup() + ["shutdown"], cwd=self.workspace, env=self.env,
                       capture_output=True, text=True, timeout=120)


def read_execution_log(path: Path) -> list[dict]:
    """Spawns from --execution_log_json_file (a stream of JSON objects, not a list)."""
    text = path.read_text()
    decoder = json.JSONDecoder()
    spawns, pos = [], 0
    while pos < len(text):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        obj, pos = decoder.raw_decode(text, pos)
        spawns.append(obj)
    return spawns


def spawn_outputs(spawn: dict) -> list[str]:
    return [out["path"] for out in spawn.get("actualOutputs", [])] or list(spawn.get("listedOutputs", []))


FAKE_COMPILER_DIR = Path(__file__).resolve().parent / "fake_compiler"

FAKE_WORKSPACE = """\
workspace(name = "fake_toolchain_test")

local_repository(name = "tileiras", path = "/nonexistent/overridden/by/the/test")

# Registered before tileiras_dependencies(): the first matching toolchain wins.
register_toolchains("//:fake_toolchain")

load("@tileiras//bazel:repositories.bzl", "tileiras_dependencies")

tileiras_dependencies()
"""

FAKE_BUILD = """\
load("@tileiras//bazel:defs.bzl", "tileir_library")
load("@tileiras//bazel:toolchain.bzl", "tileir_toolchain")

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

FAKE_APP = """\
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
    """A workspace whose tileir_library runs the fake compiler (no real compile)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(FAKE_COMPILER_DIR, dest / "fake_compiler", ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "WORKSPACE").write_text(FAKE_WORKSPACE)
    (dest / "BUILD.bazel").write_text(FAKE_BUILD)
    (dest / "app.c").write_text(FAKE_APP)
    (dest / "alpha.tileirbc").write_bytes(b"alpha v1")
    (dest / "beta.tileirbc").write_bytes(b"beta v1")
    return dest
