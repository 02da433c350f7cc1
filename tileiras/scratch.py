"""Temporary folders: all of one process's under a folder of its own, none left behind.

    <temp dir>/tileiras-<uid>/<pid namespace>-<pid>-<start time>/<prefix><random>/

A run removes each folder when done with it, and its own folder with the
last one. A run that was killed (kill -9, an OOM kill, a power cut) cannot;
the next run that needs a temporary folder removes the folders of owners
that are dead: the pid is gone, or now names a process that started at
another time. Folders of other pid namespaces (containers sharing /tmp)
are left alone: their owners cannot be seen from here.

`tileiras-<uid>` is private (0700) and must be a real folder owned by this
user; when it is not (someone else made it, or made it a link), the run
uses a fresh private folder of its own instead.
"""

from __future__ import annotations

import os
import stat
import sys

_ROOT_PREFIX = "tileiras-"
_own: str | None = None     # this process's folder, while it exists
_users = 0                  # TempDirs open in it
_swept = False              # dead owners' folders are reclaimed once per process


def _start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, Linux), '0' where that cannot be
    known, None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()  # field 22 of proc(5); fields[0] is field 3
    except FileNotFoundError:
        return None
    except (OSError, IndexError):
        pass
    if sys.platform == "win32":  # os.kill(pid, 0) would send CTRL_C_EVENT: never judge owners there
        return "0"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        pass  # exists, but not ours to signal
    return "0"


def _namespace() -> str:
    try:
        link = os.readlink("/proc/self/ns/pid")  # 'pid:[4026531836]'
    except OSError:
        return "0"
    return "".join(ch for ch in link if ch.isdigit()) or "0"


def _folder_name(pid: int) -> str:
    return f"{_namespace()}-{pid}-{_start_time(pid) or '0'}"


def owner_alive(name: str) -> bool:
    """Whether the process that made folder `name` (in this pid namespace) still runs; True for
    names that are not ours to judge."""
    parts = name.split("-")
    if len(parts) != 3 or parts[0] != _namespace() or not parts[1].isdigit():
        return True
    start = _start_time(int(parts[1]))
    return start is not None and (start == parts[2] or "0" in (start, parts[2]))


def _uid() -> str:
    getuid = getattr(os, "getuid", None)
    return str(getuid()) if getuid is not None else os.environ.get("USERNAME", "user")


def _temp_dir() -> str:
    """tempfile.gettempdir(), without importing tempfile (and its shutil, random: ~7 ms a compile)
    in the usual case: a $TMPDIR/$TEMP/$TMP, else /tmp, that is a writable folder."""
    if "tempfile" not in sys.modules:  # once imported, its answer (and any tempfile.tempdir) rules
        names = [os.environ.get(var) for var in ("TMPDIR", "TEMP", "TMP")]
        for name in [n for n in names if n] + (["/tmp"] if os.name == "posix" else []):
            if os.path.isdir(name) and os.access(name, os.W_OK | os.X_OK):
                return os.path.abspath(name)
    import tempfile

    return tempfile.gettempdir()


def _private_root() -> str | None:
    """`<temp dir>/tileiras-<uid>`, made if missing; None when it exists but is not safely ours."""
    root = os.path.join(_temp_dir(), _ROOT_PREFIX + _uid())
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(root)
    except OSError:
        return None
    getuid = getattr(os, "getuid", None)
    if not stat.S_ISDIR(st.st_mode) or (getuid is not None and st.st_uid != getuid()) \
            or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    return root


def reclaim(root: str) -> None:
    """Remove the folders under `root` whose owners are dead."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    mine = os.path.basename(_own or "")
    for name in names:
        if name != mine and not owner_alive(name):
            import shutil

            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def process_folder() -> str:
    """This process's folder (made on first use)."""
    global _own, _swept
    if _own is not None and os.path.isdir(_own):
        return _own
    root = _private_root()
    if root is None:
        import tempfile

        _own = tempfile.mkdtemp(prefix=_ROOT_PREFIX)
        return _own
    if not _swept:
        _swept = True
        reclaim(root)
    _own = os.path.join(root, _folder_name(os.getpid()))
    os.makedirs(_own, 0o700, exist_ok=True)
    return _own


def _remove_tree(path: str) -> None:
    """shutil.rmtree(path, ignore_errors=True), without importing shutil for a flat folder (a
    ptxas run's: its PTX, object and cubin)."""
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    raise IsADirectoryError(entry.path)
                os.unlink(entry.path)
        os.rmdir(path)
    except OSError:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


class TempDir:
    """A new private folder in this process's folder; `cleanup` removes both when it is the last.
    Stands in for tempfile.TemporaryDirectory: `.name`, `cleanup()`, a context manager."""

    def __init__(self, prefix: str = "tmp-") -> None:
        global _users
        parent = process_folder()
        for _ in range(100):
            path = os.path.join(parent, prefix + os.urandom(6).hex())
            try:
                os.mkdir(path, 0o700)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"no free temporary folder name in {parent}")
        self.name = path
        _users += 1
        self._open = True

    def cleanup(self) -> None:
        global _users, _own
        if not self._open:
            return
        self._open = False
        _remove_tree(self.name)
        _users -= 1
        if _users == 0 and _own is not None:
            try:
                os.rmdir(_own)  # only when empty: never another user's file
            except OSError:
                pass
            else:
                _own = None

    def __enter__(self) -> str:
        return self.name

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

