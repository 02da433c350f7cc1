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


def bazel_executable() -> str:
    """The `bazel` to run; a missing one is a test failure with the fix in it, not a skip."""
    found = shutil.which("bazel")
    if not found:
        raise AssertionError("bazel is not installed: apt-get install -y bazel-bootstrap (Debian, Bazel 4.2.3)")
    return found


@dataclass
class Bazel:
    """One workspace, one private Bazel server under `state_dir`."""

    workspace: Path
    state_dir: Path
    python: str = sys.executable
    extra_rc: list[str] = field(default_factory=list)
    tileiras_root: Path = REPO_ROOT  # the checkout @tileiras points at

    def __post_init__(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        rc = offline_bazelrc_text()
        # The workspace's local_repository(name = "tileiras") points somewhere
        # else in a copy; this checkout is the one under test.
        rc += "".join(f"{cmd} --override_repository=tileiras={self.tileiras_root}\n"
                      for cmd in ("build", "query", "fetch", "sync"))
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
            bazel_executable(),
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



def aquery_actions(jsonproto: str) -> list[dict]:
    """Actions of `bazel aquery --output=jsonproto` with their paths spelled out."""
    data = json.loads(jsonproto or "{}")
    fragments = {f["id"]: f for f in data.get("pathFragments", [])}
    artifacts = {a["id"]: a for a in data.get("artifacts", [])}
    depsets = {d["id"]: d for d in data.get("depSetOfFiles", [])}

    def path(artifact_id: int) -> str:
        parts, frag = [], fragments.get(artifacts[artifact_id]["pathFragmentId"])
        while frag:
            parts.append(frag["label"])
            frag = fragments.get(frag.get("parentId"))
        return "/".join(reversed(parts))

    def files(depset_ids: list[int]) -> list[str]:
        out: list[str] = []
        for depset_id in depset_ids:
            entry = depsets[depset_id]
            out += [path(a) for a in entry.get("directArtifactIds", [])]
            out += files(entry.get("transitiveDepSetIds", []))
        return out

    return [{
        "mnemonic": action["mnemonic"],
        "arguments": action.get("arguments", []),
        "inputs": sorted(set(files(action.get("inputDepSetIds", [])))),
        "outputs": sorted(path(a) for a in action.get("outputIds", [])),
        "env": {e["key"]: e["value"] for e in action.get("environmentVariables", [])},
    } for action in data.get("actions", [])]
