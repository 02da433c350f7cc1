"""The cache server: answers build actions from the compile cache without starting Python.

With a warm cache an action (PTX, cubin, object, header) takes about a
millisecond of work and tens of milliseconds of interpreter start-up and
imports. So a build runs its actions through the native client
(`build_rules/client.c`), which hands each one to this server: the server has
the compiler imported once, and its forked workers answer the actions. A
worker runs the ordinary entry point (`tileiras_main.main`,
`tileir_main.main`) on the action's arguments, working directory and
environment, with the cache in lookup-only mode (`store.enter_lookup_only`)
and the compiling parts of the compiler (LLVM, lowering, ptxas, ...) made
unimportable. So a worker either finishes the action from the cache, through
exactly the code that writes outputs and depfiles without a server, or stops
before it has written anything; then (and for anything else it is not sure
of) the client runs the action the ordinary way. The server never compiles.

A worker goes on to the next action after a hit or a plain miss (with the
compiler's memoized lookups cleared, so nothing found for one action is
reused for the next); after anything else it exits and a fresh fork replaces it.
One request may take REQUEST_SECONDS (then it is declined and the worker
retires; CPU time past that kills it) and the worker WORKER_MEMORY_BYTES more
address space than it started with (a MemoryError: declined, retired), so no
request jams the pool: a FIFO as input once blocked both workers in open() for
good. A worker that dies in any way but going idle is replaced.

One server per socket (CMake puts it in the build tree, its name standing for
the compiler and the Python that runs it, so a changed compiler gets a new
server); a lock file
beside the socket keeps it to one. It exits after `IDLE_SECONDS` without a
request, or when its socket is removed or replaced.

    python launch.py cache-server SOCKET --expect PROGRAM LAUNCHER [--lock-fd N] [--log FILE] [--workers N]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import os
import signal
import socket
import struct
import sys
import time
from typing import BinaryIO, Callable

MAGIC = b"TLRS1\n"
IDLE_SECONDS = 60.0
TICK_SECONDS = 1.0
MAX_STRING = 1 << 24
REQUEST_SECONDS = 20.0               # a cache answer takes milliseconds; the client gives up at 60 s
WORKER_MEMORY_BYTES = 2 << 30        # address space a worker may add to what it had at its fork
RESPAWNS_PER_SECOND = 10             # a worker that dies at once, again and again, is not forked forever
# Imported before forking, so that a worker pays nothing for them.
PREWARM: tuple[str, ...] = (
    "tileiras.driver.tileiras_main", "tileiras.driver.tileir_main", "tileiras.driver.compile",
    "tileiras.driver.options", "tileiras.output", "tileiras.driver.depfile",
    "tileiras.driver.cmd_package", "tileiras.driver.cmd_header", "tileiras.cache.keys", "tileiras.cache.store",
    "tileiras.cache.versions", "tileiras.driver.package", "tileiras.codegen.fatbin", "tileiras.codegen.metadata",
    "tileiras.codegen.header", "tileiras.codegen.host_object", "tileiras.codegen.ptxas", "tileiras.bytecode.sections",
    "argparse", "json", "tempfile", "importlib.util",
)
# What compiling needs: a worker that reaches for any of these has missed the cache.
COMPILING_MODULES: tuple[str, ...] = (
    "llvmlite", "ctypes", "numpy", "subprocess", "multiprocessing", "tileiras.lowering", "tileiras.frontend",
    "tileiras.codegen.nvptx", "tileiras.codegen.llvm_capi", "tileiras.codegen.libdevice",
    "tileiras.codegen.worker", "tileiras.codegen.isolate", "tileiras.codegen.tool",
)
# tool -> the subcommands (first argument) a worker may run; None: any (whatever would
# compile is stopped by lookup-only mode and COMPILING_MODULES)
SERVED: dict[str, tuple[str, ...] | None] = {"tileiras": None, "tileir": ("package", "header")}


class Request:
    """One action: argv (PROGRAM LAUNCHER TOOL ARGS...), working directory, environment."""

    def __init__(self, argv: list[str], cwd: str, env: dict[str, str]) -> None:
        self.argv, self.cwd, self.env = argv, cwd, env


# --- wire format (see client.c) ------------------------------------------------------


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    data = stream.read(n)
    if data is None or len(data) != n:
        raise EOFError("short request")
    return data


def _read_u32(stream: BinaryIO) -> int:
    return struct.unpack("<I", _read_exact(stream, 4))[0]


def _read_str(stream: BinaryIO) -> str:
    n = _read_u32(stream)
    if n > MAX_STRING:
        raise ValueError("request string too long")
    return os.fsdecode(_read_exact(stream, n))


def read_request(stream: BinaryIO) -> Request:
    if _read_exact(stream, len(MAGIC)) != MAGIC:
        raise ValueError("not a tileir-client request")
    argv = [_read_str(stream) for _ in range(_read_u32(stream))]
    cwd = _read_str(stream)
    env: dict[str, str] = {}
    for _ in range(_read_u32(stream)):
        name, sep, value = _read_str(stream).partition("=")
        if sep:
            env[name] = value
    return Request(argv, cwd, env)


def encode_request(request: Request) -> bytes:
    """The bytes client.c sends (tests talk to the server with it)."""

    def text(value: str) -> bytes:
        raw = os.fsencode(value)
        return struct.pack("<I", len(raw)) + raw

    parts = [MAGIC, struct.pack("<I", len(request.argv)), *map(text, request.argv), text(request.cwd),
             struct.pack("<I", len(request.env)), *(text(f"{k}={v}") for k, v in request.env.items())]
    return b"".join(parts)


def encode_answer(status: int, out: bytes, err: bytes) -> bytes:
    return b"\x01" + struct.pack("<II", status, len(out)) + out + struct.pack("<I", len(err)) + err


NOT_ANSWERED = b"\x00"


# --- the worker ----------------------------------------------------------------------


def _compiling(name: str) -> bool:
    return any(name == mod or name.startswith(mod + ".") for mod in COMPILING_MODULES)


class _Refuse:
    """The loader of a compiling module in a worker: loading it is a cache miss."""

    def __init__(self, name: str) -> None:
        self.name = name

    def create_module(self, spec: object) -> None:
        from .store import CacheMiss

        raise CacheMiss(f"import {self.name}")

    def exec_module(self, module: object) -> None:
        self.create_module(None)


class _CompilingBlocked:
    """A meta-path finder that makes importing a compiling module a cache miss.

    Finding one still works (the cache key locates llvmlite's library without
    importing it): the spec is the real one, with a loader that refuses.
    """

    def find_spec(self, name: str, path: object = None, target: object = None) -> object:
        if not _compiling(name):
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                spec.loader = _Refuse(name)
                return spec
        return None


def _python_env(env: dict[str, str]) -> dict[str, str]:
    """The variables that shape the interpreter itself (sys.path, flags): fixed at server start."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


def servable(request: Request, expect: tuple[str, str], server_env: dict[str, str]) -> bool:
    """Whether this server may try the action: same interpreter and compiler, a cache-backed step."""
    if len(request.argv) < 4 or tuple(request.argv[:2]) != expect:
        return False
    if _python_env(request.env) != _python_env(server_env):
        return False
    tool, args = request.argv[2], request.argv[3:]
    if tool not in SERVED:
        return False
    commands = SERVED[tool]
    return commands is None or (bool(args) and args[0] in commands)


def enter_worker_mode() -> None:
    """Make this process a worker for good: the cache only reads, compiling modules do not load."""
    from .store import enter_lookup_only

    enter_lookup_only()
    sys.meta_path.insert(0, _CompilingBlocked())  # type: ignore[arg-type]


_memoized: tuple[int, list[Callable[[], None]]] = (-1, [])


def _clear_memoized() -> None:
    """Forget what the compiler's functions memoized in this process (lru_cache'd lookups such
    as where ptxas is): the next action finds everything afresh, as a new process would."""
    global _memoized
    if _memoized[0] != len(sys.modules):  # look again only when modules were imported
        found: list[Callable[[], None]] = []
        for name, module in list(sys.modules.items()):
            if not name.startswith("tileiras.") or module is None:
                continue
            for value in vars(module).values():
                clear = getattr(value, "cache_clear", None)
                if callable(clear) and getattr(value, "__module__", None) == name:
                    found.append(clear)
        _memoized = (len(sys.modules), found)
    for clear in _memoized[1]:
        clear()


def answer(request: Request) -> tuple[bytes, str]:
    """Run the action (in a worker, see enter_worker_mode): (reply, why it was declined or "").

    A plain cache miss is declined with a reason starting "miss": it stopped
    at a lookup or at the import of a compiling module, before any work.

    The working directory, environment, argv and standard streams are the
    action's while it runs and the worker's again afterwards."""
    from .store import CacheMiss

    tool, args = request.argv[2], request.argv[3:]
    entry = importlib.import_module("tileiras.driver.tileiras_main" if tool == "tileiras"
                                    else "tileiras.driver.tileir_main")
    out, err = io.StringIO(), io.StringIO()
    home, saved_env, saved_argv = os.getcwd(), dict(os.environ), sys.argv
    _clear_memoized()
    try:
        os.chdir(request.cwd)
        os.environ.clear()
        os.environ.update(request.env)
        sys.argv = [str(entry.__file__), *args]  # as runpy sets it in launch.py
        sys.stdout, sys.stderr = out, err
        status = int(entry.main(args))
    except CacheMiss as miss:
        return NOT_ANSWERED, f"miss: {miss}"
    except BaseException as exc:  # noqa: BLE001 - whatever went wrong, the ordinary path reports it
        return NOT_ANSWERED, f"{type(exc).__name__}: {exc}"
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(home)
    if status != 0:
        return NOT_ANSWERED, f"exit status {status}"  # the ordinary path reports errors in its own words
    return encode_answer(status, out.getvalue().encode("utf-8", "replace"),
                         err.getvalue().encode("utf-8", "replace")), ""


class Overtime(BaseException):
    """A request ran past REQUEST_SECONDS (raised by the alarm, through any `except Exception`)."""


def _overtime(signum: int, frame: object) -> None:
    raise Overtime(f"over {REQUEST_SECONDS:g} s")


def _bounded(seconds: float) -> Callable[[], None]:
    """Start the request's alarm after `seconds` of wall time (a blocking call is interrupted by
    it); returns what clears it."""
    previous = signal.signal(signal.SIGALRM, _overtime)
    signal.setitimer(signal.ITIMER_REAL, seconds)

    def clear() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

    return clear


def limit_cpu(seconds: float = REQUEST_SECONDS) -> None:
    """A worker's next request may use `seconds` of CPU (and one more): SIGXCPU then ends a worker
    stuck where the alarm gets no hearing (a long call in C)."""
    try:
        import resource

        used = resource.getrusage(resource.RUSAGE_SELF)
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        limit = int(used.ru_utime + used.ru_stime + seconds) + 1
        if hard == resource.RLIM_INFINITY or limit <= hard:
            resource.setrlimit(resource.RLIMIT_CPU, (limit, hard))
    except (ImportError, OSError, ValueError):
        pass


def limit_memory(extra: int = WORKER_MEMORY_BYTES) -> None:
    """Let this process grow by at most `extra` bytes of address space (MemoryError past it)."""
    try:
        import resource

        with open("/proc/self/statm", "rb") as handle:
            size = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = size + extra
        if hard == resource.RLIM_INFINITY or limit <= hard:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError, IndexError):
        pass  # no /proc (macOS): the inputs' own bound still holds


def serve_one(conn: socket.socket, expect: tuple[str, str], server_env: dict[str, str],
              log: BinaryIO | None, seconds: float = REQUEST_SECONDS) -> bool:
    """Answer (or decline) the request on `conn` within `seconds`; True when it was answered or a
    plain miss (the worker may go on), False when the worker should retire."""
    conn.settimeout(30.0)
    reply, why, what = NOT_ANSWERED, "not served here", "?"
    clear = _bounded(seconds)
    try:
        request = read_request(conn.makefile("rb"))
        what = " ".join(request.argv[2:4])
        if servable(request, expect, server_env):
            reply, why = answer(request)
    except (OSError, EOFError, ValueError) as exc:
        why = f"bad request: {exc}"
    except (Overtime, MemoryError) as exc:
        reply, why = NOT_ANSWERED, f"{type(exc).__name__}: {exc}"
    finally:
        clear()
    if log is not None:  # before the reply: whoever reads the log after the action finds its line
        log.write((f"answered {what}\n" if reply != NOT_ANSWERED else f"declined {what} ({why})\n").encode())
        log.flush()
    try:
        conn.sendall(reply)
    except OSError:
        pass
    finally:
        conn.close()
    return reply != NOT_ANSWERED or why.startswith("miss")


# --- the server ----------------------------------------------------------------------

# How a worker ends: the server replaces one that retired, not one that went idle.
WORKER_IDLE, WORKER_RETIRED = 0, 3
# A worker serves actions one after another while they are hits or plain
# misses (which stop before any work); anything else (an error) may have left
# state behind, so the worker retires and a fresh fork of the server takes its
# place. The cap bounds the rest.
MAX_ACTIONS_PER_WORKER = 1000


def _bind(path: str) -> socket.socket:
    """Listen at `path` (reached from its directory when too long for a socket address)."""
    directory, name = os.path.split(os.path.abspath(path))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o077)  # only this user may connect
    here = os.getcwd()
    try:
        os.chdir(directory)
        try:
            os.unlink(name)  # a leftover of a server that died: the lock says none runs now
        except FileNotFoundError:
            pass
        listener.bind(name)
    finally:
        os.chdir(here)
        os.umask(old_umask)
    listener.listen(128)
    return listener


def _same_file(path: str, ident: tuple[int, int]) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == ident


def _worker(listener: socket.socket, path: str, ident: tuple[int, int], expect: tuple[str, str],
            server_env: dict[str, str], idle_seconds: float, log: BinaryIO | None) -> int:
    """Accept and answer actions until idle, retired, or the socket is gone; returns the exit code."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    enter_worker_mode()
    limit_memory()
    listener.settimeout(TICK_SECONDS)
    last = time.monotonic()
    for _ in range(MAX_ACTIONS_PER_WORKER):
        while True:
            try:
                conn, _ = listener.accept()
                break
            except socket.timeout:
                if not _same_file(path, ident) or time.monotonic() - last > idle_seconds:
                    return WORKER_IDLE  # the build tree was removed or replaced, or nobody asks
        conn.setblocking(True)
        limit_cpu()
        if not serve_one(conn, expect, server_env, log):
            return WORKER_RETIRED
        last = time.monotonic()
    return WORKER_RETIRED


def serve(path: str, expect: tuple[str, str], idle_seconds: float = IDLE_SECONDS, log: BinaryIO | None = None,
          workers: int | None = None) -> int:
    """Serve actions at `path` with a pool of forked workers until they all went idle."""
    for name in PREWARM:
        importlib.import_module(name)
    loaded = [m for m in sys.modules if _compiling(m)]
    if loaded:  # a worker could then compile without noticing: refuse to serve
        if log is not None:
            log.write(f"not serving: {', '.join(sorted(loaded))} already imported\n".encode())
        return 1
    if os.environ.get("TILEIRAS_REMOTE_CACHE"):  # the remote tier's transport (it loads subprocess, compiles nothing)
        importlib.import_module("tileiras.cache.remote").preload()
    server_env = dict(os.environ)
    gc.freeze()  # workers then leave the server's objects alone: fewer pages copied after fork
    listener = _bind(path)
    st = os.stat(path)
    ident = (st.st_dev, st.st_ino)
    running: set[int] = set()
    recent: list[float] = []  # when workers were last replaced
    server = os.getpid()

    def spawn() -> None:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _worker(listener, path, ident, expect, server_env, idle_seconds, log)
            finally:
                os._exit(code)
        running.add(pid)

    def leave() -> None:
        """Remove the socket (while still ours) and stop the workers."""
        if _same_file(path, ident):
            try:
                os.unlink(path)
            except OSError:
                pass
        listener.close()
        for pid in running:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass

    def on_term(signum: int, frame: object) -> None:
        # At once, without the interpreter's finalization: nothing of the server's needs it (the log
        # is flushed line by line), and no exit path is then left to wait on anything.
        if os.getpid() != server:  # a worker forked before it set its own disposition
            os._exit(1)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second TERM must not interrupt the cleanup
        leave()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # detached: the starting terminal may go away
    try:
        for _ in range(workers or max(2, os.cpu_count() or 2)):
            spawn()
        while running:
            pid, status = os.wait()
            running.discard(pid)
            idle = os.WIFEXITED(status) and os.WEXITSTATUS(status) == WORKER_IDLE
            if idle or not _same_file(path, ident):
                continue
            # retired, killed by a signal (SIGXCPU, the OOM killer, a user) or crashed: the pool
            # stays full, but a worker that dies at once is not forked in a loop
            now = time.monotonic()
            recent[:] = [t for t in recent if now - t < 1.0]
            if len(recent) >= RESPAWNS_PER_SECOND:
                time.sleep(1.0)
            recent.append(time.monotonic())
            spawn()
    finally:
        leave()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="launch.py cache-server", description=__doc__.split("\n\n")[0])
    parser.add_argument("socket")
    parser.add_argument("--expect", nargs=2, required=True, metavar=("PROGRAM", "LAUNCHER"),
                        help="the command prefix of the actions this server may answer")
    parser.add_argument("--lock-fd", type=int, help="descriptor of the locked lock file (held while serving)")
    parser.add_argument("--idle", type=float, default=IDLE_SECONDS, help="exit after this many idle seconds")
    parser.add_argument("--log", help="append one line per request here")
    parser.add_argument("--workers", type=int, help="worker processes (default: the number of CPUs, at least 2)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.lock_fd is None:
        import fcntl

        from .server_start import lock_path

        lock_fd = os.open(lock_path(args.socket), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # one runs already
    log = open(args.log, "ab") if args.log else None
    try:
        return serve(args.socket, (args.expect[0], args.expect[1]), args.idle, log, args.workers)
    finally:
        if log is not None:
            log.close()


if __name__ == "__main__":
    sys.exit(main())
