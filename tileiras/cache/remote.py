"""The compile cache's remote tier: entries shared through a REAPI server (BuildGrid, ...).

Configured by the environment, so a shell, CMake (-DTileIR_REMOTE_CACHE=) and
Bazel (--define=tileiras_remote_cache=) all set it the same way:

  TILEIRAS_REMOTE_CACHE=grpc://HOST:PORT[/INSTANCE]   the server (plain gRPC)
  TILEIRAS_REMOTE_CACHE_READ_ONLY=1                   look up, never upload
  TILEIRAS_REMOTE_CACHE_TIMEOUT=SECONDS               per call (default 2)

The local cache is asked first; only its misses come here (store.py), and a
remote hit is checked like a local entry and then written to the local cache.
An entry with cache key K is the ActionResult of the action digest
sha256(ACTION_PREFIX + K): one output file, ENTRY_PATH, whose CAS blob is
REMOTE_MAGIC, K, a newline and the entry exactly as the local cache stores it
(header with the payload's digest). A blob is used only when its CAS digest,
its key line and its header all check out; anything else is a miss with a
warning. Bazel's own action digests hash Action messages, never that prefix,
so Bazel's entries and ours share a server without meeting.

Trust model (as Bazel's and ccache's remote caches): whoever may write to the
server can make every reader compile nothing and use their cubins for any
key they know. Checks catch corruption and misfiled entries, not a hostile
writer. So a team gives write access to CI alone: developers run read-only
(TILEIRAS_REMOTE_CACHE_READ_ONLY=1, Bazel's --noremote_upload_local_results),
and the server enforces it (BuildGrid: `allow-updates: false` on a read-only
instance, or TLS client certificates / JWT per instance).

The remote never fails a compile: a server that is down, slow, refusing or
answering outside the protocol (a malformed message, an entry announced over
MAX_BLOB_BYTES, more data than announced, an answer past its deadline: one
deadline per call, the timeout plus the announced size at BYTES_PER_SECOND)
costs one warning; the process then stops asking it, and a marker file in
the local cache directory keeps the other compiler processes of the build
from waiting on it for RETRY_SECONDS. grpc is imported only here, on a local
miss, and nothing here runs on a local hit.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import uuid
from pathlib import Path

from . import protowire as pw

ENV_URL = "TILEIRAS_REMOTE_CACHE"
ENV_READ_ONLY = "TILEIRAS_REMOTE_CACHE_READ_ONLY"
ENV_TIMEOUT = "TILEIRAS_REMOTE_CACHE_TIMEOUT"
DEFAULT_TIMEOUT = 2.0
CONNECT_TIMEOUT = 1.0
BYTES_PER_SECOND = 10 << 20     # on top of the timeout, for large blobs
MAX_BLOB_BYTES = 64 << 20       # no entry is larger (PTX and cubins are far below): bounds memory and time
MAX_MESSAGE_BYTES = 16 << 20    # one gRPC message (servers send 1 MiB ByteStream chunks)
CHUNK = 1 << 20                 # ByteStream message size
RETRY_SECONDS = 60.0
DOWN_MARKER = "remote-unavailable"
ACTION_PREFIX = b"tileiras compile cache entry\n"
REMOTE_MAGIC = b"tileiras-remote-entry-v1\n"
ENTRY_PATH = "entry"

_AC = "/build.bazel.remote.execution.v2.ActionCache/"
_BYTESTREAM = "/google.bytestream.ByteStream/"


class RemoteError(Exception):
    """The server could not be asked (down, slow, refusing); the message says why."""


def warn(message: str) -> None:
    print(f"tileiras: warning: {message}", file=sys.stderr)


def parse_url(url: str) -> tuple[str, str]:
    """'grpc://host:port[/instance]' -> ('host:port', 'instance'); ValueError otherwise."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme != "grpc":
        raise ValueError(f"{ENV_URL}={url!r}: expected grpc://HOST:PORT[/INSTANCE]")
    target, _, instance = rest.partition("/")
    host, colon, port = target.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{ENV_URL}={url!r}: expected grpc://HOST:PORT[/INSTANCE]")
    return target, instance.strip("/")


def _digest(data: bytes) -> bytes:
    return pw.encode([(1, hashlib.sha256(data).hexdigest()), (2, len(data))])


def action_digest(key: str) -> bytes:
    """The REAPI Digest message this cache key is filed under in the ActionCache."""
    return _digest(ACTION_PREFIX + key.encode("ascii"))


class RemoteCache:
    """One REAPI endpoint: get and put whole cache entries."""

    def __init__(self, url: str, read_only: bool = False, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.url = url
        self.target, self.instance = parse_url(url)
        self.read_only = read_only
        self.timeout = timeout
        self._channel = None

    # --- transport -------------------------------------------------------------------

    def _call(self, kind: str, method: str, request, size: int = 0):
        """One call; a unary_stream call's messages come back as a list whose data (field 10) stays
        within `size` bytes. None for NOT_FOUND, RemoteError for anything else that is not an answer."""
        grpc = self._grpc()
        stub = getattr(self._channel, kind)(method, request_serializer=None, response_deserializer=None)
        # one deadline for the whole call, bounded: the size is checked against MAX_BLOB_BYTES first
        deadline = self.timeout + min(size, MAX_BLOB_BYTES) / BYTES_PER_SECOND
        call = None
        try:
            call = stub(request, timeout=deadline)
            return _bounded_stream(call, size) if kind == "unary_stream" else call
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            if code == grpc.StatusCode.NOT_FOUND:
                return None
            name = code.name if code is not None else "error"
            detail = exc.details() if hasattr(exc, "details") else ""
            raise RemoteError(f"{name}: {detail}" if detail else name) from None
        finally:
            if kind == "unary_stream" and call is not None:
                call.cancel()  # an answer cut short (too large): the server stops sending

    def _grpc(self):
        try:
            grpc = _import_grpc()  # lazily: only a local miss pays for it
        except ImportError:
            raise RemoteError("the grpcio package is not installed: pip install 'tileiras[remote]'") from None
        if self._channel is None:
            channel = grpc.insecure_channel(self.target, options=[
                ("grpc.enable_retries", 0), ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
            try:
                grpc.channel_ready_future(channel).result(timeout=CONNECT_TIMEOUT)
            except grpc.FutureTimeoutError:
                channel.close()
                raise RemoteError(f"no connection within {CONNECT_TIMEOUT:g} s") from None
            self._channel = channel
        return grpc

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _resource(self, *parts: str) -> str:
        return "/".join(([self.instance] if self.instance else []) + list(parts))

    # --- entries ---------------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        """The local-cache entry stored for `key`, checked; None when absent or not valid (a warning).
        RemoteError for an answer that breaks the protocol or its bounds (the caller stops asking)."""
        request = pw.encode([(1, self.instance), (2, action_digest(key))])
        reply = self._call("unary_unary", _AC + "GetActionResult", request)
        if reply is None:
            return None
        blob_hash, blob_size = _entry_digest(reply)
        read = pw.encode([(1, self._resource("blobs", blob_hash, str(blob_size)))])
        blob = self._call("unary_stream", _BYTESTREAM + "Read", read, blob_size)
        if blob is None:
            return None  # the result outlived its blob
        header = REMOTE_MAGIC + key.encode("ascii") + b"\n"
        if hashlib.sha256(blob).hexdigest() != blob_hash or len(blob) != blob_size or not blob.startswith(header):
            warn(f"remote cache {self.url}: entry for key {key[:16]} does not match its key or digest; ignored")
            return None
        return blob[len(header):]

    def put(self, key: str, entry: bytes) -> None:
        """Upload `entry` (as the local cache stores it) under `key`; nothing when read-only."""
        if self.read_only:
            return
        blob = REMOTE_MAGIC + key.encode("ascii") + b"\n" + entry
        if len(blob) > MAX_BLOB_BYTES:
            return  # no reader would take it
        blob_hash = hashlib.sha256(blob).hexdigest()
        resource = self._resource("uploads", str(uuid.uuid4()), "blobs", blob_hash, str(len(blob)))
        requests = []
        for offset in range(0, max(len(blob), 1), CHUNK):
            chunk = blob[offset:offset + CHUNK]
            last = offset + CHUNK >= len(blob)
            requests.append(pw.encode([(1, resource if offset == 0 else None), (2, offset), (3, last), (10, chunk)]))
        self._call("stream_unary", _BYTESTREAM + "Write", iter(requests), len(blob))
        output = pw.encode([(1, ENTRY_PATH), (2, _digest(blob))])
        result = pw.encode([(2, output), (4, 0)])
        update = pw.encode([(1, self.instance), (2, action_digest(key)), (3, result)])
        self._call("unary_unary", _AC + "UpdateActionResult", update)


def _entry_digest(reply: bytes) -> tuple[str, int]:
    """(sha256 hex, size) of the entry blob an ActionResult names; RemoteError when the message is
    not one, or names a blob no entry can be (a size that is not a number, or over the bound)."""
    try:
        result = pw.decode(reply)
        files = [pw.decode(f) for f in result.get(2, []) if isinstance(f, bytes)]
        entry = next((f for f in files if pw.first(f, 1) == ENTRY_PATH.encode()), None)
        if entry is None or pw.first(result, 4, 0) != 0:
            raise pw.WireError("no entry file, or a failed action")
        digest = pw.decode(pw.first_bytes(entry, 2))
        blob_hash = pw.first_bytes(digest, 1).decode("ascii")
        blob_size = pw.first_int(digest, 2)
    except (pw.WireError, UnicodeDecodeError) as exc:
        raise RemoteError(f"malformed ActionResult ({exc})") from None
    if len(blob_hash) != 64 or not set(blob_hash) <= set("0123456789abcdef"):
        raise RemoteError("malformed ActionResult (the entry's digest is not a SHA-256)")
    if blob_size > MAX_BLOB_BYTES:
        raise RemoteError(f"the entry announces {blob_size} bytes, over the {MAX_BLOB_BYTES} an entry may have")
    return blob_hash, blob_size


def _bounded_stream(call, size: int) -> bytes:
    """The data of a ByteStream Read, refused (RemoteError) as soon as it runs past `size` bytes
    (a flooding server) or a message is not a ReadResponse; the call's deadline bounds the time."""
    chunks: list[bytes] = []
    got = 0
    for message in call:
        try:
            data = pw.first_bytes(pw.decode(message), 10)
        except pw.WireError as exc:
            raise RemoteError(f"malformed ByteStream answer ({exc})") from None
        got += len(data)
        if got > size:
            raise RemoteError(f"the server sent more than the {size} bytes announced")
        chunks.append(data)
    return b"".join(chunks)


def _import_grpc():
    """grpc, without its fork handlers when this process imports it first: the compiler forks only to
    exec (ptxas), and gRPC's child handler restarts its poller in the fork, which then polls a
    descriptor the exec's fd cleanup closed and aborts the child (about 1 fork in 5 while a
    channel is open: a ptxas killed by SIGABRT)."""
    if "grpc" not in sys.modules:
        os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    import grpc

    return grpc


def preload() -> None:
    """Import the transport now: the cache server does it once, before forking its workers,
    which may not import it themselves (it loads `subprocess`, one of the modules they refuse)."""
    import grpc  # noqa: F401


# --- the process's remote, with the once-only warning ------------------------------------

_remote: RemoteCache | None = None
_off = False  # configured wrongly or found down in this process


def _marker(root: Path) -> Path:
    return root / DOWN_MARKER


def _timeout() -> float:
    try:
        value = float(os.environ.get(ENV_TIMEOUT, DEFAULT_TIMEOUT))
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def _client(root: Path) -> RemoteCache | None:
    """The configured remote, or None (not configured, misconfigured, or recently down)."""
    global _remote, _off
    url = os.environ.get(ENV_URL, "")
    if _off or not url:
        return None
    if _remote is not None and _remote.url == url:
        return _remote
    try:
        marker = _marker(root)
        if marker.read_text() == url and time.time() - marker.stat().st_mtime < RETRY_SECONDS:
            _off = True  # another process of this build warned already
            return None
    except OSError:
        pass
    try:
        read_only = os.environ.get(ENV_READ_ONLY, "").lower() not in ("", "0", "false", "no", "off")
        _remote = RemoteCache(url, read_only, _timeout())
    except ValueError as exc:
        _off = True
        warn(f"{exc}; remote cache not used")
        return None
    return _remote


def _went_down(root: Path, remote: RemoteCache, exc: RemoteError) -> None:
    global _off
    _off = True
    remote.close()
    from . import store

    if store._lookup_only:
        return  # a cache-server worker: its output is dropped; the action's own run warns
    warn(f"remote cache {remote.url} unavailable ({exc}); compiling with the local cache only")
    try:
        root.mkdir(parents=True, exist_ok=True)
        _marker(root).write_text(remote.url)
    except OSError:
        pass


def fetch(key: str, root: str | os.PathLike[str]) -> bytes | None:
    """The entry for `key` from the remote (a local-cache entry, still to be checked), or None."""
    root = Path(root)
    remote = _client(root)
    if remote is None:
        return None
    try:
        return remote.get(key)
    except RemoteError as exc:
        _went_down(root, remote, exc)
    except Exception as exc:  # noqa: BLE001 - an answer no check foresaw: still never a failed compile
        _went_down(root, remote, RemoteError(f"unexpected answer ({type(exc).__name__}: {exc})"))
    return None


def store(key: str, entry: bytes, root: str | os.PathLike[str]) -> None:
    """Upload a local-cache entry just written; a failure only warns (once)."""
    root = Path(root)
    remote = _client(root)
    if remote is None or remote.read_only:
        return
    try:
        remote.put(key, entry)
    except Exception as exc:  # noqa: BLE001 - RemoteError, or an answer no check foresaw
        if not isinstance(exc, RemoteError):
            exc = RemoteError(f"unexpected answer ({type(exc).__name__}: {exc})")
        if "PERMISSION_DENIED" in str(exc) or "UNIMPLEMENTED" in str(exc):
            remote.read_only = True  # the server's access control: keep reading
            warn(f"remote cache {remote.url} refuses writes ({exc}); reading only")
            return
        _went_down(root, remote, exc)
