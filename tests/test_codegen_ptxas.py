"""ptxas discovery, invocation, diagnostics and resource reports."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tileiras.codegen import ptxas
from tileiras.codegen.cubin import read_cubin
from tileiras.codegen.nvptx import llvm_to_ptx
from tileiras.errors import CompileError, ExitCode, TileirasError

DATA = Path(__file__).parent / "data" / "llvm"
ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def vadd_ptx() -> str:
    return llvm_to_ptx((DATA / "vadd.ll").read_text(), "sm_90")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ptxas.ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def fake_toolkit(root: Path, script: str = "#!/bin/sh\necho fake\n") -> Path:
    binary = root / "bin" / "ptxas"
    binary.parent.mkdir(parents=True)
    binary.write_text(script)
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    return binary


def test_wheel_ptxas_is_found_without_env(clean_env: pytest.MonkeyPatch) -> None:
    found = ptxas.find_ptxas()
    assert found.is_file() and found.name == "ptxas"
    assert "nvidia" in found.parts


@pytest.mark.parametrize("winner", ["CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"])
def test_env_vars_in_order(clean_env: pytest.MonkeyPatch, tmp_path: Path, winner: str) -> None:
    order = list(ptxas.ENV_VARS)
    expected = None
    for name in order[order.index(winner):]:
        binary = fake_toolkit(tmp_path / name)
        clean_env.setenv(name, str(tmp_path / name))
        expected = expected or binary
    for name in order[: order.index(winner)]:
        clean_env.setenv(name, str(tmp_path / "empty" / name))  # set, but holds no ptxas: skipped
    assert ptxas.find_ptxas() == expected


def test_no_ptxas_anywhere(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setattr(ptxas, "_wheel_dirs", lambda: [])
    ptxas._find_ptxas.cache_clear()
    try:
        with pytest.raises(CompileError, match="cannot find ptxas"):
            ptxas.find_ptxas()
    finally:
        ptxas._find_ptxas.cache_clear()


def test_version() -> None:
    version = ptxas.ptxas_version()
    major, minor, *_ = (int(part) for part in version.split("."))
    assert (major, minor) >= (13, 0)


def test_arch_follows_the_ptx_target(vadd_ptx: str) -> None:
    assert ptxas.ptxas_arch(vadd_ptx, "sm_90") == "sm_90"
    assert ptxas.ptxas_arch(vadd_ptx.replace(".target sm_90", ".target sm_90a"), "sm_90") == "sm_90a"
    assert ptxas.ptxas_arch(vadd_ptx.replace(".target sm_90", ".target sm_100f"), "sm_100") == "sm_100f"
    assert ptxas.ptxas_arch(vadd_ptx, "sm_100a") == "sm_100a"
    with pytest.raises(TileirasError) as info:
        ptxas.ptxas_arch(vadd_ptx, "sm_75")
    assert info.value.code == ExitCode.INVALID_OPTIONS


def test_argv_shape(vadd_ptx: str) -> None:
    argv = ptxas.ptxas_argv(vadd_ptx, "sm_90", 2, lineinfo=True, extra=["-v"])
    assert argv[1:] == ["-arch", "sm_90", "--opt-level", "2", "--generate-line-info", "-v", "-o", "kernel.cubin",
                        "kernel.ptx"]
    debug = ptxas.ptxas_argv(vadd_ptx, "sm_90", 3, debug=True)
    assert debug[1:6] == ["-arch", "sm_90", "--opt-level", "0", "--device-debug"]


def test_assemble_gives_cubin_for_the_target(vadd_ptx: str) -> None:
    cubin = ptxas.assemble(vadd_ptx, "sm_90")
    assert read_cubin(cubin).sm == 90
    assert "vadd" in "".join(read_cubin(cubin).sections)
    # PTX for sm_90 also assembles for newer targets.
    assert read_cubin(ptxas.assemble(vadd_ptx, "sm_120")).sm == 120


def test_ptxas_error_carries_ptxas_message(vadd_ptx: str) -> None:
    broken = vadd_ptx.replace("ret;", "frobnicate.b32 %r1;")
    with pytest.raises(CompileError) as info:
        ptxas.assemble(broken, "sm_90")
    assert info.value.code == ExitCode.COMPILE_FAILED
    assert "frobnicate" in info.value.message and "ptxas" in info.value.message


def test_ptx_newer_than_gpu_is_rejected_by_ptxas(vadd_ptx: str) -> None:
    with pytest.raises(CompileError, match="sm_80"):
        ptxas.assemble(vadd_ptx, "sm_80")


def test_extra_options_and_lineinfo(vadd_ptx: str) -> None:
    plain = ptxas.assemble(vadd_ptx, "sm_90")
    assert ptxas.assemble(vadd_ptx, "sm_90", extra=["--maxrregcount", "32"]).startswith(b"\x7fELF")
    assert ptxas.assemble(vadd_ptx, "sm_90", opt_level=0) != plain


def test_cubin_does_not_depend_on_cwd(vadd_ptx: str, tmp_path: Path) -> None:
    script = ("import sys; from tileiras.codegen.ptxas import assemble; "
              "sys.stdout.buffer.write(assemble(sys.stdin.read(), 'sm_90', lineinfo=True))")
    outputs = []
    for sub in ("a", "b c"):
        (tmp_path / sub).mkdir()
        done = subprocess.run([sys.executable, "-c", script], input=vadd_ptx.encode(), cwd=tmp_path / sub,
                              env=dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path / sub)),
                              capture_output=True, check=True)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] == ptxas.assemble(vadd_ptx, "sm_90", lineinfo=True)


def test_resource_usage(vadd_ptx: str) -> None:
    usage = ptxas.resource_usage(vadd_ptx, "sm_90")
    assert set(usage) == {"vadd"}
    assert 4 <= usage["vadd"]["registers"] <= 64
    assert usage["vadd"]["spill_stores"] == usage["vadd"]["spill_loads"] == 0


def test_resource_usage_sees_spills() -> None:
    # Many live values and a tiny register budget force spills.
    loads = "\n".join(f"  %v{i} = load volatile float, ptr addrspace(1) %p{i}" for i in range(48))
    geps = "\n".join(f"  %p{i} = getelementptr float, ptr addrspace(1) %a, i64 {i}" for i in range(48))
    stores = "\n".join(f"  store volatile float %v{i}, ptr addrspace(1) %p{47 - i}" for i in range(48))
    ir = f"define ptx_kernel void @spill(ptr addrspace(1) %a) {{\n{geps}\n{loads}\n{stores}\n  ret void\n}}\n"
    ptx = llvm_to_ptx(ir, "sm_80")
    usage = ptxas.resource_usage(ptx, "sm_80", opt_level=3)
    assert usage["spill"]["spill_stores"] == 0
    capped = ptxas.resource_usage(ptx, "sm_80", opt_level=3, extra=["--maxrregcount", "32"])
    assert capped["spill"]["registers"] <= 32 < usage["spill"]["registers"]
    assert capped["spill"]["spill_stores"] > 0 and capped["spill"]["spill_loads"] > 0


def test_timeout_kills_a_hung_ptxas(clean_env: pytest.MonkeyPatch, tmp_path: Path, vadd_ptx: str) -> None:
    fake_toolkit(tmp_path / "cuda", "#!/bin/sh\nexec sleep 30\n")
    clean_env.setenv("CUDA_ROOT", str(tmp_path / "cuda"))
    clean_env.setenv("TILEIRAS_TOOL_TIMEOUT", "1")
    with pytest.raises(CompileError, match="timed out"):
        ptxas.assemble(vadd_ptx, "sm_90")


def test_crashing_ptxas_is_reported_by_signal(clean_env: pytest.MonkeyPatch, tmp_path: Path, vadd_ptx: str) -> None:
    fake_toolkit(tmp_path / "cuda", "#!/bin/sh\nkill -SEGV $$\n")
    clean_env.setenv("CUDA_ROOT", str(tmp_path / "cuda"))
    with pytest.raises(CompileError, match="SIGSEGV"):
        ptxas.assemble(vadd_ptx, "sm_90")


def test_unexecutable_ptxas(clean_env: pytest.MonkeyPatch, tmp_path: Path, vadd_ptx: str) -> None:
    binary = fake_toolkit(tmp_path / "cuda")
    binary.chmod(0o644)
    clean_env.setenv("CUDA_ROOT", str(tmp_path / "cuda"))
    if os.access(binary, os.X_OK):
        pytest.skip("running as a user who may execute any file")
    with pytest.raises(CompileError, match="could not be executed"):
        ptxas.assemble(vadd_ptx, "sm_90")


def test_ptxas_that_writes_no_cubin(clean_env: pytest.MonkeyPatch, tmp_path: Path, vadd_ptx: str) -> None:
    fake_toolkit(tmp_path / "cuda", "#!/bin/sh\nexit 0\n")
    clean_env.setenv("CUDA_ROOT", str(tmp_path / "cuda"))
    with pytest.raises(CompileError, match="wrote no cubin"):
        ptxas.assemble(vadd_ptx, "sm_90")


@pytest.mark.parametrize("window", [1, 2, 8])
def test_several_targets_assemble_at_once_in_target_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            window: int) -> None:
    """The driver runs up to one ptxas per CPU; the cubins are the same and come back in target order."""
    from tileiras.driver import compile as driver
    from tileiras.driver.options import parse_args

    gpus = ["sm_90", "sm_80", "sm_100"]
    monkeypatch.setattr(ptxas, "parallel_runs", lambda: window)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    arts = driver.Artifacts([])
    for gpu in gpus:
        arts.ptx[gpu] = llvm_to_ptx((DATA / "vadd.ll").read_text(), gpu)
    opts = parse_args(["--no-cache", *[a for g in gpus for a in ("--gpu-name", g)], "x.tileirbc"])
    driver._assemble_all(gpus, opts, None, arts, driver.StageTimer(False))
    assert list(arts.cubin) == gpus
    for gpu in gpus:
        assert arts.cubin[gpu] == ptxas.assemble(arts.ptx[gpu], gpu)
    assert not _leftovers(tmp_path)  # every private run directory is gone


def test_a_failing_target_stops_the_others(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tileiras.driver import compile as driver
    from tileiras.driver.options import parse_args

    monkeypatch.setattr(ptxas, "parallel_runs", lambda: 4)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    good = llvm_to_ptx((DATA / "vadd.ll").read_text(), "sm_90")
    arts = driver.Artifacts([])
    arts.ptx = {"sm_90": good, "sm_100": good.replace("ret;", "bogus_instruction;", 1), "sm_120": good}
    opts = parse_args(["--no-cache", "x.tileirbc"])
    cancelled: list[object] = []
    original = ptxas.PendingCubin.cancel
    monkeypatch.setattr(ptxas.PendingCubin, "cancel", lambda run: (cancelled.append(run), original(run)))
    with pytest.raises(CompileError, match="ptxas"):
        driver._assemble_all(list(arts.ptx), opts, None, arts, driver.StageTimer(False))
    assert len(cancelled) == 1  # sm_120's run, still pending when sm_100 failed
    assert not _leftovers(tmp_path)


def _leftovers(temp: Path) -> list[Path]:
    """What runs left in the temp directory, but for the (empty) per-user scratch root."""
    return [p for p in temp.rglob("*") if p.name != f"tileiras-{os.getuid()}"]
