"""A remote cache that answers outside the protocol or its bounds (issue 37, item 6) costs one
warning and a local compile, never a failed, hung or memory-bound one: a fake REAPI server in this
process sends a digest whose size is not a number, ByteStream data as a varint, an entry announced
at 2^40 bytes and trickled a byte a second, a flood past the announced size, and a trickle within
it (cut by the call's deadline)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from concurrent import futures
from pathlib import Path
from typing import Callable, Iterator

import pytest

grpc = pytest.importorskip("grpc")

from tileiras.cache import protowire as pw  # noqa: E402
from tileiras.cache import remote  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "examples" / "bazel" / "kernels" / "vadd.tileirbc"
KEY = "ab" * 32
BLOB = remote.REMOTE_MAGIC + KEY.encode() + b"\n" + b"entry"


def _result(hash_field: object, size_field: object) -> bytes:
    digest = pw.encode([(1, hash_field), (2, size_field)])
    return pw.encode([(2, pw.encode([(1, remote.ENTRY_PATH), (2, digest)]))])


GOOD_HASH = hashlib.sha256(BLOB).hexdigest()
Stream = Callable[[object], Iterator[bytes]]


def _data(chunk: bytes) -> bytes:
    return pw.encode([(10, chunk)])


def _trickle(context: object) -> Iterator[bytes]:
    while context.is_active():  # type: ignore[attr-defined]
        yield _data(b"x")
        time.sleep(1.0)


def _flood(context: object) -> Iterator[bytes]:
    chunk = _data(os.urandom(1 << 20))
    while context.is_active():  # type: ignore[attr-defined]
        yield chunk


CASES: dict[str, tuple[bytes, Stream, str]] = {
    # name: (ActionResult, ByteStream Read, what the one warning says)
    "size not a number": (_result(GOOD_HASH, b"abc"), lambda c: iter([_data(BLOB)]), "malformed ActionResult"),
    "data as a varint": (_result(GOOD_HASH, len(BLOB)), lambda c: iter([pw.encode([(10, 7)])]),
                         "malformed ByteStream answer"),
    "2^40 bytes trickled": (_result(GOOD_HASH, 1 << 40), _trickle, "announces 1099511627776 bytes"),
    "flood": (_result(GOOD_HASH, len(BLOB)), _flood, "more than the"),
    "trickle within the size": (_result(GOOD_HASH, 1 << 20), _trickle, "DEADLINE_EXCEEDED"),
}


@pytest.fixture
def fake_server(request: pytest.FixtureRequest) -> Iterator[str]:
    reply, stream, _ = CASES[request.param]
    ac = grpc.method_handlers_generic_handler("build.bazel.remote.execution.v2.ActionCache", {
        "GetActionResult": grpc.unary_unary_rpc_method_handler(lambda req, ctx: reply)})
    bs = grpc.method_handlers_generic_handler("google.bytestream.ByteStream", {
        "Read": grpc.unary_stream_rpc_method_handler(lambda req, ctx: stream(ctx))})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers([ac, bs])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"grpc://127.0.0.1:{port}"
    finally:
        server.stop(0)


@pytest.mark.parametrize("fake_server", sorted(CASES), indirect=True)
def test_a_remote_answer_out_of_bounds_is_one_warning_and_a_miss(
        fake_server: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import tracemalloc

    case = request.node.callspec.params["fake_server"]
    monkeypatch.setenv(remote.ENV_URL, fake_server)
    monkeypatch.setattr(remote, "_remote", None)
    monkeypatch.setattr(remote, "_off", False)
    tracemalloc.start()
    start = time.monotonic()
    try:
        assert remote.fetch(KEY, tmp_path) is None
        assert remote.fetch("cd" * 32, tmp_path) is None  # the process asks no more
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    elapsed = time.monotonic() - start
    assert elapsed < remote.DEFAULT_TIMEOUT + remote.MAX_BLOB_BYTES / remote.BYTES_PER_SECOND + 2
    assert peak < 2 * remote.MAX_BLOB_BYTES
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tileiras: warning:")]
    assert len(warnings) == 1 and CASES[case][2] in warnings[0], warnings
    remote._remote.close()  # type: ignore[union-attr]


@pytest.mark.parametrize("fake_server", ["data as a varint"], indirect=True)
def test_a_malformed_remote_answer_degrades_to_a_local_compile(fake_server: str, tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TILEIRAS_")}
    environ.update({"TILEIRAS_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT),
                    "TILEIRAS_REMOTE_CACHE": fake_server, "TILEIRAS_REMOTE_CACHE_READ_ONLY": "1"})
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--gpu-name", "sm_90", str(KERNEL),
                           "-o", str(tmp_path / "k.cubin")], env=environ, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.cubin").read_bytes().startswith(b"\x7fELF")
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tileiras: warning: remote cache") and "internal" not in lines[0]
