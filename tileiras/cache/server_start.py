"""Starting the cache server (server.py) from an action that found none.

Kept apart from the server so that launch.py, which calls it before every
action the server did not answer, imports only os and fcntl for it.
"""

from __future__ import annotations

import os
import time

# A server that stopped within this many seconds of its start (it could not
# bind its socket, say) is not started again before they have passed: one
# attempt per action would cost every action a Python start-up.
RESTART_BACKOFF_S = 10.0


def lock_path(socket_path: str) -> str:
    """The lock a running server holds: at most one server per socket."""
    return socket_path + ".lock"


def start_in_background(socket_path: str, program: str, launcher: str) -> bool:
    """Start a server for `socket_path` unless one runs or is starting; True when started here.

    The server runs as `program launcher cache-server ...`, detached from the
    build (its own session, no standard streams, so the build tool does not
    wait for it), and inherits the locked lock file, which it holds while it lives.
    """
    try:
        import fcntl
    except ImportError:  # no flock (Windows): no server
        return False
    try:
        os.makedirs(os.path.dirname(os.path.abspath(socket_path)), exist_ok=True)
        fd = os.open(lock_path(socket_path), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a server holds it
        # The lock file records when a server was last started here.
        last = os.read(fd, 64).decode("ascii", "replace").strip()
        now = time.time()
        try:
            if 0 <= now - float(last) < RESTART_BACKOFF_S:
                return False
        except ValueError:
            pass  # never started here
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{now:.3f}\n".encode(), 0)
        import subprocess

        env = {k: v for k, v in os.environ.items() if k != "TILEIRAS_SERVER_SOCKET"}
        subprocess.Popen([program, launcher, "cache-server", socket_path, "--expect", program, launcher,
                          "--lock-fd", str(fd)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, pass_fds=(fd,), start_new_session=True, env=env)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # the server's inherited descriptor keeps the lock
