"""The cache serves only what its key names, and never hangs, crashes or fails a compile, whatever
sits in its folder and whoever owns it (issues 17 and 18). Permission cases run as an unprivileged
user: as root, in a child process that drops to `nobody`."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tileiras.cache.entry import HEADER, MAX_BYTES
from tileiras.cache.store import Cache

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "bytecode"
KERNEL_A = CORPUS / "ew_float" / "13.4.tileirbc"
KERNEL_B = CORPUS / "softmax" / "13.4.tileirbc"
KEY = "ab" * 32
NOBODY = 65534
WARNING = "tileiras: warning:"


def entry_path(root: Path, key: str = KEY) -> Path:
    return root / "v1" / key[:2] / key


def tileiras(*args: str, env: dict[str, str] | None = None, user: list[str] | None = None,
             tool: str = "tileiras.driver.tileiras_main") -> subprocess.CompletedProcess[str]:
    """Run a tool of this checkout; `user` is the command prefix that runs it as another user.
    A compile that takes minutes is hanging (on a FIFO): the time limit makes that a failure."""
    return subprocess.run([*(user or []), sys.executable, "-m", tool, *args], capture_output=True, text=True,
                          timeout=180, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def warnings_in(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(WARNING)]


def entries(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in (root / "v1").rglob("*") if path.is_file()}


# --- entries that cannot lie ---------------------------------------------------------------


def test_an_entry_copied_over_another_is_a_miss_with_one_warning(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    cache = Cache(tmp_path)
    other = "cd" * 32
    cache.put(KEY, b"kernel a's cubin")
    cache.put(other, b"kernel b's cubin")
    shutil.copyfile(entry_path(tmp_path, other), entry_path(tmp_path, KEY))
    assert cache.get(KEY) is None and cache.get(other) == b"kernel b's cubin"
    [warning] = capsys.readouterr().err.splitlines()
    assert "records another key" in warning and other[:16] in warning
    assert not entry_path(tmp_path, KEY).exists()  # the impostor is gone; the next compile stores the real one


def _compile(kernel: Path, out: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return tileiras("--gpu-name", "sm_90", str(kernel), "-o", str(out), env={"TILEIRAS_CACHE_DIR": str(cache)})


@pytest.mark.parametrize("swapped", ["cubin", "every entry"])
def test_a_swapped_entry_never_becomes_an_output(tmp_path: Path, swapped: str) -> None:
    cache = tmp_path / "cache"
    assert _compile(KERNEL_A, tmp_path / "a.cubin", cache).returncode == 0
    of_a = entries(cache)
    assert _compile(KERNEL_B, tmp_path / "b.cubin", cache).returncode == 0
    of_b = {path: data for path, data in entries(cache).items() if path not in of_a}
    assert len(of_a) == len(of_b) == 2  # PTX and cubin of each
    cubin = b"\x7fELF"
    for path_a, data_a in of_a.items():
        is_cubin = cubin in data_a[:HEADER.size + 200]
        if swapped == "every entry" or is_cubin:
            data_b = next(d for d in of_b.values() if (cubin in d[:HEADER.size + 200]) == is_cubin)
            path_a.write_bytes(data_b)  # kernel b's entry under kernel a's key
    again = _compile(KERNEL_A, tmp_path / "again.cubin", cache)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.cubin").read_bytes() == (tmp_path / "a.cubin").read_bytes()
    [warning] = warnings_in(again.stderr)
    assert "records another key" in warning
    assert entries(cache) == {**of_a, **of_b}  # the right entries are back in place


# --- whatever sits at an entry's path --------------------------------------------------------


def _fifo(path: Path, outside: Path) -> None:
    os.mkfifo(path)


def _link_to_dev_zero(path: Path, outside: Path) -> None:
    path.symlink_to("/dev/zero")


def _link_to_a_valid_entry_outside(path: Path, outside: Path) -> None:
    path.symlink_to(outside / KEY)


def _folder(path: Path, outside: Path) -> None:
    path.mkdir()
    (path / "file").write_bytes(b"not an entry")


def _socket(path: Path, outside: Path) -> None:
    server, home = socket.socket(socket.AF_UNIX), os.getcwd()
    os.chdir(path.parent)  # a socket's path is limited to ~100 bytes: bind the bare name
    try:
        server.bind(path.name)
    finally:
        os.chdir(home)
        server.close()


def _huge_sparse_file(path: Path, outside: Path) -> None:
    with open(path, "wb") as handle:
        handle.truncate(MAX_BYTES + 1)


def _shard_is_a_link(path: Path, outside: Path) -> None:
    shutil.rmtree(path.parent)
    path.parent.symlink_to(outside)


def _layout_is_a_link(path: Path, outside: Path) -> None:
    shutil.rmtree(path.parent.parent)
    (outside / path.parent.name).mkdir()
    shutil.copyfile(outside / KEY, outside / path.parent.name / KEY)
    path.parent.parent.symlink_to(outside)


def _shard_is_a_file(path: Path, outside: Path) -> None:
    shutil.rmtree(path.parent)
    path.parent.write_bytes(b"not a folder")


# name -> (make it, whether the entry's name is removed on the way)
STATES: dict[str, tuple[Callable[[Path, Path], None], bool]] = {
    "fifo": (_fifo, True),
    "link to /dev/zero": (_link_to_dev_zero, True),
    "link to a valid entry outside the cache": (_link_to_a_valid_entry_outside, True),
    "folder": (_folder, False),
    "socket": (_socket, True),
    "file larger than any entry": (_huge_sparse_file, True),
    "shard folder is a link": (_shard_is_a_link, False),
    "layout folder is a link": (_layout_is_a_link, False),
    "shard folder is a file": (_shard_is_a_file, False),
}
GET_SCRIPT = """
import sys
from tileiras.cache.store import Cache
cache = Cache(sys.argv[1])
print(cache.get(sys.argv[2]))
cache.put(sys.argv[2], b"stored again")
"""


@pytest.mark.parametrize("state", sorted(STATES))
def test_anything_but_an_entry_at_its_path_is_a_miss_with_one_warning(tmp_path: Path, state: str) -> None:
    make, removed = STATES[state]
    root, outside = tmp_path / "cache", tmp_path / "outside"
    outside.mkdir()
    Cache(outside).put(KEY, b"a valid entry of this key, outside the cache")
    shutil.move(str(entry_path(outside)), outside / KEY)
    Cache(root).put(KEY, b"to be replaced")
    path = entry_path(root)
    path.unlink()
    make(path, outside)
    # In a child with a time limit: a FIFO opened for reading blocks until a writer comes.
    done = subprocess.run([sys.executable, "-c", GET_SCRIPT, str(root), KEY], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"
    assert len(warnings_in(done.stderr)) == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    assert Path("/dev/zero").is_char_device() and (outside / KEY).stat().st_size > 0  # targets untouched
    if removed:  # the name was unlinked and the real entry written in its place
        assert Cache(root).get(KEY) == b"stored again"
    cache = Cache(root)
    cache.clear()  # whatever is left goes
    assert cache.problems == []
    assert all(p.is_dir() and not p.is_symlink() and not any(p.iterdir()) for p in (root / "v1").rglob("*"))
    assert (outside / KEY).is_file()


def test_clear_and_trim_remove_whatever_is_in_the_cache_folder(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    for i in range(4):
        cache.put(f"{i:02x}" * 32, b"payload")
    shard = entry_path(tmp_path, "00" * 32).parent
    os.mkfifo(shard / ("ee" * 32))
    (shard / ("ef" * 32)).symlink_to("/dev/zero")
    (shard / ("f0" * 32)).mkdir()
    (shard / ("f0" * 32) / "deep").mkdir()
    (shard / ("f0" * 32) / "deep" / "file").write_bytes(b"x")
    (shard / "stray name").write_bytes(b"x")
    (tmp_path / "v1" / "zz").mkdir()
    (tmp_path / "v1" / "aa").write_bytes(b"a file where a shard folder goes")
    (tmp_path / "v1" / "link").symlink_to(tmp_path.parent)
    assert cache.stats().other == 7
    assert cache.trim() == 0 and cache.problems == []
    after = cache.stats()
    assert (after.entries, after.other) == (4, 0)
    (shard / ("f1" * 32)).mkdir()
    os.mkfifo(shard / ("f2" * 32))
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", "cache", "clear", "--cache-dir",
                           str(tmp_path)], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0 and "removed 4 entries" in done.stdout, done.stderr
    left = [p for p in (tmp_path / "v1").rglob("*") if not p.is_dir() or p.is_symlink()]
    assert left == [] and all(p.parent.parent == tmp_path / "v1" or p.parent == tmp_path / "v1"
                              for p in (tmp_path / "v1").rglob("*"))
    assert tmp_path.parent.is_dir()  # the link was removed, not what it pointed to


def test_a_fifo_at_an_entry_path_does_not_hang_a_compile(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert _compile(KERNEL_A, tmp_path / "a.cubin", cache).returncode == 0
    for path in entries(cache):
        path.unlink()
        os.mkfifo(path)
    again = _compile(KERNEL_A, tmp_path / "again.cubin", cache)  # times out (a failure) if it hangs
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.cubin").read_bytes() == (tmp_path / "a.cubin").read_bytes()
    assert len(warnings_in(again.stderr)) == 1
    names = [p for p in (cache / "v1").rglob("*") if not p.is_dir()]
    assert len(names) == 2 and all(stat.S_ISREG(p.lstat().st_mode) for p in names)  # real entries again


# --- permissions, as an unprivileged user -------------------------------------------------------


@pytest.fixture
def unprivileged() -> Iterator[tuple[Path, list[str]]]:
    """(a folder everyone may use, the command prefix that runs a command as an unprivileged user)."""
    if not hasattr(os, "geteuid"):
        pytest.skip("no POSIX users on this platform")
    user: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv (util-linux): cannot drop privileges")
        user = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    work = Path(tempfile.mkdtemp(prefix="tileiras-unprivileged-"))
    os.chmod(work, 0o777)
    probe = subprocess.run([*user, sys.executable, "-c", "import os, tileiras.cache.store, tileiras.codegen.ptxas; "
                            "print(os.geteuid())"], capture_output=True, text=True, cwd=work,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if probe.returncode != 0 or probe.stdout.strip() == "0":
        shutil.rmtree(work)
        pytest.skip(f"an unprivileged user cannot run this checkout's Python: {probe.stderr[-200:]}")
    try:
        yield work, user
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _reference_cubin(tmp_path: Path) -> bytes:
    done = tileiras("--gpu-name", "sm_90", str(KERNEL_A), "-o", str(tmp_path / "ref.cubin"), "--no-cache")
    assert done.returncode == 0, done.stderr
    return (tmp_path / "ref.cubin").read_bytes()


def test_an_unreadable_shard_folder_is_a_compile_without_the_cache(tmp_path: Path,
                                                                   unprivileged: tuple[Path, list[str]]) -> None:
    work, user = unprivileged
    cache = work / "cache"
    assert _compile(KERNEL_A, tmp_path / "warm.cubin", cache).returncode == 0  # as root: entries in two shards
    for path in {p.parent for p in entries(cache)}:
        os.chmod(path, 0o000)  # another user's umask, as unprivileged users see it
    os.chmod(cache, 0o777)
    os.chmod(cache / "v1", 0o777)
    for attempt in range(2):  # the second compile still finds the shards unreadable
        out = work / f"out{attempt}.cubin"
        done = tileiras("--gpu-name", "sm_90", str(KERNEL_A), "-o", str(out),
                        env={"TILEIRAS_CACHE_DIR": str(cache)}, user=user)
        assert done.returncode == 0, done.stderr
        assert out.read_bytes() == _reference_cubin(tmp_path)
        [warning] = warnings_in(done.stderr)
        assert "Permission denied" in warning and "internal compiler error" not in done.stderr


@pytest.mark.parametrize("location", ["chosen", "default"])
def test_a_read_only_cache_is_a_compile_without_it(tmp_path: Path, unprivileged: tuple[Path, list[str]],
                                                   location: str) -> None:
    work, user = unprivileged
    home = work / "home"
    (home / ".cache" / "tileiras").mkdir(parents=True)  # root's: read-only to the unprivileged user
    env = {"HOME": str(home), "XDG_CACHE_HOME": ""}
    if location == "chosen":
        env["TILEIRAS_CACHE_DIR"] = str(home / ".cache" / "tileiras")
    else:
        env["TILEIRAS_CACHE_DIR"] = ""  # as in a Bazel sandbox: the user's default cache, not writable there
    out = work / "out.cubin"
    done = tileiras("--gpu-name", "sm_90", str(KERNEL_A), "-o", str(out), env=env, user=user)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == _reference_cubin(tmp_path)
    expected = ["compile cache disabled: cannot write to"] if location == "chosen" else []
    assert [w.split("'")[0].removeprefix(WARNING).strip() for w in warnings_in(done.stderr)] == expected
    assert done.stderr.strip() == "\n".join(warnings_in(done.stderr))


def test_cache_clear_says_what_it_cannot_remove(tmp_path: Path, unprivileged: tuple[Path, list[str]]) -> None:
    work, user = unprivileged
    if not user:
        pytest.skip("needs root to make an entry that the unprivileged user cannot remove")
    cache = work / "cache"
    Cache(cache).put(KEY, b"root's entry")
    os.chmod(cache, 0o777)
    done = tileiras("cache", "clear", "--cache-dir", str(cache), user=user, tool="tileiras.driver.tileir_main")
    assert done.returncode == 5
    assert done.stderr.startswith("tileir cache: cannot remove") and "Permission denied" in done.stderr
    assert len(done.stderr.splitlines()) == 1 and entry_path(cache).exists()


@pytest.mark.parametrize("state", ["fifo", "link to /dev/zero"])
def test_the_tool_memo_is_read_only_when_it_is_a_regular_file(tmp_path: Path, state: str) -> None:
    from tileiras.cache.versions import MEMO_NAME

    memo = tmp_path / MEMO_NAME
    if state == "fifo":
        os.mkfifo(memo)
    else:
        memo.symlink_to("/dev/zero")
    # In a child with a time limit: reading the FIFO would block, reading /dev/zero would never end.
    script = "import sys; from pathlib import Path; from tileiras.cache import versions; " \
             "print(versions._load(Path(sys.argv[1])))"
    done = subprocess.run([sys.executable, "-c", script, str(memo)], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert (done.returncode, done.stdout.strip()) == (0, "{}"), done.stderr


def test_a_compiler_zip_made_just_before_the_compile_still_stores_its_outputs(tmp_path: Path, monkeypatch) -> None:
    """Bazel makes the compiler's zip right before the first compile action: a zip younger than the
    file system's tick is still the compiler the process runs (an action's input never changes
    under it), so its outputs are stored (they were not: Bazel put nothing in the remote tier on a
    fast machine); a zip rewritten after the first look is a change."""
    import os
    import time

    from tileiras.cache import compiler_files, versions

    archive = tmp_path / "compiler.zip"
    archive.write_bytes(b"PK\x05\x06" + bytes(18))
    monkeypatch.setattr(compiler_files, "package_root", lambda: str(archive))
    monkeypatch.setattr(versions, "_zip_stamp", None)
    opened = time.time_ns()
    assert versions.compiler_unchanged_since(opened)
    assert versions.compiler_unchanged_since(opened)
    os.utime(archive, ns=(opened + 10**9, opened + 10**9))
    assert not versions.compiler_unchanged_since(opened)


# --- an entry's header is checked before its payload is read (issue 37, item 10) -------------
def _sparse_entry(path: Path, head: bytes, size: int) -> None:
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(size)  # sparse: no disk space, but a whole read would take seconds and a GB


def _bytes_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import tileiras.cache.entry as entry_module

    counted: list[int] = []
    real = entry_module._read_fd

    def counting(fd: int, size: int) -> bytes:
        data = real(fd, size)
        counted.append(len(data))
        return data

    monkeypatch.setattr(entry_module, "_read_fd", counting)
    return counted


@pytest.mark.parametrize("head", ["foreign", "another key", "wrong size"])
def test_a_huge_sparse_entry_is_judged_by_its_header_before_it_is_read(
        tmp_path: Path, head: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from tileiras.cache.entry import wrap

    cache = Cache(tmp_path)
    cache.put(KEY, b"to be replaced")
    path = entry_path(tmp_path)
    good = wrap(KEY, b"payload")
    header = {"foreign": b"\x7fELF" + bytes(200), "another key": wrap("cd" * 32, b"payload"),
              "wrong size": good}[head]
    _sparse_entry(path, header, MAX_BYTES)
    counted = _bytes_read(monkeypatch)
    assert Cache(tmp_path).get(KEY) is None
    assert sum(counted) <= HEADER.size + len(KEY)  # the header and the key's room, never the gigabyte
    assert len(warnings_in(capsys.readouterr().err)) == 1
    assert not path.exists()  # not an entry: removed, so the next compile stores a real one
