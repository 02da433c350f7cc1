"""The compile cache's remote tier on a real BuildGrid server (REAPI CAS + ActionCache).

Two "machines" are two local cache directories: what one compiles, the other
gets from the server without compiling; a swapped, corrupted or foreign entry
is never served; a server that is down, slow or misconfigured costs one
warning and never a failed compile; a read-only client uploads nothing.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from remote_support import buildgrid_server, free_port
from tileiras.cache import protowire as pw
from tileiras.cache.remote import ENTRY_PATH, REMOTE_MAGIC, RemoteCache, action_digest, parse_url

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "examples" / "bazel" / "kernels" / "vadd.tileirbc"
COMPILING = ("tileiras.lowering", "tileiras.codegen.nvptx")  # imported by a compile, never by a cache hit


@pytest.fixture(scope="module")
def server_and_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    state = tmp_path_factory.mktemp("buildgrid")
    with buildgrid_server(state) as url:
        yield url, state


@pytest.fixture
def server(server_and_dir: tuple[str, Path]) -> str:
    return server_and_dir[0]


def tileiras(cache: Path, out: Path, gpu: str, url: str | None, **env: str) -> subprocess.CompletedProcess[str]:
    """One compile in a fresh process ("machine" = its local cache directory), imports traced."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TILEIRAS_")}
    environ.update({"TILEIRAS_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT), **env})
    if url is not None:
        environ["TILEIRAS_REMOTE_CACHE"] = url
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "tileiras.driver.tileiras_main",
                           "--gpu-name", gpu, str(KERNEL), "-o", str(out)],
                          env=environ, capture_output=True, text=True, timeout=300)


def compiled(proc: subprocess.CompletedProcess[str]) -> bool:
    return any(f"| {name}" in proc.stderr for name in COMPILING)


def warnings(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("tileiras: warning:")]


def entries(cache: Path) -> int:
    return sum(1 for p in (cache / "v1").glob("*/*") if p.is_file())


def test_a_second_machine_gets_the_cubin_without_compiling(tmp_path: Path, server: str) -> None:
    first = tileiras(tmp_path / "a", tmp_path / "a.cubin", "sm_90", server)
    assert first.returncode == 0 and compiled(first) and not warnings(first), first.stderr[-3000:]
    second = tileiras(tmp_path / "b", tmp_path / "b.cubin", "sm_90", server)
    assert second.returncode == 0 and not warnings(second), second.stderr[-3000:]
    assert not compiled(second), "the second machine compiled instead of using the remote cache"
    assert (tmp_path / "b.cubin").read_bytes() == (tmp_path / "a.cubin").read_bytes()
    assert entries(tmp_path / "b") == entries(tmp_path / "a") == 2  # PTX and cubin, now local too
    # ... and a third run is a local hit, which never imports the remote tier or grpc.
    third = tileiras(tmp_path / "b", tmp_path / "c.cubin", "sm_90", server)
    assert third.returncode == 0 and not compiled(third)
    assert "tileiras.cache.remote" not in third.stderr and "| grpc" not in third.stderr


def _file_entry(remote: RemoteCache, key: str, blob: bytes) -> None:
    """File an arbitrary blob as the ActionResult of `key` (what a buggy or hostile writer can do)."""
    remote._call("stream_unary", "/google.bytestream.ByteStream/Write", iter([pw.encode(
        [(1, f"uploads/x/blobs/{hashlib.sha256(blob).hexdigest()}/{len(blob)}"), (3, True), (10, blob)])]))
    digest = pw.encode([(1, hashlib.sha256(blob).hexdigest()), (2, len(blob))])
    result = pw.encode([(2, pw.encode([(1, ENTRY_PATH), (2, digest)]))])
    remote._call("unary_unary", "/build.bazel.remote.execution.v2.ActionCache/UpdateActionResult",
                 pw.encode([(2, action_digest(key)), (3, result)]))


@pytest.mark.parametrize("damage", ["swapped", "corrupt_entry", "server_disk"])
def test_a_bad_remote_entry_is_a_miss_with_a_warning(tmp_path: Path, server_and_dir: tuple[str, Path],
                                                     damage: str) -> None:
    server, server_dir = server_and_dir
    gpu = {"swapped": "sm_80", "corrupt_entry": "sm_86", "server_disk": "sm_89"}[damage]
    good = tileiras(tmp_path / "a", tmp_path / "a.cubin", gpu, server)
    assert good.returncode == 0, good.stderr[-3000:]
    remote = RemoteCache(server)
    keys = sorted(p.name for p in (tmp_path / "a" / "v1").glob("*/*"))
    entry = {k: remote.get(k) for k in keys}
    assert all(entry.values())
    for key in keys:
        other = keys[1 - keys.index(key)]
        if damage == "swapped":      # a valid entry of another key
            _file_entry(remote, key, REMOTE_MAGIC + other.encode() + b"\n" + entry[other])
        elif damage == "corrupt_entry":  # right key, payload no longer matches its header
            _file_entry(remote, key, REMOTE_MAGIC + key.encode() + b"\n" + entry[key][:-1] + b"\x00")
        else:                        # a bit flipped in the server's own storage
            blob = REMOTE_MAGIC + key.encode() + b"\n" + entry[key]
            digest = hashlib.sha256(blob).hexdigest()
            stored = next(server_dir.rglob(digest[2:]))  # BuildGrid's disk storage: objects/ab/cdef...
            data = bytearray(stored.read_bytes())
            data[-1] ^= 1
            stored.write_bytes(bytes(data))
    remote.close()
    second = tileiras(tmp_path / "b", tmp_path / "b.cubin", gpu, server)
    assert second.returncode == 0, second.stderr[-3000:]
    assert compiled(second), "a bad remote entry was served"
    assert (tmp_path / "b.cubin").read_bytes() == (tmp_path / "a.cubin").read_bytes()
    assert warnings(second) and all("remote" in w and ("key" in w or "digest" in w) for w in warnings(second)), \
        second.stderr[-3000:]


def test_read_only_clients_upload_nothing(tmp_path: Path, server: str) -> None:
    reader = tileiras(tmp_path / "a", tmp_path / "a.cubin", "sm_87", server, TILEIRAS_REMOTE_CACHE_READ_ONLY="1")
    assert reader.returncode == 0 and compiled(reader) and not warnings(reader), reader.stderr[-3000:]
    other = tileiras(tmp_path / "b", tmp_path / "b.cubin", "sm_87", server)
    assert other.returncode == 0 and compiled(other), "a read-only client uploaded its results"


def _silent_listener() -> tuple[socket.socket, int]:
    """A port that accepts connections and never answers (a hung server)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(sock.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return sock, sock.getsockname()[1]


@pytest.mark.parametrize("case", ["refused", "hung", "bad_url", "no_grpcio"])
def test_an_unusable_remote_costs_one_warning_never_a_build(tmp_path: Path, case: str) -> None:
    listener, env = None, {}
    if case in ("refused", "no_grpcio"):
        url = f"grpc://127.0.0.1:{free_port()}"
    elif case == "hung":
        listener, port = _silent_listener()
        url = f"grpc://127.0.0.1:{port}"
    else:
        url = "http://127.0.0.1:80"
    if case == "no_grpcio":  # the optional transport is not installed
        (tmp_path / "fake" / "grpc").mkdir(parents=True)
        (tmp_path / "fake" / "grpc" / "__init__.py").write_text("raise ImportError('No module named grpc')\n")
        env["PYTHONPATH"] = f"{tmp_path / 'fake'}{os.pathsep}{ROOT}"
    expected = {"bad_url": "expected grpc://HOST:PORT", "no_grpcio": "pip install"}.get(case, "unavailable")
    try:
        start = time.monotonic()
        first = tileiras(tmp_path / "c", tmp_path / "a.cubin", "sm_90", url, **env)
        elapsed = time.monotonic() - start
        assert first.returncode == 0 and compiled(first), first.stderr[-3000:]
        assert len(warnings(first)) == 1, warnings(first)
        assert expected in warnings(first)[0], warnings(first)
        assert elapsed < 30, f"a {case} remote held the compile up for {elapsed:.1f} s"
        # The next compiler process of the build neither waits on it again nor warns again.
        second = tileiras(tmp_path / "c", tmp_path / "b.cubin", "sm_100", url, **env)
        assert second.returncode == 0 and compiled(second)
        assert len(warnings(second)) == (1 if case == "bad_url" else 0), warnings(second)
    finally:
        if listener is not None:
            listener.close()


def test_large_entries_stream_through_bytestream(server: str) -> None:
    remote = RemoteCache(server)
    entry = os.urandom(5 << 20)  # past the ~4 MB limit of batch calls
    remote.put("9e" * 32, entry)
    assert remote.get("9e" * 32) == entry
    assert remote.get("9f" * 32) is None
    remote.close()


@pytest.mark.parametrize("url,parsed", [
    ("grpc://127.0.0.1:50051", ("127.0.0.1:50051", "")),
    ("grpc://cache.example:8980/main", ("cache.example:8980", "main")),
    ("grpc://[::1]:50051/a/b", ("[::1]:50051", "a/b")),
])
def test_parse_url(url: str, parsed: tuple[str, str]) -> None:
    assert parse_url(url) == parsed


@pytest.mark.parametrize("url", ["127.0.0.1:50051", "grpcs://h:1", "grpc://h", "grpc://h:0", "grpc://:5"])
def test_parse_url_rejects(url: str) -> None:
    with pytest.raises(ValueError, match="expected grpc://HOST:PORT"):
        parse_url(url)


def test_protowire_round_trip() -> None:
    nested = pw.encode([(1, "abc"), (2, 300)])
    message = pw.encode([(1, "x"), (2, nested), (2, b"\x00\xff"), (4, 0), (5, True), (6, -1)])
    fields = pw.decode(message)
    assert fields[1] == [b"x"] and fields[2] == [nested, b"\x00\xff"] and 4 not in fields
    assert fields[5] == [1] and fields[6] == [(1 << 64) - 1]
    assert pw.decode(nested) == {1: [b"abc"], 2: [300]}
    for bad in (b"\x0a\x05ab", b"\x08\xff", b"\x0b"):
        with pytest.raises(pw.WireError):
            pw.decode(bad)


def test_the_bazel_compiler_zip_has_the_checkouts_fingerprint(tmp_path: Path) -> None:
    """Bazel runs the compiler from a zip: its cache keys must be those of the checkout CMake runs."""
    from tileiras.cache import compiler_files

    files = compiler_files.compiler_files(ROOT)
    listing = tmp_path / "files.txt"
    listing.write_text("".join(f"{p.relative_to(ROOT).as_posix()}={p}\n" for p in files))
    archive = tmp_path / "compiler.zip"
    subprocess.run([sys.executable, "-B", str(ROOT / "bazel" / "zip_compiler.py"), "--output", str(archive),
                    "--main", "build_rules/launch.py", f"@{listing}"], check=True, timeout=300)
    assert compiler_files.fingerprint_of(archive) == compiler_files.fingerprint_of(ROOT)
    # ... and a compiler run from the zip computes that fingerprint for itself.
    probe = ("import sys; from tileiras.cache import compiler_files as c; "
             "print(c.fingerprint_of(c.package_root()))")
    run = subprocess.run([sys.executable, "-B", "-c", probe], env=dict(os.environ, PYTHONPATH=str(archive)),
                         capture_output=True, text=True, timeout=120, check=True)
    assert run.stdout.strip() == compiler_files.fingerprint_of(ROOT)


def test_the_cache_server_answers_remote_hits(tmp_path: Path, server: str) -> None:
    """CMake's warm path: the cache server's workers (which may not load `subprocess` or any
    compiling module) answer every action of a kernel another machine put in the remote."""
    import shutil

    from test_cache_server import Bench, build_ordinarily, outputs, plan

    if shutil.which("cc") is None:
        raise AssertionError("the cache client needs a C compiler: apt-get install -y gcc")
    client = tmp_path / "tileir-client"
    subprocess.run(["cc", "-O2", "-o", str(client), str(ROOT / "build_rules" / "client.c")], check=True)
    first, kernel = (ROOT / "tests" / "corpus" / "bytecode" / name / "13.4.tileirbc"
                     for name in ("cmp_int", "transpose_order"))
    machines = []
    for name in ("ci", "laptop"):
        bench = Bench(tmp_path / name, str(client))
        bench.env.update(TILEIRAS_REMOTE_CACHE=server)
        machines.append(bench)
    ci, laptop = machines
    build_ordinarily(ci, plan(ci, [first]))
    build_ordinarily(ci, plan(ci, [kernel]))
    # The laptop's first actions run ordinarily (a fresh cache directory learns the LLVM and
    # ptxas versions its keys name, which a worker may not probe); then the server takes over.
    build_ordinarily(laptop, plan(laptop, [first]))
    actions = plan(laptop, [kernel])
    laptop.start()
    try:
        for action in actions:
            done = laptop.run(action)
            assert done.returncode == 0 and done.stderr == "", done.stderr
            mine, theirs = outputs(laptop, action), outputs(ci, action)
            assert mine and {p: mine[p] for p in action.outputs} == {p: theirs[p] for p in action.outputs}
        assert laptop.log_lines() == [f"answered {a.tool} {a.args[0]}" for a in actions], laptop.log_lines()
    finally:
        laptop.stop()


def test_a_build_through_the_cache_server_warns_once_when_the_remote_is_down(tmp_path: Path) -> None:
    """Workers' output is dropped when they decline, so the one warning must come from an action's own run."""
    import shutil

    from test_cache_server import Bench, build_ordinarily, plan

    if shutil.which("cc") is None:
        raise AssertionError("the cache client needs a C compiler: apt-get install -y gcc")
    client = tmp_path / "tileir-client"
    subprocess.run(["cc", "-O2", "-o", str(client), str(ROOT / "build_rules" / "client.c")], check=True)
    bench = Bench(tmp_path / "laptop", str(client))
    first, kernel = (ROOT / "tests" / "corpus" / "bytecode" / name / "13.4.tileirbc"
                     for name in ("cmp_int", "transpose_order"))
    build_ordinarily(bench, plan(bench, [first]))  # the local cache learns the tool versions: workers look up
    bench.env.update(TILEIRAS_REMOTE_CACHE=f"grpc://127.0.0.1:{free_port()}")
    bench.start()
    try:
        said = []
        for action in plan(bench, [kernel]):
            done = bench.run(action)
            assert done.returncode == 0, done.stderr
            said += [line for line in done.stderr.splitlines() if "warning" in line]
    finally:
        bench.stop()
    assert len(said) == 1 and "unavailable" in said[0], said
    assert any(line.startswith("declined tileiras --emit=ptx (miss") for line in bench.log_lines())


_FORKS_BESIDE_A_CHANNEL = r"""
import os, socket, sys
from tileiras.cache.remote import RemoteCache, RemoteError
from tileiras.codegen.tool import run_tool
listener = socket.socket(); listener.bind(("127.0.0.1", 0)); listener.listen(4)
remote = RemoteCache(f"grpc://127.0.0.1:{listener.getsockname()[1]}", timeout=0.2)
try:
    remote.get("0" * 64)
except RemoteError:
    pass
codes = [run_tool(["/bin/true"]).returncode for _ in range(150)]
print(sum(c != 0 for c in codes))
"""


def test_tools_start_beside_an_open_grpc_channel() -> None:
    """The compiler forks ptxas while the remote's channel may still be connecting (a hung remote):
    gRPC's fork handlers, left on, restart a poller in the child that aborts it before the exec
    (about 1 fork in 5 here), so the remote turns them off when it imports grpc first."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    done = subprocess.run([sys.executable, "-c", _FORKS_BESIDE_A_CHANNEL], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "0", done.stdout
    assert "fork" not in done.stderr, done.stderr[-2000:]
