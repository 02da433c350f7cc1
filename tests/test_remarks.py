"""Optimization remarks (`--remarks*`, `--remark-format`, `--remarks-output-file`): LLVM remark
YAML that a YAML library reads, NVIDIA's filters, and every claim checked against the SASS of the
cubin it describes (cuobjdump): tensor cores or not, load/store/cp.async widths, registers, spills."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import sass  # noqa: E402
from remark_yaml import arg, load_remarks  # noqa: E402

CORPUS = ROOT / "tests" / "corpus" / "bytecode"
MMA_OPS = ("HMMA", "IMMA", "DMMA", "QMMA", "OMMA", "HGMMA", "IGMMA", "QGMMA", "UTCHMMA", "UTCIMMA", "UTCQMMA")
# the instruction a passed tensor-core remark names -> the SASS family it must show
FAMILY = {"mma.sync": ("HMMA", "IMMA", "QMMA", "OMMA"), "wgmma.mma_async": ("HGMMA", "IGMMA", "QGMMA"),
          "tcgen05.mma": ("UTCHMMA", "UTCIMMA", "UTCQMMA")}
pytestmark = pytest.mark.skipif(sass.CUOBJDUMP is None, reason="cuobjdump (nvidia-cuda-cuobjdump) is not installed")


def tileiras(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tileiras", *args], capture_output=True, text=True, cwd=cwd or ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, timeout=600)


def compile_with_remarks(src: Path, gpu: str, work: Path, *extra: str) -> tuple[Path, list[dict]]:
    cubin, yaml_file = work / f"k.{gpu}.cubin", work / f"k.{gpu}.yaml"
    result = tileiras(str(src), "--gpu-name", gpu, "-o", str(cubin), "--lineinfo", "--remark-format=yaml",
                      "--remarks=all", f"--remarks-output-file={yaml_file}", *extra)
    assert result.returncode == 0, result.stderr
    return cubin, load_remarks(yaml_file.read_text())


@pytest.fixture(scope="module")
def aligned_matmul(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus matmul exported by cuTile with 128-byte aligned, unit-stride f16 operands: the facts
    that allow cp.async (the committed corpus makes no alignment promise)."""
    out = tmp_path_factory.mktemp("aligned") / "matmul_aligned.tileirbc"
    script = """
import sys
from generate import load_kernel_files
import cuda.tile as ct
from cuda.tile.compilation import (ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature,
                                   export_kernel)
matmul = next(k for _, m in load_kernel_files() for k in m.KERNELS if k.name == "matmul").function
def arr(dtype):
    return ArrayConstraint(dtype=dtype, ndim=2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                           may_alias_internally=False, stride_constant=(None, 1), shape_divisible_by=64,
                           stride_divisible_by=(64, 1), base_addr_divisible_by=128)
sig = KernelSignature(parameters=[arr(ct.float16), arr(ct.float16), arr(ct.float32), ConstantConstraint(64),
                                  ConstantConstraint(64), ConstantConstraint(32)],
                      calling_convention=CallingConvention.cutile_python_v1(), symbol="matmul_aligned")
export_kernel(matmul, [sig], sys.argv[1], output_format="tileir_bytecode", bytecode_version="13.4", gpu_code="sm_80")
"""
    subprocess.run([sys.executable, "-c", script, str(out)], check=True, cwd=ROOT / "tests" / "corpus",
                   env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT / "tests" / "corpus")})
    return out


CASES = [
    ("matmul", "sm_90"), ("matmul_tf32", "sm_80"), ("bmm", "sm_100"), ("attention", "sm_90"),
    ("softmax", "sm_120"), ("ew_float", "sm_80"), ("gather_scatter", "sm_90"), ("hints", "sm_90"), ("aligned", "sm_80"),
    ("aligned", "sm_90"), ("aligned", "sm_100"),
]


@pytest.mark.parametrize("kernel,gpu", CASES, ids=[f"{k}-{g}" for k, g in CASES])
def test_remarks_agree_with_the_sass(tmp_path: Path, aligned_matmul: Path, kernel: str, gpu: str) -> None:
    src = aligned_matmul if kernel == "aligned" else CORPUS / kernel / "13.4.tileirbc"
    cubin, remarks = compile_with_remarks(src, gpu, tmp_path)
    code = sass.functions(cubin)
    regs = sass.registers(cubin)
    assert remarks and code
    for function, opcodes in code.items():
        mine = [r for r in remarks if r["Function"] == function]
        mma = [r for r in mine if r["Name"] == "RemarkTensorCoreMMA"]
        uses_mma = any(op.startswith(MMA_OPS) for op in opcodes)
        if any(r["Kind"] == "Passed" for r in mma):
            assert uses_mma, f"{function}: a remark says tensor cores, the SASS has no MMA"
            for r in mma:
                if r["Kind"] == "Passed":
                    family = next(f for name, f in FAMILY.items() if name in arg(r, "Instruction"))
                    assert any(op.startswith(family) for op in opcodes), (function, arg(r, "Instruction"))
        elif mma:
            assert not uses_mma, f"{function}: every mma remark says FMA, the SASS has MMA"

        def claimed(name: str, instruction: str) -> set[int]:
            return {int(str(arg(r, "Width")).split()[0]) for r in mine
                    if r["Name"] == name and str(arg(r, "Instruction")).startswith(instruction)}

        # every access instruction in the SASS is one a remark admits (no wider, vectorized one unclaimed),
        # and every claimed width is there
        assert sass.widths(opcodes, "LDG") == claimed("RemarkMemoryLoadInstructionSelected", "Global-memory"), function
        assert sass.widths(opcodes, "LDGSTS") == claimed("RemarkMemoryLoadInstructionSelected", "Ldgsts"), function
        assert sass.widths(opcodes, "STG") <= claimed("RemarkMemoryStoreInstructionSelected", "Global-memory"), function
        tma = [r for r in mine if r["Name"] == "RemarkMemoryLoadInstructionSelected"
               and str(arg(r, "Instruction")).startswith("TMA")]
        assert bool(tma) == any(op.startswith("UTMALDG") for op in opcodes), function   # TMA loads, claimed
        tma_stores = [r for r in mine if r["Name"] == "RemarkMemoryStoreInstructionSelected"
                      and str(arg(r, "Instruction")).startswith("TMA")]
        assert bool(tma_stores) == any(op.startswith("UTMASTG") for op in opcodes), function
        usage = [r for r in mine if r["Name"] in ("RemarkRegisterUsage", "RemarkRegisterSpills")]
        assert len(usage) == 1 and int(arg(usage[0], "Registers")) == regs[function]
        spills = usage[0]["Name"] == "RemarkRegisterSpills"
        assert spills == any(op.startswith(("STL", "LDL")) for op in opcodes), function
        for r in mine:  # with --lineinfo every op-level remark points into the kernel's source
            if r["Name"] not in ("RemarkRegisterUsage", "RemarkRegisterSpills"):
                assert r["DebugLoc"]["File"].endswith(".py") and r["DebugLoc"]["Line"] > 0, r


def test_spills_reported_by_ptxas_are_remarked_and_real(tmp_path: Path) -> None:
    """Squeeze the registers (a `.maxnreg 32` on every kernel of the PTX that does not reallocate its
    registers between warp roles: ptxas refuses a setmaxnreg above the limit) so that ptxas spills: the
    remark says so, with the registers of the SASS, and the SASS has local-memory traffic."""
    import re

    from tileiras.codegen.ptxas import PendingCubin
    from tileiras.remarks import from_ptxas_log

    ptx = tmp_path / "k.ptx"
    assert tileiras(str(CORPUS / "matmul" / "13.4.tileirbc"), "--gpu-name", "sm_90", "--emit=ptx", "-o",
                    str(ptx)).returncode == 0
    entries = re.split(r"(?=\.visible \.entry)", ptx.read_text())
    squeezed = "".join(e if "setmaxnreg" in e else re.sub(r"(\.reqntid [0-9, ]+)\n", r"\1\n.maxnreg 32\n", e)
                       for e in entries)
    run = PendingCubin(squeezed, "sm_90", extra=("-v",))
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(run.result())
    found = {r.function: r for r in from_ptxas_log(run.info)}
    code, regs = sass.functions(cubin), sass.registers(cubin)
    assert set(found) == set(code)
    assert any(r.name == "RemarkRegisterSpills" for r in found.values()), "nothing spilled at 32 registers"
    for function, r in found.items():
        local = any(op.startswith(("STL", "LDL")) for op in code[function])
        assert (r.name == "RemarkRegisterSpills") == local, function
        assert dict(r.args)["Registers"] == str(regs[function])


@pytest.mark.parametrize("flags,kinds,passes", [
    (["--remarks-passed=memory"], {"Passed"}, {"Memory"}),
    (["--remarks=tensorcore"], {"Passed", "Failure"}, {"Tensor-core"}),
    (["--remarks=all", "--remarks-missed=none"], {"Passed", "Failure", "Analysis"}, {"Memory", "Tensor-core"}),
    (["--remarks-failed=all", "--remarks-analysis=memory"], {"Failure", "Analysis"}, {"Memory", "Tensor-core"}),
])
def test_filters_keep_the_kinds_and_categories_asked_for(tmp_path: Path, flags: list[str], kinds: set[str],
                                                        passes: set[str]) -> None:
    out = tmp_path / "r.yaml"
    result = tileiras(str(CORPUS / "matmul" / "13.4.tileirbc"), "--gpu-name", "sm_90", "-o", str(tmp_path / "k.cubin"),
                      "--remark-format=yaml", f"--remarks-output-file={out}", *flags)
    assert result.returncode == 0, result.stderr
    remarks = load_remarks(out.read_text())
    assert {r["Kind"] for r in remarks} == kinds
    assert {r["Pass"] for r in remarks} == passes


def test_cache_hit_gives_the_same_remarks(tmp_path: Path) -> None:
    env = {"TILEIRAS_CACHE_DIR": str(tmp_path / "cache")}
    texts = []
    for run in ("miss", "hit"):
        out = tmp_path / f"{run}.yaml"
        result = tileiras(str(CORPUS / "matmul" / "13.4.tileirbc"), "--gpu-name", "sm_90", "-o",
                          str(tmp_path / "k.cubin"), "--remark-format=yaml", "--remarks=all",
                          f"--remarks-output-file={out}", "--time-passes", env=env)
        assert result.returncode == 0, result.stderr
        texts.append(out.read_text())
    assert "lower to LLVM IR" not in result.stderr and "ptxas" not in result.stderr  # both stages were hits
    assert texts[0] == texts[1] and load_remarks(texts[1])


def test_command_line_format_goes_to_stdout() -> None:
    result = tileiras(str(CORPUS / "matmul" / "13.4.tileirbc"), "--gpu-name", "sm_90", "-o", os.devnull,
                      "--remarks=tensorcore", "--lineinfo")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "in function: matmul_float16:" in lines
    assert "    remark[passed]: MMA operation successfully optimized to use Tensor Cores" in lines
    assert '      --> "kernels/matmul.py":18:14' in lines


def test_nvidia_remarks_read_with_the_same_reader_and_names(tmp_path: Path) -> None:
    """NVIDIA's file and ours are the same format: one reader, the same keys, and where both compilers
    remark the same decision (tensor cores for an mma; an index width) the same name and location."""
    nvidia = sass.fs.oracle("tileiras")
    if nvidia is None:
        pytest.skip("NVIDIA's tileiras (nvidia-cuda-tileiras) is not installed")
    src = CORPUS / "matmul" / "13.4.tileirbc"
    theirs_file = tmp_path / "theirs.yaml"
    subprocess.run([nvidia, str(src), "--gpu-name", "sm_90", "-o", str(tmp_path / "t.cubin"), "--lineinfo",
                    "--remark-format=yaml", "--remarks=all", f"--remarks-output-file={theirs_file}"], check=True)
    theirs = load_remarks(theirs_file.read_text())
    _, ours = compile_with_remarks(src, "sm_90", tmp_path)

    def where(remarks: list[dict], name: str) -> set[tuple[str, int]]:
        return {(r["DebugLoc"]["File"], r["DebugLoc"]["Line"]) for r in remarks if r["Name"] == name}

    for name in ("RemarkTensorCoreMMA", "RemarkTensorViewIndexTypeNarrowing", "RemarkMemoryLoadInstructionSelected"):
        assert where(theirs, name) and where(theirs, name) == where(ours, name), name


def test_yaml_writer_quotes_what_needs_quoting() -> None:
    from remark_yaml import load_remarks as read
    from tileiras.remarks import Remark, to_yaml

    tricky = ["it's: a 'test'", "- dash", "#hash", "yes", "123", "[list]", "{map}", "a: b", " padded "]
    remark = Remark("missed", "memory", "RemarkX", "k", "msg: with colon", "dir/f.py", 3, 4,
                    tuple((f"Key{i}", t) for i, t in enumerate(tricky)))
    (doc,) = read(to_yaml([remark]))
    assert doc["Kind"] == "Missed" and doc["Pass"] == "Memory" and doc["Function"] == "k"
    assert doc["DebugLoc"] == {"File": "dir/f.py", "Line": 3, "Column": 4}
    assert [list(item.values())[0] for item in doc["Args"]] == ["msg: with colon", *tricky]


def test_several_targets_name_their_target(tmp_path: Path) -> None:
    out = tmp_path / "r.yaml"
    result = tileiras(str(CORPUS / "softmax" / "13.4.tileirbc"), "--gpu-name", "sm_80", "--gpu-name", "sm_90",
                      "--emit=fatbin", "-o", str(tmp_path / "k.fatbin"), "--remark-format=yaml", "--remarks=all",
                      f"--remarks-output-file={out}")
    assert result.returncode == 0, result.stderr
    remarks = load_remarks(out.read_text())
    targets = [arg(r, "Target") for r in remarks]
    assert set(targets) == {"sm_80", "sm_90"}
    # sm_90 adds why a row tile is not copied by TMA and why no producer warps run ahead (sm_80 has neither);
    # the rest are per target alike
    shared = [t for r, t in zip(remarks, targets)
              if not r["Name"].startswith("RemarkTma") and r["Name"] != "RemarkWarpSpecialization"]
    assert shared.count("sm_80") == shared.count("sm_90") and len(shared) < len(targets)
