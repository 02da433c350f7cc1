"""The cache server and its client: warm-cache actions answered without starting Python,
byte for byte what the ordinary path writes, and everything else left to the ordinary path."""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from build_rules import CMAKE_POLICY, KernelOptions, library_plan
from build_rules.actions import Action
from tileiras.cache.server import NOT_ANSWERED, Request, encode_request

REPO = Path(__file__).resolve().parent.parent
LAUNCHER = str(REPO / "build_rules" / "launch.py")
CORPUS = REPO / "tests" / "corpus" / "bytecode"
KERNELS = [CORPUS / name / "13.4.tileirbc" for name in ("cmp_int", "transpose_order")]

pytestmark = pytest.mark.skipif(sys.platform == "win32" or shutil.which("cc") is None,
                                reason="the cache client needs a Unix C compiler")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("client") / "tileir-client"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(path), str(REPO / "build_rules" / "client.c")],
                   check=True)
    return str(path)


class Bench:
    """A cache directory, a work directory, a socket; actions run through the client."""

    def __init__(self, root: Path, client: str, socket_path: Path | None = None) -> None:
        self.root, self.client = root, client
        self.cache, self.work = root / "cache", root / "work"
        (self.work / "out" / "include").mkdir(parents=True, exist_ok=True)  # as CMake makes them
        self.socket = str(socket_path or root / "s.sock")
        self.log = root / "server.log"
        self.env = dict(os.environ, TILEIRAS_CACHE_DIR=str(self.cache))
        self.env.pop("TILEIRAS_NO_SERVER", None)
        self.server: subprocess.Popen[bytes] | None = None

    def start(self, workers: int | None = None) -> None:
        self.server = subprocess.Popen([sys.executable, LAUNCHER, "cache-server", self.socket, "--expect",
                                        sys.executable, LAUNCHER, "--log", str(self.log), "--idle", "60",
                                        *(["--workers", str(workers)] if workers else [])],
                                       env=self.env)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.socket):
            assert self.server.poll() is None, "the server exited"
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        if self.server is None:
            return
        server, self.server = self.server, None
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # say where it was stuck (signal masks, kernel wait channel)
            state = process_state(server.pid)
            server.kill()
            server.wait()
            pytest.fail(f"the server did not leave within 30 s of SIGTERM: {state}; log: {self.log_lines()[-5:]}")

    def run(self, action: Action, server: bool = True) -> subprocess.CompletedProcess[str]:
        env = dict(self.env) if server else dict(self.env, TILEIRAS_NO_SERVER="1")
        argv = [self.client, self.socket, sys.executable, LAUNCHER, action.tool, *action.args]
        return subprocess.run(argv, cwd=self.work, env=env, capture_output=True, text=True, timeout=300)

    def log_lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


def process_state(pid: int) -> str:
    """The kernel's view of process `pid`: run state, signal masks, what it waits in."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError as exc:
        return f"unreadable ({exc})"
    keep = ("State", "SigBlk", "SigIgn", "SigCgt", "Threads")
    return ", ".join([line for line in status if line.split(":")[0] in keep] + [f"wchan: {wchan}"])


@pytest.fixture
def bench(tmp_path: Path, client: str) -> "Bench":
    made = Bench(tmp_path, client)
    yield made
    made.stop()


def plan(bench: Bench, sources: list[Path], opt_level: int = 3) -> list[Action]:
    """The CMake actions of library `k` (in out/) over copies of `sources` named after their directories."""
    named = []
    for source in sources:
        copy = bench.root / "k" / f"{source.parent.name}.tileirbc"
        if not copy.exists():
            copy.parent.mkdir(exist_ok=True)
            shutil.copy(source, copy)
        named.append(str(copy))
    options = KernelOptions.resolve(gpu_names=["sm_90"], opt_level=opt_level)
    return list(library_plan("k", named, options, "out", policy=CMAKE_POLICY).actions)


def outputs(bench: Bench, action: Action) -> dict[str, bytes]:
    """Every file the action writes, with the depfile, by path."""
    paths = [*action.outputs, *([action.depfile] if action.depfile else [])]
    return {p: (bench.work / p).read_bytes() for p in paths if (bench.work / p).exists()}


def remove(bench: Bench, files: dict[str, bytes]) -> None:
    for path in files:
        (bench.work / path).unlink()


def build_ordinarily(bench: Bench, actions: list[Action]) -> None:
    for action in actions:
        done = bench.run(action, server=False)
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("step", ["ptx", "cubin", "package", "header"])
def test_warm_action_is_answered_with_the_ordinary_bytes(bench: Bench, step: str) -> None:
    actions = plan(bench, KERNELS[:1])
    build_ordinarily(bench, actions)  # warms the cache
    action = next(a for a in actions if a.step == step)
    expected = outputs(bench, action)
    assert expected and (step != "ptx" or len(expected) == 3)  # PTX, its metadata and its depfile
    remove(bench, expected)
    bench.start()
    done = bench.run(action)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")
    assert outputs(bench, action) == expected
    assert bench.log_lines() == [f"answered {action.tool} {action.args[0]}"]


def wait_for_server_exit(lock: str, timeout: float = 30.0) -> None:
    """Wait until no server holds `lock` (a server keeps its lock file locked while it runs)."""
    deadline = time.monotonic() + timeout
    while True:
        with open(lock, "rb") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                assert time.monotonic() < deadline, "the server did not exit"
        time.sleep(0.05)


def test_a_changed_option_misses_and_the_ordinary_path_compiles(bench: Bench) -> None:
    build_ordinarily(bench, plan(bench, KERNELS[:1], opt_level=3))
    ptx_o2 = plan(bench, KERNELS[:1], opt_level=2)[0]
    bench.start()
    done = bench.run(ptx_o2)
    assert done.returncode == 0, done.stderr
    assert bench.log_lines()[0].startswith("declined tileiras --emit=ptx (miss")
    produced = outputs(bench, ptx_o2)
    remove(bench, produced)
    build_ordinarily(bench, [ptx_o2])
    assert outputs(bench, ptx_o2) == produced


def test_a_corrupt_entry_is_detected_and_recompiled(bench: Bench) -> None:
    actions = plan(bench, KERNELS[:1])
    build_ordinarily(bench, actions)
    expected = outputs(bench, actions[0])
    remove(bench, expected)
    entries = [p for p in (bench.cache / "v1").rglob("*") if p.is_file()]
    assert entries
    for entry in entries:
        blob = bytearray(entry.read_bytes())
        blob[-1] ^= 0xFF
        entry.write_bytes(bytes(blob))
    bench.start()
    done = bench.run(actions[0])
    assert done.returncode == 0, done.stderr
    assert bench.log_lines()[0].startswith("declined tileiras --emit=ptx (miss")
    assert outputs(bench, actions[0]) == expected


def test_a_cold_cache_is_never_compiled_by_the_server(bench: Bench) -> None:
    actions = plan(bench, KERNELS[:1])
    bench.start()
    for action in actions:
        done = bench.run(action)
        assert done.returncode == 0, done.stderr
    lines = bench.log_lines()
    assert [line.split(" (")[0] for line in lines[:3]] == [
        "declined tileiras --emit=ptx", "declined tileiras --emit=cubin", "declined tileir package"]
    assert all("(miss" in line for line in lines[:3]), lines
    served = {a.outputs[0]: outputs(bench, a) for a in actions}
    for action in actions:
        remove(bench, served[action.outputs[0]])
    bench.stop()
    shutil.rmtree(bench.cache)
    build_ordinarily(bench, actions)
    assert {a.outputs[0]: outputs(bench, a) for a in actions} == served


def test_a_failing_action_reports_like_the_ordinary_path_and_leaves_nothing(bench: Bench) -> None:
    broken = bench.root / "broken.tileirbc"
    broken.write_bytes(KERNELS[0].read_bytes()[:40])
    action = plan(bench, [broken])[0]
    ordinary = bench.run(action, server=False)
    assert ordinary.returncode != 0 and ordinary.stderr
    bench.start()
    served = bench.run(action)
    assert (served.returncode, served.stdout, served.stderr) == (ordinary.returncode, ordinary.stdout,
                                                                 ordinary.stderr)
    assert outputs(bench, action) == {}
    assert not list((bench.work / "out").glob(".*tmp"))


def test_only_its_own_interpreter_and_launcher_are_served(bench: Bench) -> None:
    actions = plan(bench, KERNELS[:1])
    build_ordinarily(bench, actions)
    bench.start()
    for prefix in ([sys.executable, LAUNCHER + "x"], ["/usr/bin/python3-other", LAUNCHER]):
        request = Request([*prefix, "tileir", "header", "--metadata", actions[-1].args[2], "-o", "x.h"],
                          str(bench.work), dict(bench.env))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(bench.socket)
            conn.sendall(encode_request(request))
            assert conn.recv(16) == NOT_ANSWERED
    other_python = Request([sys.executable, LAUNCHER, "tileir", "header", "-o", "x.h"], str(bench.work),
                           dict(bench.env, PYTHONPATH="/elsewhere"))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(bench.socket)
        conn.sendall(encode_request(other_python))
        assert conn.recv(16) == NOT_ANSWERED
    assert not (bench.work / "x.h").exists()
    assert all(line.endswith("(not served here)") for line in bench.log_lines())


def test_concurrent_actions(bench: Bench) -> None:
    actions = plan(bench, KERNELS)
    build_ordinarily(bench, actions)
    expected = {a.outputs[0]: outputs(bench, a) for a in actions}
    bench.start()
    # Every action of the plan at once, each twice: the same outputs rewritten concurrently
    # (while others read them as inputs).
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(bench.run, [a for a in actions for _ in range(2)]))
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    assert {a.outputs[0]: outputs(bench, a) for a in actions} == expected
    assert sum(line.startswith("answered") for line in bench.log_lines()) == 2 * len(actions)


def test_first_action_starts_a_server_which_leaves_with_its_socket(tmp_path: Path, client: str) -> None:
    bench = Bench(tmp_path, client, tmp_path / ("d" * 100) / "server.sock")  # too long for sun_path
    actions = plan(bench, KERNELS[:1])
    first = bench.run(actions[0])  # no server yet: the ordinary path, which starts one
    assert first.returncode == 0, first.stderr
    deadline = time.monotonic() + 30
    while not os.path.exists(bench.socket):
        assert time.monotonic() < deadline, "no server was started"
        time.sleep(0.05)
    expected = outputs(bench, actions[0])
    remove(bench, expected)
    again = bench.run(actions[0])  # answered through the long path
    assert again.returncode == 0, again.stderr
    assert outputs(bench, actions[0]) == expected
    os.unlink(bench.socket)
    wait_for_server_exit(bench.socket + ".lock")  # it lets go of its lock once its socket is gone


def test_memoized_lookups_are_forgotten_between_actions() -> None:
    from tileiras.cache.server import _clear_memoized
    from tileiras.codegen import ptxas

    _clear_memoized()      # what earlier tests in this process memoized (other environments) aside
    ptxas.find_ptxas()
    assert ptxas._find_ptxas.cache_info().currsize == 1
    _clear_memoized()
    assert ptxas._find_ptxas.cache_info().currsize == 0


def test_a_server_that_cannot_start_is_not_retried_by_every_action(tmp_path: Path) -> None:
    from tileiras.cache.server_start import lock_path, start_in_background

    socket_path = str(tmp_path / ("s" * 120))  # a name no socket address can hold: the server cannot bind
    assert start_in_background(socket_path, sys.executable, LAUNCHER)
    wait_for_server_exit(lock_path(socket_path))  # the server gave up and let go of the lock
    assert not start_in_background(socket_path, sys.executable, LAUNCHER)


# --- no request jams the server (issue 37, item 7) ---------------------------------------------
def _ask(bench: Bench, argv: list[str], timeout: float = 15.0) -> bytes:
    request = Request([sys.executable, LAUNCHER, *argv], str(bench.work), dict(bench.env))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)  # a jammed pool never answers: a timeout here is the failure
        conn.connect(bench.socket)
        conn.sendall(encode_request(request))
        return conn.recv(16)


def _workers(server: subprocess.Popen[bytes]) -> set[int]:
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children")
    return {int(pid) for pid in children.read_text().split()} if children.exists() else set()


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_inputs_that_never_end_jam_no_worker(bench: Bench) -> None:
    """A FIFO as input blocked both workers in open() for good (every later action then waited the
    client's 60 s); /dev/zero grew a worker to 13 GB. Both are refused before reading now."""
    actions = plan(bench, KERNELS[:1])
    build_ordinarily(bench, actions)
    expected = outputs(bench, actions[0])
    remove(bench, expected)
    os.mkfifo(bench.root / "fifo")
    bench.start(workers=2)
    for bad in ("fifo", "fifo", "/dev/zero", "/dev/zero"):  # more than the pool: each worker meets one
        path = str(bench.root / bad) if bad == "fifo" else bad
        assert _ask(bench, ["tileiras", "--gpu-name", "sm_90", path, "-o", "x.cubin"]) == NOT_ANSWERED
    start = time.monotonic()
    done = bench.run(actions[0])
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 30 and outputs(bench, actions[0]) == expected
    assert bench.log_lines()[-1].startswith("answered")


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_a_worker_killed_by_a_signal_is_replaced(bench: Bench) -> None:
    import signal

    bench.start(workers=2)
    assert bench.server is not None
    deadline = time.monotonic() + 30
    while len(_workers(bench.server)) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    victim = min(_workers(bench.server))
    os.kill(victim, signal.SIGKILL)
    while victim in _workers(bench.server) or len(_workers(bench.server)) < 2:
        assert time.monotonic() < deadline, "the pool was not refilled"
        time.sleep(0.05)


def test_a_request_past_its_time_is_declined_and_retires_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    from tileiras.cache import server

    monkeypatch.setattr(server, "servable", lambda *args: True)
    monkeypatch.setattr(server, "answer", lambda request: (time.sleep(60), (b"", ""))[1])
    mine, theirs = socket.socketpair()
    with mine:
        mine.sendall(encode_request(Request(["python", "launch.py", "tileiras", "x"], "/", {})))
        start = time.monotonic()
        assert server.serve_one(theirs, ("python", "launch.py"), {}, None, seconds=0.5) is False
        assert time.monotonic() - start < 5
        assert mine.recv(16) == NOT_ANSWERED


def test_sigterm_removes_the_socket_and_stops_the_workers(bench: Bench) -> None:
    bench.start(workers=2)
    server = bench.server
    assert server is not None
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children")
    if not children.exists():
        pytest.skip("this kernel does not list a process's children")
    deadline = time.monotonic() + 30
    while len(workers := children.read_text().split()) < 2:
        assert time.monotonic() < deadline, "the workers were not forked"
        time.sleep(0.02)
    bench.stop()  # fails where the server outlives SIGTERM by 30 s
    assert not os.path.exists(bench.socket)
    deadline = time.monotonic() + 30
    while alive := [pid for pid in workers if _running(int(pid))]:
        assert time.monotonic() < deadline, f"workers {alive} outlived their server"
        time.sleep(0.05)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
