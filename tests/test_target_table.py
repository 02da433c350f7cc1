"""The target table (tileiras/target/table.py): one row per target, queried by feature name.

Checks the rows and their features, that the facts of the five tables it replaced (codegen/targets.py,
lowering/features.py, lowering/smem.py, schedule/resources.py, ops_blockscale.FORMS) and of the literal
SM checks in the lowering are kept, and the rule that holds it together: no module but the table
compares SM numbers or target names.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tileiras.errors import TileirasError
from tileiras.target import BASE_NAMES, FEATURES, MMA_KINDS, ROWS, caps, since, with_feature

ROOT = Path(__file__).resolve().parent.parent


def names(feature: str) -> list[str]:
    return [row.name for row in with_feature(feature)]


# -- the rows --

def test_every_accepted_target_has_one_row() -> None:
    from tileiras.codegen import targets
    from tileiras.driver.options import GPU_NAMES

    assert BASE_NAMES == ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103", "sm_107",
                          "sm_110", "sm_120", "sm_121")
    assert GPU_NAMES == BASE_NAMES
    # the codegen view: a base target and its a/f variants per row, nothing else
    assert set(targets.TARGETS) == {row.name + s for row in ROWS for s in ("", *row.variants)}
    assert [n for n in targets.TARGETS if n.startswith("sm_90")] == ["sm_90", "sm_90a"]


def test_rows_name_only_known_features() -> None:
    for row in ROWS:
        assert row.features <= set(FEATURES), row.name
        assert row.mma in MMA_KINDS and row.blockscale in ("native", "fma")
        assert row.has(row.mma) and not any(row.has(m) for m in MMA_KINDS if m != row.mma)


def test_variants_and_numbers_reach_the_same_row() -> None:
    assert caps("sm_90a") is caps("sm_90") is caps(90)
    assert caps("sm_100f") is caps("sm_100a") is caps(100)
    for bad in ("sm_80a", "sm_90f", "sm_75", "sm_999", "gfx90a", 75):
        with pytest.raises(TileirasError, match="unsupported GPU target"):
            caps(bad)  # type: ignore[arg-type]


def test_an_unknown_feature_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        caps(90).has("tmaa")


# -- the facts of the replaced tables, kept --

def test_tensor_cores_per_target() -> None:
    """mma_forms.select_wgmma (sm != 90), ops_tcgen05 (sm in (100, 103)): the instruction each target builds on."""
    mma = {row.name: row.mma for row in ROWS}
    assert [n for n, m in mma.items() if m == "wgmma"] == ["sm_90"]
    assert [n for n, m in mma.items() if m == "tcgen05"] == ["sm_100", "sm_103", "sm_110"]
    assert mma["sm_80"] == mma["sm_89"] == mma["sm_120"] == mma["sm_121"] == "mma.sync"


def test_tma_clusters_and_pairs() -> None:
    """pipelined_loop.TMA_TARGETS, row_tma.TARGETS, multicast (sm_90), clusters.supports_clusters,
    the CTA pairs (sm_100 / sm_103), warp_specialize.MMA_SYNC_TARGETS, uses_mbarriers (sm >= 90)."""
    assert names("tma") == ["sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"]
    assert names("row_tma") == ["sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"]
    assert names("multicast") == ["sm_90"]
    assert names("clusters") == ["sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121"]
    assert names("cta_pairs") == ["sm_100", "sm_103", "sm_110"]
    assert [row.name for row in ROWS if row.mma_sync_roles] == ["sm_120", "sm_121"]
    assert names("mbarrier_tx") == names("griddepcontrol") == [row.name for row in ROWS if row.sm >= 90]
    assert {row.name: row.tma_box_rows for row in ROWS if row.tma_box_rows} == {
        "sm_100": 128, "sm_103": 128, "sm_110": 128}


def test_shared_and_tensor_memory() -> None:
    """Shared memory per block (opt-in) and per SM, and the tensor memory of the tcgen05 targets
    (lowering/tmem.COLUMNS)."""
    from tileiras.lowering.tmem import COLUMNS

    assert {row.sm: row.smem_per_block for row in ROWS} == {
        80: 166912, 86: 101376, 87: 166912, 88: 101376, 89: 101376, 90: 232448, 100: 232448, 103: 232448,
        107: 232448, 110: 232448, 120: 101376, 121: 101376}
    assert all(row.smem_per_block <= row.smem_per_sm for row in ROWS)
    assert all((row.tmem_columns == COLUMNS) == row.has("tcgen05") for row in ROWS)


def test_scheduling_families() -> None:
    """schedule/resources._FAMILY_OF."""
    from tileiras.schedule.resources import FAMILIES, family_of, machine

    assert {row.sm: row.family for row in ROWS} == {
        80: "sm_80", 86: "sm_80", 87: "sm_80", 88: "sm_80", 89: "sm_80", 90: "sm_90", 100: "sm_100",
        103: "sm_100", 107: "sm_100", 110: "sm_100", 120: "sm_120", 121: "sm_120"}
    assert all(row.family in FAMILIES for row in ROWS)
    assert family_of(121).name == "sm_120" and machine(100).smem_bytes == 232448
    # the family's fastest tensor unit and TMA are the row's (sm_107 is scheduled as sm_100 while the
    # lowering builds no tcgen05 or TMA for it: see its row)
    for row in ROWS:
        if row.name != "sm_107":
            assert family_of(row.sm).tensor_unit == row.mma, row.name
            assert family_of(row.sm).has_tma == row.has("tma"), row.name


def test_block_scaled_forms() -> None:
    """The block-scaled mma.sync form: native on sm_120 / sm_121, FMA elsewhere."""
    assert [row.name for row in ROWS if row.blockscale == "native"] == ["sm_120", "sm_121"]
    assert caps(100).blockscale == caps(110).blockscale == caps(80).blockscale == "fma"
    assert caps(121).blockscale == "native"


def test_element_types_and_their_diagnostic() -> None:
    """lowering/features.FEATURES (lowest SM) and ONLY_ON (sm_107's ue5m3)."""
    lowest = {f: (since(f).name if since(f) else None) for f in
              ("f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f4E2M1FN", "mmaf_scaled", "bf16_atomic_add", "fnv8E5M3FNU")}
    assert lowest == {"f8E4M3FN": "sm_89", "f8E5M2": "sm_89", "f8E8M0FNU": "sm_100", "f4E2M1FN": "sm_100",
                      "mmaf_scaled": "sm_100", "bf16_atomic_add": "sm_90", "fnv8E5M3FNU": None}
    assert names("fnv8E5M3FNU") == ["sm_107"]

    from types import SimpleNamespace

    from tileiras.errors import CompileError
    from tileiras.lowering.features import require

    op = SimpleNamespace(name="cuda_tile.ftof", location=None)
    require(op, "f8E4M3FN", 89, "sm_89")
    with pytest.raises(CompileError, match=r"element type f8E4M3FN requires sm_89 or newer; the target is sm_80"):
        require(op, "f8E4M3FN", 80, "sm_80")
    with pytest.raises(CompileError, match=r"fnv8E5M3FNU requires sm_107 \(no other family has it\); the target is sm_120"):
        require(op, "fnv8E5M3FNU", 120, "sm_120")


def test_codegen_rows() -> None:
    """codegen/targets.py: LLVM's CPU and PTX ISA per accepted name, from the table's rows."""
    from tileiras.codegen.targets import TARGETS

    assert (TARGETS["sm_90a"].llvm_cpu, TARGETS["sm_90a"].llvm_ptx, TARGETS["sm_90a"].ptx_version) == ("sm_90a", 88, 88)
    assert [(TARGETS[n].llvm_cpu, TARGETS[n].ptx_version) for n in ("sm_107", "sm_107a", "sm_107f")] == [
        ("sm_100", 94), ("sm_100f", 94), ("sm_100f", 94)]
    assert TARGETS["sm_110f"].llvm_ptx == TARGETS["sm_88"].llvm_ptx == 90
    assert not any(t.header_rewritten for n, t in TARGETS.items() if not n.startswith("sm_107"))


def test_tma_descriptor_parameter_base() -> None:
    """codegen/nv_host.param_base: 0x210 on sm_90, 0 from sm_100 on, none before sm_90."""
    from tileiras.codegen.nv_host import param_base
    from tileiras.errors import CompileError

    assert (param_base(90), param_base(100), param_base(120)) == (0x210, 0, 0)
    with pytest.raises(CompileError, match="TMA descriptors need sm_90 or later, not sm_89"):
        param_base(89)


# -- the rule: the table is the only place that knows targets --

# Comparisons of SM numbers or target names, tables of SM numbers, and target names taken apart by hand.
_SM = r"(?:80|86|87|88|89|90|100|103|107|110|120|121)"
LITERAL_CHECKS = re.compile(
    r"(?:\bsm|\.sm)\s*(?:==|!=|<=|>=|<|>)(?!=)"                 # sm >= 90, k.sm == 90, sm < lowest
    r"|(?:\bsm|\.sm)\s+(?:not\s+)?in\b"                           # sm in (100, 103), k.sm in TARGETS
    r"|\bgpu\s*(?:==|!=)|[\"']sm_\d+[af]?[\"']\s*(?:==|!=|\bin\b)"  # gpu == "sm_90"
    rf"|[(\[{{]\s*{_SM}\s*[,:][^\n#]*\b{_SM}\s*[,:)\]}}]"          # (90, 100, 103), {{100: 128, 103: 128}}
    r"|rstrip\([\"']af[\"']\)|\bgpu\[\d|gpu\.split\("              # sm_90a taken apart by hand
)
# Where a comparison of SM numbers is no target capability: the fatbinary container describes a cubin
# of any SM, including targets this compiler does not build (`.nv.compat` in entry headers from
# sm_100 on; a cubin must be for the SM it is packaged as). The emulator's table of the PTX ISA's minimum
# `.target` per instruction checks PTX from any compiler (NVIDIA's included) against the ISA, not what this
# compiler builds for a target: its own one table, compared in one place.
ALLOWED = {"tileiras/codegen/fatbin.py": 2, "tileiras/emulator/isa_forms.py": 4}


def test_no_literal_target_checks_outside_the_table() -> None:
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tileiras").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("tileiras/target/"):
            continue
        hits = [f"{i}: {line.strip()}" for i, line in enumerate(path.read_text().splitlines(), 1)
                if LITERAL_CHECKS.search(line.split("#")[0]) and not line.lstrip().startswith(("#", '"', "'"))]
        if hits and len(hits) != ALLOWED.get(rel, 0):
            found[rel] = hits
    assert not found, ("ask tileiras/target (caps(gpu).has(feature)) instead of comparing targets:\n"
                       + "\n".join(f"{f}:{h}" for f, hs in found.items() for h in hs))


def test_the_rule_catches_what_it_forbids() -> None:
    for line in ("if k.sm >= 90:", "return sm in (90, 100, 103, 110)", "if sm not in (100, 103):",
                 "TMA_TARGETS = (90, 100, 103, 120, 121)", "TMA_BOX_ROWS = {100: 128, 103: 128}",
                 'if gpu == "sm_90":', 'sm = int(gpu[3:].rstrip("af"))', 'if assignment.sm != 90:'):
        assert LITERAL_CHECKS.search(line), line
    for line in ('if k.caps.has("tma"):', "rows = k.caps.tma_box_rows or MAX_BOX", "_SWIZZLE = {128: 1, 64: 2}"):
        assert not LITERAL_CHECKS.search(line), line


# -- enabling a feature is an edit of one row: sm_110's tcgen05, TMA and CTA pairs --

def test_sm_110_is_sm_100_but_for_its_ptx_version() -> None:
    """The PTX ISA gives sm_110a what sm_100a has (tcgen05, TMA, CTA pairs); its row says so, and
    nothing else had to change for the lowering to build sm_100's code for it (next test)."""
    from tileiras.ir.record import replace

    assert replace(caps(110), name="sm_100", sm=100, ptx=88) == caps(100)
    assert replace(caps(121), name="sm_120", sm=120) == caps(120)


@pytest.mark.parametrize("name, base", [("mm_f16_128x128x64", "sm_100"), ("layernorm_f16_n4096", "sm_100"),
                                        ("mm_f16_128x128x64", "sm_120"), ("layernorm_f16_n4096", "sm_120")])
def test_a_target_with_the_same_row_gets_the_same_code(name: str, base: str) -> None:
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    other = {"sm_100": "sm_110", "sm_120": "sm_121"}[base]
    path = ROOT / "tests" / "realistic" / "bytecode" / f"{name}.tileirbc"
    ir = {gpu: lower_module(load_module(path.read_bytes(), path.name), gpu)[0] for gpu in (base, other)}
    assert ir[other].replace(other, base) == ir[base]
    if base == "sm_100":
        assert ("tcgen05.mma" in ir[other]) == name.startswith("mm_")
        assert "cp.async.bulk.tensor" in ir[other]


def test_the_table_sits_below_the_levels_that_ask_it() -> None:
    """tileaa, tileas, schedule, lowering and codegen import the table; it imports none of them."""
    import subprocess
    import sys

    code = ("import sys, tileiras.target; "
            "print(sorted(m for m in sys.modules if m.startswith('tileiras.') and not m.startswith('tileiras.target')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "['tileiras.errors', 'tileiras.ir', 'tileiras.ir.record']"


# -- the stages of sm_90's pipelines are one field of its row --

def test_the_deepest_ring_of_a_target_is_its_rows_max_stages(monkeypatch) -> None:
    """How deep a pipelined loop's ring goes is the modulo schedule's ask (the depth that covers its loads'
    latency), the shared memory's room and the target row's `max_stages`: lowering that one field of sm_90's row
    makes the realistic sm_90 matmul's ring 3 stages deep (5 as scheduled), and nothing else changes: another
    target's code, the loop's schedule."""
    from tileiras.ir.record import replace
    from tileiras.target import table

    path = ROOT / "tests" / "realistic" / "bytecode" / "mm_f16_128x128x64.tileirbc"
    before = {gpu: _lowered(path, gpu) for gpu in ("sm_90", "sm_100")}
    monkeypatch.setitem(table.BY_SM, 90, replace(table.BY_SM[90], max_stages=3))
    after = {gpu: _lowered(path, gpu) for gpu in ("sm_90", "sm_100")}
    assert after["sm_100"] == before["sm_100"]
    assert "5-stage TMA pipeline" in before["sm_90"][1] and "(5 stages as scheduled" in before["sm_90"][1]
    assert "3-stage TMA pipeline" in after["sm_90"][1] and "(3 stages at the target's deepest" in after["sm_90"][1]
    schedule = re.compile(r"modulo schedule, II \d+ cycles[^\n]*")
    assert schedule.findall(after["sm_90"][1]) == schedule.findall(before["sm_90"][1])
    # its 3 full and 3 empty mbarriers, where 5 and 5 were
    assert after["sm_90"][0].count("mbarrier.init") < before["sm_90"][0].count("mbarrier.init")


def _lowered(path: Path, gpu: str) -> tuple[str, str]:
    """(the LLVM IR, the schedule notes --print-ir-after-all prints) of `path` for `gpu`."""
    import contextlib
    import io

    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        ir = lower_module(load_module(path.read_bytes(), path.name), gpu, print_ir_after_all=True)[0]
    return ir, "\n".join(line for line in err.getvalue().splitlines() if line.startswith("//   loop at"))
