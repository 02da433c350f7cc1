"""A BuildGrid REAPI server on loopback for the tests: bounded and self-stopping.

`buildgrid_server(dir)` starts `bgd server start scripts/remote-cache.yml` on a
free 127.0.0.1 port (under `timeout`, so a server outlives no test run by more
than its limit), waits until it answers, yields its grpc:// URL and stops it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG = REPO_ROOT / "scripts" / "remote-cache.yml"
START_SECONDS = 60.0
LIFETIME_SECONDS = 1800


def bgd_executable() -> str:
    """BuildGrid's `bgd`; a missing one is a failure with the fix in it, not a skip."""
    beside = Path(sys.executable).parent / "bgd"
    found = str(beside) if beside.is_file() else shutil.which("bgd")
    if not found:
        raise AssertionError("BuildGrid is not installed: .venv/bin/pip install 'buildgrid>=0.4.4' (in .[test])")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def buildgrid_server(state_dir: Path, lifetime: int = LIFETIME_SECONDS) -> Iterator[str]:
    state_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = dict(os.environ, TILEIRAS_REMOTE_PORT=str(port), TILEIRAS_REMOTE_DIR=str(state_dir))
    log = open(state_dir / "bgd.log", "wb")
    proc = subprocess.Popen(["timeout", str(lifetime), bgd_executable(), "server", "start", str(CONFIG)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + START_SECONDS
        while not _listening(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"BuildGrid did not start:\n{(state_dir / 'bgd.log').read_text()[-4000:]}")
            time.sleep(0.2)
        yield f"grpc://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
