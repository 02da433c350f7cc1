"""Running a command as an unprivileged user, for the safety tests.

Where the suite runs as root (containers, CI), the cases that depend on
permissions run as `nobody`; where it already runs unprivileged, as itself.
`nobody` needs a Python it may execute: this suite's own, else the system's
python3 (a pyenv under /root is out of its reach). Tests that need one skip
with the reason where there is none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _nobody() -> tuple[int, int] | None:
    try:
        import pwd

        entry = pwd.getpwnam("nobody")
    except (ImportError, KeyError):
        return None
    return entry.pw_uid, entry.pw_gid


def _as_user_kwargs() -> dict[str, object]:
    if os.geteuid() != 0:
        return {}
    ids = _nobody()
    if ids is None:
        pytest.skip("running as root and no 'nobody' user exists to run the unprivileged case")
    return {"user": ids[0], "group": ids[1], "extra_groups": []}


def unprivileged_python() -> str:
    """A Python >= 3.10 the unprivileged user can run (skips the test where there is none)."""
    kwargs = _as_user_kwargs()
    candidates = [sys.executable, shutil.which("python3") or "", "/usr/bin/python3"]
    for python in dict.fromkeys(c for c in candidates if c):
        try:
            done = subprocess.run([python, "-c", "import sys; assert sys.version_info >= (3, 10)"], cwd="/",
                                  capture_output=True, timeout=60, **kwargs)  # type: ignore[arg-type]
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return python
    pytest.skip("no Python >= 3.10 that the unprivileged user may execute")


def as_unprivileged(python: str, args: list[str], cwd: Path, env: dict[str, str] | None = None,
                    timeout: float = 120) -> subprocess.CompletedProcess:
    """`python args...` as the unprivileged user, with this checkout importable."""
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT),
                   "HOME": str(cwd), "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    return subprocess.run([python, *args], capture_output=True, text=True, cwd=cwd, env=environment,
                          timeout=timeout, **_as_user_kwargs())  # type: ignore[arg-type]


@pytest.fixture
def shared_tmp() -> Path:
    """A fresh folder the unprivileged user can reach (pytest's tmp_path sits under a 0700 root)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="tileiras-safety-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
