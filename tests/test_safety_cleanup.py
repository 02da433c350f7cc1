"""Nothing outlives the compiler: after kill -9 its children (ptxas, the LLVM worker, isolated
children) die at once, its temporary folders are reclaimed by the next run, and a normal run
leaves nothing but the (empty) per-user scratch folder. Also as an unprivileged user whose
scratch folder was taken by someone else."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from safety_users import as_unprivileged, shared_tmp, unprivileged_python  # noqa: E402,F401

from tileiras import scratch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
UID = str(os.getuid())

# A stand-in ptxas: reports a version, then either hangs (as a huge kernel would) or writes a cubin.
FAKE_PTXAS = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 13.0, V13.0.88"; exit 0; fi
echo $$ > "$FAKE_PTXAS_PIDFILE"
if [ "$FAKE_PTXAS_MODE" = hang ]; then exec sleep 120; fi
printf '\\177ELF fake cubin' > kernel.cubin
"""
PTX = ".version 8.0\n.target sm_90\n.address_size 64\n"


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its new parent to reap it counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    if int(handle.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _wait_for(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kill -9 and /proc: Linux only")


@pytest.fixture
def fake_cuda(tmp_path: Path) -> Path:
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    ptxas = tmp_path / "cuda" / "bin" / "ptxas"
    ptxas.write_text(FAKE_PTXAS)
    ptxas.chmod(0o755)
    (tmp_path / "k.ptx").write_text(PTX)
    (tmp_path / "tmp").mkdir()
    return tmp_path


def _driver(work: Path, mode: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_ROOT": str(work / "cuda"), "TMPDIR": str(work / "tmp"),
           "FAKE_PTXAS_PIDFILE": str(work / "ptxas.pid"), "FAKE_PTXAS_MODE": mode}
    return subprocess.Popen([sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--gpu-name=sm_90",
                             "-o", "k.cubin", "k.ptx"], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_kill_9_takes_ptxas_along_and_the_next_run_reclaims_the_folder(fake_cuda: Path) -> None:
    driver = _driver(fake_cuda, "hang")
    pidfile = fake_cuda / "ptxas.pid"
    assert _wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 60), driver.communicate()
    ptxas = int(pidfile.read_text())
    scratch_root = fake_cuda / "tmp" / f"tileiras-{UID}"
    left = [p.name for p in scratch_root.iterdir()]
    assert len(left) == 1 and left[0].split("-")[1] == str(driver.pid)  # <namespace>-<pid>-<start>
    assert len(list((scratch_root / left[0]).glob("ptxas-*/kernel.ptx"))) == 1
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    driver.stdout.close()
    driver.stderr.close()
    try:
        assert _wait_for(lambda: not _alive(ptxas), 2), "ptxas outlived the compiler"
    finally:
        _kill_survivors([ptxas])
    assert [p.name for p in scratch_root.iterdir()] == left  # a killed run cannot clean up ...

    pidfile.unlink()
    again = _driver(fake_cuda, "ok")
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert (fake_cuda / "k.cubin").read_bytes().startswith(b"\x7fELF")
    assert list(scratch_root.iterdir()) == []  # ... the next one reclaims its folder, and leaves none


def _kill_parent_of_busy_child(script: str, work: Path) -> None:
    """Run `script` (prints 'ready' once its child is busy), kill -9 it, and require every child it
    had to be gone within a second."""
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], cwd=work, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    ready = parent.stdout.readline().strip() == "ready"
    children = _children(parent.pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()  # not communicate(): a surviving child would hold the pipes open
    parent.stdout.close()
    try:
        assert ready and children, "the script did not get its child going"
        assert _wait_for(lambda: not any(_alive(c) for c in children), 1.0), "a child outlived its parent"
    finally:
        _kill_survivors(children)
        parent.stderr.close()


def _kill_survivors(pids: list[int]) -> None:
    """After a failure: no test leaves a process behind."""
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_kill_9_takes_the_busy_llvm_worker_along(tmp_path: Path) -> None:
    sys.path.insert(0, os.path.dirname(__file__))
    from test_safety_limits import elementwise

    (tmp_path / "k.mlir").write_text(elementwise(1 << 16))  # seconds of LLVM work
    _kill_parent_of_busy_child("""
        import time
        from tileiras.codegen.nvptx import emit_later
        from tileiras.codegen.worker import LLVMWorker
        from tileiras.driver.compile import lower_to_llvm
        from tileiras.driver.options import parse_args
        from tileiras.text.parser import parse_module

        worker = LLVMWorker()
        module = parse_module(open("k.mlir").read(), "k.mlir")
        llvm_ir, _ = lower_to_llvm(module, "sm_90", parse_args(["--gpu-name=sm_90", "k.mlir"]))
        emit_later(llvm_ir, "sm_90", worker=worker)
        time.sleep(1.0)  # well into LLVM's seconds of work
        print("ready", flush=True)
        time.sleep(120)
    """, tmp_path)


def test_kill_9_takes_an_isolated_child_along(tmp_path: Path) -> None:
    _kill_parent_of_busy_child("""
        import time
        from tileiras.codegen.isolate import run_isolated

        def busy():
            while True:
                pass

        import os
        if os.fork() == 0:  # tell the test once the isolated child is running
            time.sleep(0.5)
            print("ready", flush=True)
            os._exit(0)
        run_isolated("busy loop", busy)
    """, tmp_path)


# -- the scratch folders ---------------------------------------------------------------------------
def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_reclaim_removes_only_folders_of_dead_owners(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = scratch._namespace()
    me = os.getpid()
    start = scratch._start_time(me)
    folders = {
        "dead": f"{ns}-{_dead_pid()}-12345",
        "pid reused": f"{ns}-{me}-{int(start) + 1}",  # this pid, another start time: its owner is gone
        "alive": f"{ns}-{me}-{start}",
        "other namespace": f"{int(ns) + 1}-{_dead_pid()}-1",
        "not ours": "some-folder",
    }
    for name in folders.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "kernel.ptx").write_text("x")
    scratch.reclaim(str(tmp_path))
    kept = {label for label, name in folders.items() if (tmp_path / name).exists()}
    assert kept == {"alive", "other namespace", "not ours"}


def test_the_process_folder_goes_with_its_last_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr(scratch, "_own", None)
    first = scratch.TempDir(prefix="a-")
    second = scratch.TempDir(prefix="b-")
    own = Path(first.name).parent
    assert own == Path(second.name).parent and own.parent == tmp_path / f"tileiras-{UID}"
    assert oct(own.parent.stat().st_mode & 0o777) == "0o700"
    first.cleanup()
    assert own.is_dir() and not Path(first.name).exists()
    second.cleanup()
    assert not own.exists() and list((tmp_path / f"tileiras-{UID}").iterdir()) == []


def test_an_unprivileged_user_whose_scratch_folder_was_taken_still_compiles(shared_tmp: Path) -> None:
    """Someone else made <tmp>/tileiras-<uid> (or a link there): the run must not use it, must not
    fail, and must leave nothing behind."""
    python = unprivileged_python()
    nobody_uid = str(as_unprivileged(python, ["-c", "import os; print(os.getuid())"], cwd=shared_tmp).stdout.strip())
    (shared_tmp / "tmp").mkdir(mode=0o777)
    os.chmod(shared_tmp / "tmp", 0o1777)
    taken = shared_tmp / "tmp" / f"tileiras-{nobody_uid}"
    (shared_tmp / "work").mkdir(mode=0o777)
    os.chmod(shared_tmp / "work", 0o777)
    (shared_tmp / "work" / "k.ptx").write_text(_real_ptx())
    cuda = shared_tmp / "cuda" / "bin"
    cuda.mkdir(parents=True)
    from tileiras.codegen.ptxas import find_ptxas

    os.symlink(find_ptxas(), cuda / "ptxas")
    for takeover in ("folder", "symlink"):
        if taken.is_symlink() or taken.is_file():
            taken.unlink()
        elif taken.exists():
            shutil.rmtree(taken)
        if takeover == "folder":
            taken.mkdir(mode=0o700)  # root's
        else:
            os.symlink(shared_tmp / "work", taken)
        result = as_unprivileged(python, ["-m", "tileiras.driver.tileiras_main", "--no-cache", "--gpu-name=sm_90",
                                          "-o", "k.cubin", "k.ptx"], cwd=shared_tmp / "work",
                                 env={"TMPDIR": str(shared_tmp / "tmp"), "CUDA_ROOT": str(cuda.parent)})
        assert result.returncode == 0, (takeover, result.stderr)
        assert (shared_tmp / "work" / "k.cubin").read_bytes().startswith(b"\x7fELF")
        assert sorted(p.name for p in (shared_tmp / "tmp").iterdir()) == [taken.name], takeover
        assert sorted(p.name for p in (shared_tmp / "work").iterdir()) == ["k.cubin", "k.ptx"], takeover
        (shared_tmp / "work" / "k.cubin").unlink()


def _real_ptx() -> str:
    from tileiras.codegen.nvptx import llvm_to_ptx

    return llvm_to_ptx((ROOT / "tests" / "data" / "llvm" / "vadd.ll").read_text(), "sm_90")
