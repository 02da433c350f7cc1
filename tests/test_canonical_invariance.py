"""The canonical form makes the code independent of the form a kernel arrives in (issue: one canonical
form before any decision): the same PTX whatever bytecode version cuTile wrote (13.1 .. 13.5) and under
semantics-preserving rewrites of the IR (tests/ir_rewrites.py). A sample runs by default; `-m sweep`
runs every kernel and target (benchmarks/canonical_form.py prints the same over the three corpora)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from canonical_support import exported, normalized_ptx, reencoded, unit_versions
from ir_rewrites import REWRITES
from tileiras.frontend import load_module

ROOT = Path(__file__).resolve().parent.parent
UNIT = unit_versions()
# kernels whose op set changes with the version (an op or operand the older versions lack): different
# programs, not different forms of one program
CHANGES_WITH_VERSION = {
    "math_fpowi": "fpowi exists from 13.4; before, cuTile writes a loop of mulf",
    "print_assert": "13.1's print has no token (13.2 added it), so it is not ordered with the stores",
}
SAMPLE = ("bmm", "attention", "while_break", "softmax", "matmul", "layernorm", "gather_scatter", "if_else", "loop_carried")
TARGET_SAMPLE = ("sm_90", "sm_100")


def _ptx(data: bytes, gpu: str) -> list[str] | None:
    return normalized_ptx(load_module(data, "kernel"), gpu)


def _unit_cases(sample: bool) -> list:
    names = [n for n in UNIT if n not in CHANGES_WITH_VERSION and (not sample or n in SAMPLE)]
    targets = TARGET_SAMPLE if sample else ("sm_80", "sm_90", "sm_100", "sm_120")
    marks = () if sample else (pytest.mark.sweep,)
    return [pytest.param(n, t, marks=marks, id=f"{'sample' if sample else 'all'}-{n}-{t}") for n in names for t in targets]


@pytest.mark.parametrize("name,gpu", _unit_cases(True) + _unit_cases(False))
def test_unit_corpus_same_ptx_at_every_version(name: str, gpu: str) -> None:
    paths = UNIT[name]
    newest = _ptx(paths[-1].read_bytes(), gpu)
    for path in paths[:-1]:
        assert _ptx(path.read_bytes(), gpu) == newest, f"{name} at {path.stem} differs from {paths[-1].stem}"
    assert _ptx(reencoded(paths[-1], "13.5"), gpu) == newest, f"{name} at 13.5 differs"


def test_sample_kernels_exist() -> None:
    assert set(SAMPLE) <= set(UNIT), set(SAMPLE) - set(UNIT)


# cuTile's own exports of real kernels at 13.1-13.3 (13.1 put the matmul's partition views inside the K
# loop, which cost it TMA and its pipeline) against the committed 13.4 bytecode
CUTILE_CASES = [("realistic", "mm_f16_128x128x64", "sm_90"), ("realistic", "mm_f16_128x128x64", "sm_100"),
                ("realistic", "fa_f16_q128k128d64_causal", "sm_90"), ("tilegym", "tg_rmsnorm_cached_f16_4096x4096", "sm_90")]


@pytest.mark.parametrize("corpus,name,gpu", CUTILE_CASES, ids=[f"{c[1]}-{c[2]}" for c in CUTILE_CASES])
def test_cutile_exports_same_ptx_at_every_version(corpus: str, name: str, gpu: str, tmp_path: Path) -> None:
    committed = ROOT / "tests" / corpus / "bytecode" / f"{name}.tileirbc"
    if not committed.exists():
        pytest.fail(f"{committed} is not in the corpus")
    want = _ptx(committed.read_bytes(), gpu)
    assert want is not None
    for version in ("13.1", "13.2", "13.3"):
        got = exported(corpus, [name], version, gpu, tmp_path / version)
        assert name in got, f"cuTile did not export {name} at {version}"
        assert _ptx(got[name].read_bytes(), gpu) == want, f"{name} exported at {version} differs on {gpu}"
    assert _ptx(reencoded(committed, "13.5"), gpu) == want


REWRITE_KERNELS = ("bmm", "attention", "while_break", "softmax", "layernorm", "gather_scatter", "if_else")


# real kernels whose hardware paths the rewrites cost before the canonical form: without it, 9 of these
# 20 rewritten kernels lose TMA or their pipeline (a partition view moved into the K loop, a run of ops
# wrapped in `if true`, an unused view beside a load)
REALISTIC_REWRITES = ("mm_f16_128x128x64", "fa_f16_q128k128d64_causal")


@pytest.mark.parametrize("rewrite", sorted(REWRITES))
@pytest.mark.parametrize("name", REWRITE_KERNELS + REALISTIC_REWRITES)
def test_same_ptx_under_rewrites(rewrite: str, name: str) -> None:
    data = (UNIT[name][-1] if name in UNIT else ROOT / "tests" / "realistic" / "bytecode" / f"{name}.tileirbc").read_bytes()
    want = _ptx(data, "sm_90")
    for seed in range(2):
        module = load_module(data, "kernel")
        if not REWRITES[rewrite](module, random.Random(seed)):
            continue
        from tileiras.dialects.verifier import verify_module

        verify_module(module)   # the rewrite made valid IR
        assert normalized_ptx(module, "sm_90") == want, f"{rewrite} (seed {seed}) changed {name}'s PTX"


ORDER_KERNELS = ("argmax_argmin", "cast_f8", "ew_float", "raw_offsets", "attention", "softmax", "while_break")


@pytest.mark.parametrize("name", ORDER_KERNELS)
def test_canonical_order_undoes_reordering(name: str) -> None:
    """`canonical-order` (part of the compile's canonical form) gives kernels that differ only in the
    order of independent ops one printed form: the `reorder` rewrite, three seeds, each
    applied three times."""
    from tileiras.text.printer import print_module
    from tileiras.transforms.order import canonical_order
    from tileiras.transforms.passes import to_canonical

    def ordered(module: object) -> str:
        for entry in (op for op in module.regions[0].blocks[0].operations if op.name == "cuda_tile.entry"):
            to_canonical(entry)
            canonical_order(entry)
            assert not canonical_order(entry), "a second run must change nothing"
        return print_module(module)

    data = UNIT[name][-1].read_bytes()
    want = ordered(load_module(data, name))
    changed = 0
    for seed in range(3):
        module = load_module(data, name)
        rng = random.Random(seed)
        before = print_module(module)
        for _ in range(3):
            REWRITES["reorder"](module, rng)
        changed += print_module(module) != before
        assert ordered(module) == want
    assert changed, "the rewrite must have reordered something"


@pytest.mark.parametrize("name", ORDER_KERNELS)
def test_reordered_kernels_same_ptx(name: str) -> None:
    """The compile's answer to the `reorder` rewrite: the same PTX (these kernels' independent ops
    came out of LLVM in the order written before canonical-order joined the canonical form)."""
    data = UNIT[name][-1].read_bytes()
    want = _ptx(data, "sm_90")
    for seed in range(2):
        module = load_module(data, name)
        rng = random.Random(seed)
        for _ in range(3):
            REWRITES["reorder"](module, rng)
        assert normalized_ptx(module, "sm_90") == want, f"reorder (seed {seed}) changed {name}'s PTX"
