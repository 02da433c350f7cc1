"""The emulator reports the bugs of benchmarks/mutation_ops.py's catalogue put into our compiler's PTX.

The default run checks the mutants the emulator used to miss (issue 36: undefined accumulators, a
deleted wgmma.fence or tcgen05 fence, an ignored descriptor base offset, the .target ignored, the
mma layouts' order, tcgen05.dealloc or cp.async.bulk.wait_group.read removed, a skipped stage-full
wait, a deleted bar.sync, a too-large wgmma.wait_group) on the f16 matmul; `-m sweep` samples one
mutant of every operator on every target (benchmarks/mutations.py measures the whole score).
"""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import mutation_ops  # noqa: E402
import mutations  # noqa: E402

KERNEL = "mm_f16_128x128x64"
OPERATORS = {op.name: op for op in mutation_ops.CATALOGUE}


@functools.lru_cache(maxsize=None)
def case(gpu: str) -> mutations.Case:
    c = mutations.prepare(KERNEL, gpu)
    assert c is not None
    assert mutations.outcome(c, c.ptx) is None, "the unmutated PTX must run clean"
    return c


def mutant(gpu: str, operator: str, site: str = "", last: bool = False) -> tuple[str, str]:
    """(description, PTX) of the first (`last`: the last) mutant of `operator` whose description contains
    `site` and that mutations.py does not list as equivalent."""
    c = case(gpu)
    found = [(what, ptx) for line, what, ptx in OPERATORS[operator].mutants(c.ptx)
             if site in what and mutations.equivalent(OPERATORS[operator], what, c, line) is None]
    assert found, f"no '{operator}' mutant at '{site}' in the {gpu} PTX"
    return found[-1] if last else found[0]


# (target, operator, a piece of the mutation's description, what the report says)
MISSED_BEFORE = [
    ("sm_80", "delete an accumulator's zero-init", "", "undefined value stored"),
    ("sm_90", "delete an accumulator's zero-init", "", "undefined value stored"),
    ("sm_100", "first tcgen05.mma accumulates", "", "read of undefined tensor memory"),
    ("sm_90", "delete wgmma.fence", "", "without wgmma.fence"),
    ("sm_100", "delete tcgen05.fence::before_thread_sync", "", "data race on tensor memory"),
    ("sm_100", "delete tcgen05.fence::after_thread_sync", "last", "data race on tensor memory"),
    ("sm_90", "descriptor base offset", "", "mismatch"),
    ("sm_100", "descriptor base offset", "", "mismatch"),
    ("sm_90", "lower the target", "-> sm_80", "needs .target"),
    ("sm_80", "mma layouts .col.row", "", "takes the layouts .row.col"),
    ("sm_90", "delete cp.async.bulk.wait_group", "", "exits while the bulk copy"),
    ("sm_90", "skip an mbarrier wait", "", ""),
    ("sm_90", "delete bar.sync", "", ""),
    ("sm_90", "raise a wait_group count", "wgmma.wait_group", ""),
    # an H200 hung on this one (LLVM had copied a non-convergent bar.sync into a thread-0 branch)
    ("sm_80", "split an aligned barrier", "", "at two instructions"),
    ("sm_90", "split an aligned barrier", "", "at two instructions"),
    ("sm_120", "split an aligned barrier", "", "at two instructions"),
]


@pytest.mark.parametrize("gpu, operator, site, says", MISSED_BEFORE,
                         ids=[f"{g}-{o}-{s}" for g, o, s, _ in MISSED_BEFORE])
def test_mutants_the_emulator_used_to_miss_are_reported(gpu, operator, site, says) -> None:
    what, ptx = mutant(gpu, operator, "" if site == "last" else site, last=site == "last")
    reported = mutations.outcome(case(gpu), ptx)
    assert reported is not None, f"survived: {what}"
    assert says in reported, reported


def test_tcgen05_dealloc_removed_is_reported() -> None:
    c = case("sm_100")
    ptx = "\n".join(line for line in c.ptx.split("\n") if "tcgen05.dealloc" not in line)
    assert ptx != c.ptx
    reported = mutations.outcome(c, ptx)
    assert reported is not None and "still allocated" in reported, reported


def test_the_barrier_before_mbarrier_inval_deleted_is_reported() -> None:
    """sm_120: thread 0 invalidates the pipeline's mbarriers after the consumers' bar.sync; without it another
    consumer's last wait or arrival may come after the inval (a survivor of a wider sample before the check)."""
    c = case("sm_120")
    lines = c.ptx.split("\n")
    op = OPERATORS["delete bar.sync"]
    found = [(what, ptx) for line, what, ptx in op.mutants(c.ptx)
             if any("mbarrier.inval" in text for text in lines[line:line + 8])]
    assert found, "no bar.sync before an mbarrier.inval in the sm_120 PTX"
    for what, ptx in found:
        reported = mutations.outcome(c, ptx)
        assert reported is not None and "mbarrier.inval" in reported, f"{what}: {reported}"



@pytest.mark.parametrize("gpu", ["sm_90", "sm_100"])
def test_an_mbarrier_initialized_again_in_a_loop_is_reported(gpu: str) -> None:
    """An mbarrier.init repeated at a loop head (the setup sunk into the loop) initializes a live mbarrier with
    no mbarrier.inval between, which the ISA leaves undefined: it used to pass whenever the re-init found the
    phase complete. The first and the last init of the kernel, each reported with both inits' lines."""
    c = case(gpu)
    mutants = OPERATORS["mbarrier.init repeated in a loop"].mutants(c.ptx)
    assert len(mutants) >= 2, mutants
    for line, what, ptx in (mutants[0], mutants[-1]):
        reported = mutations.outcome(c, ptx)
        assert reported is not None and "which is still valid" in reported, f"line {line} {what}: {reported}"
        assert f"at line {line} '" in reported, reported


def test_an_init_deleted_where_the_mbarrier_is_only_invalidated_is_reported(monkeypatch, tmp_path,
                                                                          stores_hold_back_loads) -> None:
    """A ring deeper than its loop runs: the sm_90 chunked layernorm's 4 chunks given 8 stages, as where the trip
    count is known only at run time (here: its constant bounds hidden from the depth rule, schedule/pipeline
    .trip_count). The last 4 stages' mbarriers are initialized and invalidated, nothing else. Deleting such an
    init leaves the inval on memory holding no mbarrier, which the ISA leaves undefined (it used to pass); every
    deleted init is reported."""
    from tileiras.schedule import pipeline

    monkeypatch.setattr(pipeline, "trip_count", lambda loop: None)   # (a cache of its own: stores_hold_back_loads)
    c = mutations.prepare("layernorm_chunked_f16_n8192_t2048", "sm_90")
    assert c is not None and mutations.outcome(c, c.ptx) is None
    mutants = OPERATORS["delete mbarrier.init"].mutants(c.ptx)
    assert len(mutants) == 32
    for line, what, ptx in mutants:
        reported = mutations.outcome(c, ptx)
        assert reported is not None, f"survived: line {line} {what}"
    assert "invalidated before mbarrier.init" in reported



def test_a_chunk_loaded_from_swapped_coordinates_is_reported(stores_hold_back_loads) -> None:
    """The chunked layernorm's first chunk of a row: TMA coordinates {0, row} swapped read another row's
    elements (or the same ones, for row 0), which with rows alike moved the mean and variance by less than the
    f16 tolerance; the mutation launch's rows differ (mutations.OFFSET_INPUTS) and the swap is reported. One
    mutant per mbarrier (each stage's first copy); its reading loops staged (`stores_hold_back_loads`)."""
    c = mutations.prepare("layernorm_chunked_f16_n8192_t2048", "sm_90")
    assert c is not None and mutations.outcome(c, c.ptx) is None
    firsts: dict[str, tuple[str, str]] = {}
    for _, what, ptx in OPERATORS["swap TMA coordinates"].mutants(c.ptx):
        firsts.setdefault(what.split("], [")[-1], (what, ptx))
    assert len(firsts) >= 5
    for what, ptx in firsts.values():
        assert mutations.outcome(c, ptx) is not None, f"survived: {what}"

@pytest.mark.parametrize("name", ["mm_e4m3_128x256x64", "mm_e4m3_256x128x64"])
def test_a_matmul_tile_loaded_from_swapped_coordinates_is_reported(name: str) -> None:
    """sm_120's 8-bit matmuls load A's first K tile ahead of their ring at coordinates {0, m}: with one M tile
    in the mutation launch m was 0 and the swap read the same box; the launch has 2 x 2 output tiles, and every
    swap of a TMA load's coordinates (the first A tile's included) is reported."""
    c = mutations.prepare(name, "sm_120")
    assert c is not None and mutations.outcome(c, c.ptx) is None
    mutants = OPERATORS["swap TMA coordinates"].mutants(c.ptx)
    assert len(mutants) >= 2
    for line, what, ptx in mutants:
        assert mutations.outcome(c, ptx) is not None, f"survived: line {line} {what}"


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100"])
def test_an_aligned_instruction_split_over_a_warp_is_reported(gpu) -> None:
    """Half a warp sent to a copy of a wgmma, setmaxnreg or tcgen05.ld/st/wait (all .aligned: a warp executes
    them together or not at all) is reported with both lines (the collectives used to deadlock without saying
    why; a split setmaxnreg used to pass)."""
    c = case(gpu)
    mutants = OPERATORS["split an aligned instruction"].mutants(c.ptx)
    assert mutants
    for line, what, ptx in mutants:
        reported = mutations.outcome(c, ptx)
        assert reported is not None and "executes an .aligned instruction" in reported, f"{what}: {reported}"

@pytest.mark.sweep
@pytest.mark.parametrize("gpu", mutations.TARGETS)
def test_a_sample_of_every_operator_is_reported(gpu) -> None:
    results = mutations.score([case(gpu)], per_operator=1, seed=36)
    survivors = [f"{r.operator.name}: {r.what}" for r in results if r.verdict == "survived"]
    assert not survivors, "\n".join(survivors)


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100"])
def test_the_leading_byte_offset_counts_only_where_the_isa_reads_it(gpu) -> None:
    """A swizzled K-major operand's LBO field is not used (the PTX ISA's descriptor strides): mutants of A's
    descriptor LBO are listed as equivalent; B's descriptor is N-major, where the LBO is the stride between
    swizzle atoms, and changing it is reported."""
    c = case(gpu)
    op = OPERATORS["descriptor LBO"]
    verdicts = {}
    for line, what, ptx in op.mutants(c.ptx):
        verdicts.setdefault(mutations.equivalent(op, what, c, line) is not None, (what, ptx))
    assert set(verdicts) == {True, False}, verdicts.keys()
    what, ptx = verdicts[False]
    reported = mutations.outcome(c, ptx)
    assert reported is not None and "mismatch" in reported, f"survived: {what}"
    if gpu == "sm_90":      # B N-major but only 64 f16 wide: one 128-byte swizzle atom, whose LBO is never used
        narrow = c.ptx.replace("m64n128k16", "m64n64k16")
        assert narrow != c.ptx
        assert all(mutations._lbo_unused(narrow, line) for line, _, _ in op.mutants(narrow))



TF32_EQUIVALENT = (("delete fence.mbarrier_init", mutations._init_fenced_later),
                   ("skip an mbarrier wait", mutations._implied_by_prepared_wait),
                   ("delete bar.sync", mutations._next_barrier_covers))


def test_the_tf32_sm100_survivors_are_equivalent() -> None:
    """The tf32 tcgen05 matmul's three survivors change nothing on a GPU, each for its listed reason: the first
    fence.mbarrier_init (a later one of the same thread precedes a whole-CTA barrier that every async-proxy use
    comes after), the MMA thread's stage-full wait (its stage-prepared wait, same phase, implies it) and the
    bar.sync after the inits (the whole-CTA bar.sync 2, 192 follows with nothing to order between). Each is
    listed as equivalent and runs clean; the other mutants of these operators are not listed, and are reported."""
    tf32 = mutations.prepare("mm_tf32_64x64x32", "sm_100")
    assert tf32 is not None
    for name, rule in TF32_EQUIVALENT:
        op = OPERATORS[name]
        listed = [(line, what, ptx) for line, what, ptx in op.mutants(tf32.ptx) if rule(tf32.ptx, line)]
        assert len(listed) == 1, (name, [(line, what) for line, what, _ in listed])
        line, what, ptx = listed[0]
        assert mutations.equivalent(op, what, tf32, line) is not None
        assert mutations.outcome(tf32, ptx) is None, f"an equivalent mutant is reported: {what}"
    others = [(what, ptx) for line, what, ptx in OPERATORS["delete bar.sync"].mutants(tf32.ptx)
              if mutations.equivalent(OPERATORS["delete bar.sync"], what, tf32, line) is None]
    assert others and all(mutations.outcome(tf32, ptx) is not None for _, ptx in others[:2])


def test_the_init_fence_of_a_kernel_without_async_mbarrier_users_is_equivalent(monkeypatch, tmp_path) -> None:
    """sm_120's tf32 matmul with TMA refused (its A stage now goes by TMA beside B's cp.async) stages by
    cp.async and arrives with cp.async.mbarrier.arrive (the generic proxy): no TMA, bulk copy or
    tcgen05.commit completes on its mbarriers, and it has no clusters, so its fence.mbarrier_init orders
    nothing anyone needs: listed as equivalent, and it runs clean. The sm_90 and sm_100 f16 kernels' TMA
    loads complete on their mbarriers: their fences are not listed."""
    from tileiras.tileas import tma_boxes

    assert not any(mutations._no_async_mbarrier(case(g).ptx) for g in ("sm_90", "sm_100"))
    monkeypatch.setattr(tma_boxes, "plan", lambda *args, **kwargs: (None, "refused by the test"))
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))   # not the TMA kernel's cached PTX
    c = mutations.prepare("mm_tf32_64x64x32", "sm_120")
    assert c is not None
    op = OPERATORS["delete fence.mbarrier_init"]
    mutants = op.mutants(c.ptx)
    assert mutants and all(mutations._no_async_mbarrier(c.ptx) for _ in mutants)
    line, what, ptx = mutants[0]
    assert mutations.equivalent(op, what, c, line) is not None and mutations.outcome(c, ptx) is None


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100"])
def test_the_tf32_equivalences_list_no_f16_mutant(gpu: str) -> None:
    """The f16 matmuls' fences, waits and barriers are all needed (their mutants are reported): none of the
    rules above lists one."""
    c = case(gpu)
    for name, rule in TF32_EQUIVALENT:
        assert not [what for line, what, _ in OPERATORS[name].mutants(c.ptx) if rule(c.ptx, line)], name


def test_the_stride_byte_offset_counts_only_where_the_isa_reads_it() -> None:
    """The SBO of a swizzled MN-major operand steps from one group of 8 K rows to the next: a tcgen05.mma
    kind::tf32 (K 8) reads one group, so mutants of the N-major B descriptor's SBO are listed as equivalent (and
    run clean); the K-major A's SBO steps between 8-row groups of M and is reported, and so is the f16 B's,
    whose K of 16 spans two groups."""
    tf32 = mutations.prepare("mm_tf32_64x64x32", "sm_100")
    assert tf32 is not None
    op = OPERATORS["descriptor SBO"]
    verdicts: dict[bool, list[tuple[str, str]]] = {}
    for line, what, ptx in op.mutants(tf32.ptx):
        verdicts.setdefault(mutations.equivalent(op, what, tf32, line) is not None, []).append((what, ptx))
    assert set(verdicts) == {True, False}, verdicts.keys()
    assert mutations.outcome(tf32, verdicts[True][0][1]) is None
    what, ptx = verdicts[False][0]
    assert mutations.outcome(tf32, ptx) is not None, f"survived: {what}"
    f16 = case("sm_100")
    found = [(what, ptx) for line, what, ptx in op.mutants(f16.ptx)
             if mutations.equivalent(op, what, f16, line) is None]
    assert len(found) == len(op.mutants(f16.ptx))
    reported = mutations.outcome(f16, found[0][1])
    assert reported is not None and "mismatch" in reported, f"survived: {found[0][0]}"


SYNCS = """.visible .entry k(
)
{
	.reg .b32 	%r<4>;
	ld.param.b32 	%r1, [k_param_0];
	bar.sync 	0;
	st.shared.b32 	[%r1], %r1;
	bar.sync 1, 128;
	@%p1 bra 	$L__BB0_2;
	mbarrier.inval.shared::cta.b64 [%r2];
$L__BB0_2:
	fence.proxy.async.shared::cta;
	bar.sync 1, 128;
	st.shared.b32 	[%r1], %r2;
	fence.proxy.async.shared::cta;
	bar.sync 1, 128;
	cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r1, %r2}], [%r3];
	ret;
}
"""


def test_the_synchronization_equivalences_are_as_narrow_as_their_reasons() -> None:
    """Deleting a barrier no memory access precedes, or a barrier repeating one with nothing between them to order,
    is listed as equivalent; the barriers and fences that order stores are not."""
    lines = SYNCS.split("\n")
    at = {i + 1: line.strip() for i, line in enumerate(lines)}
    bars = [n for n, t in at.items() if t.startswith("bar.sync")]
    fences = [n for n, t in at.items() if t.startswith("fence.proxy")]
    assert [mutations._nothing_before(SYNCS, n) for n in bars] == [True, False, False, False]
    assert [mutations._repeated_barrier(SYNCS, n) for n in bars] == [False, False, True, False]
    # (a fence another one follows only after a barrier: the barrier may hand the stores to another thread's
    # async-proxy reads first, so it is not listed, though here the second fence precedes every async read)
    assert [mutations._fenced_again(SYNCS, n) for n in fences] == [False, False]
    assert [mutations._fenced_before(SYNCS, n) for n in fences] == [False, False]


AFTER_SYNC = """.visible .entry k(
)
{
	bar.sync 	0;
	tcgen05.fence::after_thread_sync;
	@%p1 bra 	$L__BB0_2;
	tcgen05.fence::after_thread_sync;
	{ .reg .pred p; setp.ne.b32 p, %r1, 0; tcgen05.mma.cta_group::1.kind::f16 [%r3], %rd1, %rd2, %r4, p; }
	bra.uni 	$L__BB0_3;
$L__BB0_2:
	tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r5];
	tcgen05.fence::after_thread_sync;
	tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r6}, [%r3];
$L__BB0_3:
	bar.sync 	0;
	tcgen05.fence::after_thread_sync;
	@%p2 bra 	$L__BB0_4;
	tcgen05.fence::after_thread_sync;
$L__BB0_4:
	tcgen05.st.sync.aligned.32x32b.x1.b32 [%r3], {%r6};
	tcgen05.fence::before_thread_sync;
	bar.sync 	0;
	tcgen05.fence::after_thread_sync;
	{ .reg .pred p; setp.ne.b32 p, %r7, 0; @p tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 128; }
	ret;
}
"""


def test_an_after_thread_sync_fence_is_equivalent_only_where_another_fences_every_path() -> None:
    """Deleting a tcgen05.fence::after_thread_sync changes nothing only where every path from it meets another
    one before an asynchronous tcgen05 instruction or a (de)allocation (a tcgen05.commit between needs none): the
    kernel-start fence of our sm_100 matmul is such a one; a fence a branch can skip, or the last one before
    an instruction, is not, and the emulator reports deleting those."""
    at = {i + 1: line.strip() for i, line in enumerate(AFTER_SYNC.split("\n"))}
    fences = [n for n, t in at.items() if t.startswith("tcgen05.fence::after")]
    assert [mutations._after_sync_fenced_again(AFTER_SYNC, n) for n in fences] == [
        True, False, False, False, False, False]
    c = case("sm_100")
    op = OPERATORS["delete tcgen05.fence::after_thread_sync"]
    verdicts = [(what, ptx, mutations._after_sync_fenced_again(c.ptx, line)) for line, what, ptx in op.mutants(c.ptx)]
    assert [v for _, _, v in verdicts] == [True] + [False] * (len(verdicts) - 1)
    assert mutations.outcome(c, verdicts[0][1]) is None     # deleting the equivalent one runs clean, as it should


WAITS = """.visible .entry k(
)
{
	tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r1}, [%r3];
	tcgen05.wait::ld.sync.aligned;
	cvt.rn.f16.f32 	%rs1, %r1;
	tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r2}, [%r4];
	tcgen05.wait::ld.sync.aligned;
	@%p1 bra 	$L__BB0_2;
	tcgen05.wait::ld.sync.aligned;
$L__BB0_2:
	tcgen05.st.sync.aligned.32x32b.x1.b32 [%r3], {%r2};
	tcgen05.wait::st.sync.aligned;
	tcgen05.wait::st.sync.aligned;
	tcgen05.fence::before_thread_sync;
	cp.async.wait_all;
	cp.async.wait_all;
	bar.sync 	0;
	ret;
}
"""


def test_a_tcgen05_wait_is_equivalent_only_where_the_same_wait_follows_on_every_path() -> None:
    """Deleting a tcgen05.wait::ld (::st) changes nothing only where, on every path, the thread waits the same
    way again before any other tcgen05 instruction, barrier, arrival or exit (more tcgen05.ld between are
    fine): not where a branch skips the next wait, nor before a tcgen05.st, a fence or a barrier. Of two
    cp.async.wait_all on a straight stretch with no copy between, either may go, unless a memory access or a
    barrier comes between."""
    at = {i + 1: line.strip() for i, line in enumerate(WAITS.split("\n"))}
    waits = [n for n, t in at.items() if t.startswith("tcgen05.wait")]
    assert [mutations._waited_again(WAITS, n) for n in waits] == [True, False, False, True, False]
    alls = [n for n, t in at.items() if t.startswith("cp.async.wait_all")]
    assert [mutations._waited_all_nearby(WAITS, n) for n in alls] == [True, True]
    copies = WAITS.replace("\tcp.async.wait_all;\n\tcp.async.wait_all;\n\tbar.sync \t0;",
                           "\tcp.async.ca.shared.global [%r1], [%rd1], 16;\n\tcp.async.wait_all;\n\tbar.sync \t0;"
                           "\n\tcp.async.wait_all;\n\tld.shared.b32 \t%r2, [%r1];")
    assert copies != WAITS
    at = {i + 1: line.strip() for i, line in enumerate(copies.split("\n"))}
    alls = [n for n, t in at.items() if t.startswith("cp.async.wait_all")]
    # the first is needed (a copy before it, a barrier after it); the second waits for nothing the first left
    assert [mutations._waited_all_nearby(copies, n) for n in alls] == [False, True]
    c = case("sm_100")
    op = OPERATORS["delete tcgen05.wait"]
    verdicts = [(line, ptx, mutations._waited_again(c.ptx, line)) for line, _, ptx in op.mutants(c.ptx)]
    assert [v for _, _, v in verdicts] == [True, True, True, False]     # the epilogue's last wait::ld matters
    for line, ptx, equivalent in verdicts:
        if equivalent:
            assert mutations.outcome(c, ptx) is None, line


FIRST_BARRIER = """.visible .entry k(
)
{
	ld.param.u64 	%rd1, [k_param_0];
	@%p1 bra 	$L__BB0_2;
	ld.global.v4.b32 	{%r1, %r2, %r3, %r4}, [%rd1];
$L__BB0_2:
	bar.sync 	0;
	st.shared.b32 	[%r5], %r1;
	bar.sync 	0;
	ld.shared.b32 	%r6, [%r7];
	ret;
}
"""


def test_a_first_barrier_after_loads_only_is_equivalent_and_no_other() -> None:
    """Deleting a barrier that only global loads precede is listed as equivalent only where no barrier and no
    other memory access lies on a path from the entry to it, every thread that reaches a barrier with its id
    passed it once (no jump past it, no loop back over it); the sm_90/sm_120 producers' first named barrier,
    which pairs with the consumers' after their mbarrier.init, is not."""
    at = {i + 1: line.strip() for i, line in enumerate(FIRST_BARRIER.split("\n"))}
    bars = [n for n, t in at.items() if t.startswith("bar.sync")]
    assert [mutations._only_loads_before(FIRST_BARRIER, n) for n in bars] == [True, False]
    for edit in (lambda t: t.replace("ld.global.v4.b32", "ld.shared.v4.b32"),       # a shared access before
                 lambda t: t.replace("ld.global.v4.b32 \t{%r1, %r2, %r3, %r4}, [%rd1];",
                                     "st.global.b32 \t[%rd1], %r1;"),                # a store before
                 lambda t: t.replace("bra \t$L__BB0_2;", "bra \t$L__BB0_3;").replace(
                     "\tst.shared", "$L__BB0_3:\n\tst.shared"),
                 lambda t: t.replace("\tret;", "\t@%p2 bra \t$L__BB0_2;\n\tret;")):  # jump past it, loop back
        edited = edit(FIRST_BARRIER)
        assert edited != FIRST_BARRIER
        line = next(i + 1 for i, t in enumerate(edited.split("\n")) if t.strip().startswith("bar.sync"))
        assert not mutations._only_loads_before(edited, line)
    for gpu in ("sm_90", "sm_120"):
        c = case(gpu)
        first = next(i + 1 for i, t in enumerate(c.ptx.split("\n")) if t.strip().startswith("bar.sync"))
        assert not mutations._only_loads_before(c.ptx, first)


INIT_FENCES = """.visible .entry k(
)
{
	mbarrier.init.shared::cta.b64 [%r1], 1;
	fence.mbarrier_init.release.cluster;
	mbarrier.init.shared::cta.b64 [%r2], 1;
	fence.mbarrier_init.release.cluster;
	add.s32 	%r3, %r3, 1;
	fence.proxy.async.shared::cta;
	bar.sync 	0;
	mbarrier.init.shared::cta.b64 [%r4], 1;
	fence.mbarrier_init.release.cluster;
	mbarrier.arrive.shared::cta.b64 _, [%r4];
	fence.mbarrier_init.release.cluster;
	ret;
}
"""


def test_a_fence_mbarrier_init_is_equivalent_only_where_the_thread_fences_again_first() -> None:
    """Deleting a fence.mbarrier_init changes nothing where the thread fences again before any use of an
    mbarrier, async-proxy instruction, barrier or exit: a later fence.mbarrier_init, or (no clusters) a
    fence.proxy.async; not before an arrival, and with clusters not a fence.proxy.async."""
    at = {i + 1: line.strip() for i, line in enumerate(INIT_FENCES.split("\n"))}
    fences = [n for n, t in at.items() if t.startswith("fence.mbarrier_init")]
    assert [mutations._init_fenced_again(INIT_FENCES, n) for n in fences] == [True, True, False, False]
    cluster = INIT_FENCES.replace("bar.sync \t0;", "barrier.cluster.arrive;\n\tbarrier.cluster.wait;")
    assert cluster != INIT_FENCES
    at = {i + 1: line.strip() for i, line in enumerate(cluster.split("\n"))}
    fences = [n for n, t in at.items() if t.startswith("fence.mbarrier_init")]
    assert [mutations._init_fenced_again(cluster, n) for n in fences] == [True, False, False, False]


COPIES = """.visible .entry k(
)
{
	cp.async.ca.shared.global [%r1], [%rd1], 16;
	cp.async.commit_group;
	cp.async.wait_all;
	@%p1 bra 	$L__BB0_2;
	cp.async.wait_all;
$L__BB0_2:
	cp.async.ca.shared.global [%r2], [%rd2], 16;
	cp.async.commit_group;
	ld.shared.b32 	%r3, [%r4];
	cp.async.wait_all;
	ret;
}
"""


def test_cp_async_waits_and_commits_are_equivalent_only_with_nothing_in_flight() -> None:
    """A cp.async.wait_all no copy can reach without passing another wait_all waits for nothing; a commit_group
    right before a wait_all (which commits itself) changes nothing; a wait after a copy, and a commit followed by
    a shared load first, matter."""
    at = {i + 1: line.strip() for i, line in enumerate(COPIES.split("\n"))}
    waits = [n for n, t in at.items() if t.startswith("cp.async.wait_all")]
    assert [mutations._no_copy_in_flight(COPIES, n) for n in waits] == [False, True, False]
    commits = [n for n, t in at.items() if t.startswith("cp.async.commit_group")]
    assert [mutations._waited_all_nearby(COPIES, n, commit=True) for n in commits] == [True, False]


GROUPS = """.visible .entry k(
)
{
	cp.async.cg.shared.global [%r1], [%rd1], 16;
	cp.async.commit_group;
	bar.sync 	0;
	cp.async.cg.shared.global [%r2], [%rd2], 16;
	cp.async.commit_group;
	cp.async.wait_all;
	cp.async.cg.shared.global [%r1], [%rd1], 16;
	cp.async.commit_group;
	cp.async.cg.shared.global [%r2], [%rd2], 16;
	cp.async.commit_group;
	@%p1 bra 	$L__BB0_2;
	cp.async.wait_group 1;
$L__BB0_2:
	cp.async.wait_all;
	ret;
}
"""


@pytest.fixture
def unpipelined_where_two_stages_do_not_fit(monkeypatch: Any, tmp_path: Path) -> None:
    """sm_120's tf32 matmuls and d = 128 attentions as they were lowered before a ring took one stage where two
    do not fit (stage_rings.SINGLE): their K loop unpipelined, cp.async into one buffer, the forms whose mutants
    these tests study (a loop whose single stage does not fit either still gets it)."""
    from tileiras.schedule.buffers import MIN_STAGES
    from tileiras.tileas import stage_rings

    monkeypatch.setattr(stage_rings, "SINGLE", MIN_STAGES)
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "unpipelined-cache"))


def test_a_commit_is_equivalent_only_where_a_wait_all_is_the_next_wait(
        unpipelined_where_two_stages_do_not_fit) -> None:
    """A cp.async.commit_group whose copies reach a cp.async.wait_all (which commits them itself) before any
    cp.async.wait_group changes nothing, whatever lies between (copies that join the group, a barrier): sm_120's
    tf32 matmuls commit their first A tile before the B tile's copies and one wait_all. A commit that a
    wait_group N may count on some path matters."""
    at = {i + 1: line.strip() for i, line in enumerate(GROUPS.split("\n"))}
    commits = [n for n, t in at.items() if t.startswith("cp.async.commit_group")]
    assert [mutations._next_copy_wait_is_wait_all(GROUPS, n) for n in commits] == [True, True, False, False]
    assert [mutations._waited_all_nearby(GROUPS, n, commit=True) for n in commits] == [False, True, False, False]
    c = mutations.prepare("mm_tf32_256x128x64", "sm_120")
    assert c is not None
    op = OPERATORS["delete a commit"]
    verdicts = {line: mutations.equivalent(op, what, c, line) for line, what, _ in op.mutants(c.ptx)
                if "cp.async.commit_group" in what}
    assert any(why and "next cp.async wait is a cp.async.wait_all" in why for why in verdicts.values())


def test_a_tcgen05_wait_with_nothing_in_flight_is_equivalent() -> None:
    """A tcgen05.wait::st that no tcgen05.st reaches without passing another wait::st waits for nothing (the
    attention's wait at the top of its loop, after the correction's own wait); one right after a st does not."""
    at = {i + 1: line.strip() for i, line in enumerate(WAITS.split("\n"))}
    waits = [n for n, t in at.items() if t.startswith("tcgen05.wait")]
    # the third follows the second with no tcgen05.ld between; the last follows the first wait::st
    assert [mutations._tcgen05_nothing_in_flight(WAITS, n) for n in waits] == [False, False, True, False, True]


PROXY_FENCES = """.visible .entry k(
)
{
	st.shared.b32 	[%r1], %r2;
	fence.proxy.async.shared::cta;
	add.s32 	%r5, %r5, 1;
	fence.proxy.async.shared::cta;
	bar.sync 	0;
	st.shared.b32 	[%r1], %r3;
	fence.proxy.async.shared::cta;
	mbarrier.arrive.shared::cta.b64 _, [%r4];
	ret;
}
"""


def test_a_proxy_fence_is_equivalent_only_with_nothing_to_order() -> None:
    """A fence.proxy.async orders nothing where the thread fences again before its next async-proxy instruction
    or hand-over (barrier, arrival), or where no generic write of the thread precedes it since its last fence;
    a fence between a store and the barrier or arrival that hands it over is needed."""
    at = {i + 1: line.strip() for i, line in enumerate(PROXY_FENCES.split("\n"))}
    fences = [n for n, t in at.items() if t.startswith("fence.proxy.async")]
    assert [mutations._fenced_again(PROXY_FENCES, n) for n in fences] == [True, False, False]
    assert [mutations._fenced_before(PROXY_FENCES, n) for n in fences] == [False, True, False]


def test_lowering_the_target_is_equivalent_only_where_every_instruction_exists_there() -> None:
    """`.target sm_90 -> sm_80` changes nothing for a kernel whose every instruction sm_80 has (vector_add's);
    the sm_90 matmul's wgmma and TMA need sm_90a, so lowering its target is not listed."""
    plain = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tbar.sync 0;\n\tret;\n}\n"
    assert mutations._all_forms_allowed(plain, (80, ""))
    assert not mutations._all_forms_allowed(case("sm_90").ptx, (80, ""))
    assert not mutations._all_forms_allowed("not PTX at all {", (80, ""))


LAYERNORM = "layernorm_chunked_f16_n8192_t2048"


@pytest.fixture
def stores_hold_back_loads(monkeypatch: Any, tmp_path: Path) -> None:
    """The chunked layernorm as its loops were staged before a loop's weak stores let its loads be issued ahead
    (schedule/pipeline._PLAIN_STORES): its normalizing loop, which stores each chunk, unstaged: the form whose
    mutants these tests count (the staged form's are listed by the same reasons: `test_a_stage_counters_quotient_...`).
    Its two reading loops staged too, as they were before short loops were left to plain loads (`_no_steady_state`)."""
    from tileiras.schedule import pipeline

    monkeypatch.setattr(pipeline, "_PLAIN_STORES", ())
    monkeypatch.setattr(pipeline, "_no_steady_state", lambda plan: "")
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "unstaged-cache"))


def _hinted(occupancy: int) -> tuple[Any, bytes]:
    """The chunked layernorm's module and bytecode with an occupancy hint for sm_90 (a real cuTile input): at 24
    CTAs an SM its first loop's ring gets 2 stages for its 4 chunks, so that ring refills."""
    from tileiras.bytecode.writer import write_module
    from tileiras.frontend import load_module
    from tileiras.ir import attributes as A

    path = ROOT / "tests" / "realistic" / "bytecode" / f"{LAYERNORM}.tileirbc"
    module = load_module(path.read_bytes(), path.name)        # a copy of its own: the cached one stays unhinted
    entry = next(op for op in module.regions[0].block.operations if op.name == "cuda_tile.entry")
    entry.attributes["optimization_hints"] = A.OptimizationHints((("sm_90", (("occupancy", occupancy),)),))
    return module, write_module(module)


def test_the_chunked_layernorms_survivors_are_equivalent(stores_hold_back_loads) -> None:
    """sm_90's chunked layernorm (4 chunks, rings of 4 stages) leaves 7 mutants running clean, each listed for its
    reason: its first loop's producer wait for a stage's release and the consumers' 4 releases (every wait on
    those mbarriers asks for parity 1, the phase before their first: no stage is refilled), its second loop's
    release wait (the refill it guards runs only in the iteration that skips it) and the bar.sync that repeats
    the one before the mbarrier.inval (the invalidated mbarriers are used nowhere after). No other mutant of
    these operators is listed."""
    c = mutations.prepare(LAYERNORM, "sm_90")
    assert c is not None and mutations.outcome(c, c.ptx) is None
    listed = {}
    for name in ("skip an mbarrier wait", "delete an mbarrier arrive", "delete bar.sync"):
        op = OPERATORS[name]
        for line, what, ptx in op.mutants(c.ptx):
            if mutations.equivalent(op, what, c, line) is not None and "cp.async" not in what:
                listed[(name, line)] = ptx
    assert sorted(n for n, _ in listed) == ["delete an mbarrier arrive"] * 4 + ["delete bar.sync"] * 2 + \
        ["skip an mbarrier wait"] * 2, sorted(listed)
    for (name, line), ptx in listed.items():
        assert mutations.outcome(c, ptx) is None, f"an equivalent mutant is reported: {name} at line {line}"
    waits = [line for name, line in listed if name == "skip an mbarrier wait"]
    assert [mutations._first_pass_only(c.ptx, n) for n in waits] == [True, False]
    assert [mutations._guards_no_refill(c.ptx, n) for n in waits] == [False, True]


def test_the_ring_equivalences_fail_where_the_ring_refills(monkeypatch, tmp_path) -> None:
    """The reasons hold only where no stage is refilled: with an occupancy hint of 24 the layernorm's first ring has
    2 stages for 4 chunks, and its producer's release wait and the first pass's releases are not listed, and are
    reported (a deadlock, or a read of a stage being refilled). Its reading loops staged, as `stores_hold_back_loads`."""
    import test_realistic_emulator as tre
    from tileiras.schedule import pipeline

    monkeypatch.setattr(pipeline, "_no_steady_state", lambda plan: "")
    module, source = _hinted(24)
    monkeypatch.setattr(tre, "_module", lambda name: (module, source))
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))
    c = mutations.prepare(LAYERNORM, "sm_90")
    assert c is not None and mutations.outcome(c, c.ptx) is None
    lines = c.ptx.split("\n")
    empty = [n + 1 for n, t in enumerate(lines) if "wait: stage empty" in t]
    first = empty[0]
    assert not mutations._first_pass_only(c.ptx, first)
    op = OPERATORS["skip an mbarrier wait"]
    line, what, ptx = next(m for m in op.mutants(c.ptx) if m[0] == first)
    assert mutations.equivalent(op, what, c, line) is None and mutations.outcome(c, ptx) is not None
    arrive = OPERATORS["delete an mbarrier arrive"]
    releases = [m for m in arrive.mutants(c.ptx) if m[0] < empty[1]][:2]     # the first ring's first pass
    assert len(releases) == 2
    for line, what, ptx in releases:
        assert mutations.equivalent(arrive, what, c, line) is None
        assert mutations.outcome(c, ptx) is not None, f"survived: line {line} {what}"


def test_the_ring_equivalences_are_as_narrow_as_their_reasons(stores_hold_back_loads) -> None:
    """Edits of the 4-stage layernorm's PTX that break a reason unlist its mutants: the producer's parity taken
    from bit 1 of its counter (a 2-stage ring's: parities 1, 1, 0, 0, so stages 2 and 3 wait for their release)
    and the refill guarded by `i & tid` (a thread-dependent refill in any iteration)."""
    c = mutations.prepare(LAYERNORM, "sm_90")
    assert c is not None
    lines = c.ptx.split("\n")
    empty = [n + 1 for n, t in enumerate(lines) if "wait: stage empty" in t]
    arrives = [n + 1 for n, t in enumerate(lines) if t.strip().startswith("mbarrier.arrive.shared")]
    assert mutations._first_pass_only(c.ptx, empty[0]) and mutations._first_pass_only(c.ptx, arrives[0])
    parity = re.search(r"bfe\.u32\s+(%r\d+), (%r\d+), 2, 1;", c.ptx)
    assert parity is not None
    edited = c.ptx.replace(parity.group(0), parity.group(0).replace(", 2, 1;", ", 1, 1;"), 1)
    # (the waits on stages 2 and 3 now ask for parity 0: their releases count; stage 0's first pass still does not)
    assert [mutations._first_pass_only(edited, n) for n in [empty[0]] + arrives[:4]] == [False, True, True, False,
                                                                                          False]
    assert mutations._guards_no_refill(c.ptx, empty[1])
    guard = re.search(r"or\.b32\s+%r\d+, %r\d+, %r1;", c.ptx)
    assert guard is not None
    edited = c.ptx.replace(guard.group(0), guard.group(0).replace("or.b32", "and.b32"), 1)
    assert not mutations._guards_no_refill(edited, empty[1])


def test_the_attentions_tcgen05_fence_survivors_are_equivalent_or_modelled() -> None:
    """sm_100's causal attention: the softmax warps' tcgen05.fence::after_thread_sync before the accumulator's
    rescale (its tcgen05.ld) repeats the one after their 'scores complete' wait with no synchronization between:
    listed as equivalent; their tcgen05.fence::before_thread_sync before the 'P stored' arrival is listed as
    modelled (NVIDIA's attention hands tcgen05.st results over through an arrival with no fence, which the
    emulator therefore accepts). Both run clean; no other after_thread_sync fence of the kernel is listed by the
    backward rule, and an mbarrier wait put between the two fences unlists the second."""
    c = mutations.prepare("fa_f16_q64k64d64_causal", "sm_100")
    assert c is not None and mutations.outcome(c, c.ptx) is None
    after = OPERATORS["delete tcgen05.fence::after_thread_sync"]
    listed = [(line, what, ptx) for line, what, ptx in after.mutants(c.ptx)
              if mutations._after_sync_fenced_before(c.ptx, line)]
    assert len(listed) == 1, [line for line, _, _ in listed]
    line, what, ptx = listed[0]
    assert mutations.equivalent(after, what, c, line) is not None and mutations.outcome(c, ptx) is None
    lines = c.ptx.split("\n")
    wait = next(t for t in lines[:line][::-1] if "mbarrier.try_wait" in t)
    edited = "\n".join(lines[:line - 1] + [wait] + lines[line - 1:])
    assert not mutations._after_sync_fenced_before(edited, line + 1)
    before = OPERATORS["delete tcgen05.fence::before_thread_sync"]
    modelled = [(line, what, ptx) for line, what, ptx in before.mutants(c.ptx)
                if mutations.equivalent(before, what, c, line) is not None]
    assert modelled and all("mbarrier.arrive" in "\n".join(lines[n:n + 6]) for n, _, _ in modelled)
    for line, what, ptx in modelled:
        assert mutations.outcome(c, ptx) is None, f"a modelled mutant is reported: line {line}"
    others = [ptx for line, what, ptx in before.mutants(c.ptx) if (line, what, ptx) not in modelled]
    assert others and all(mutations.outcome(c, ptx) is not None for ptx in others)


@functools.lru_cache(maxsize=None)
def _attention(gpu: str) -> mutations.Case:
    """The causal attention's mutation case on `gpu` (compiled and interpreted once for the tests below)."""
    c = mutations.prepare("fa_f16_q64k64d64_causal", gpu)
    assert c is not None
    return c


def _site(c: mutations.Case, text: str, nth: int = 0) -> int:
    """The 1-based PTX line of the `nth` instruction of `c` whose code starts with `text`."""
    found = [n + 1 for n, t in enumerate(c.ptx.split("\n")) if t.split("//")[0].strip().startswith(text)]
    return found[nth]


def _edited(ptx: str, line: int, extra: str) -> str:
    """`ptx` with the statement `extra` put before PTX line `line` (1-based)."""
    lines = ptx.split("\n")
    return "\n".join(lines[:line - 1] + ["\t" + extra] + lines[line - 1:])


def test_the_causal_attentions_q_tile_wait_and_barrier_are_equivalent_on_sm_80() -> None:
    """sm_80's causal attention waits for its Q tile's cp.async copies (cp.async.wait_all; bar.sync 0) before it
    issues the first K and V copies, which the loop's cp.async.wait_group 1; bar.sync 0 complete and publish
    again (two groups committed after the Q tile's) before any thread reads shared memory: both are listed, by
    byte ranges evaluated per thread, and their mutants run clean. The loop's wait and barrier are not listed
    and are reported; the first K copy moved onto another thread's Q bytes unlists both."""
    c = _attention("sm_80")
    wait, barrier = _site(c, "cp.async.wait_all"), _site(c, "bar.sync", 1)
    assert barrier == wait + 1
    assert mutations._copies_waited_later(c.ptx, wait) and mutations._barrier_orders_nothing(c.ptx, barrier)
    for name, line in (("delete cp.async.wait", wait), ("delete bar.sync", barrier)):
        op = OPERATORS[name]
        found = [(what, ptx) for n, what, ptx in op.mutants(c.ptx) if n == line]
        assert len(found) == 1 and mutations.equivalent(op, found[0][0], c, line) is not None
        assert mutations.outcome(c, found[0][1]) is None
    loop_wait, loop_barrier = _site(c, "cp.async.wait_group"), _site(c, "bar.sync", 2)
    assert not mutations._copies_waited_later(c.ptx, loop_wait)
    assert not mutations._barrier_orders_nothing(c.ptx, loop_barrier)
    op = OPERATORS["delete bar.sync"]
    loop = next((what, ptx) for n, what, ptx in op.mutants(c.ptx) if n == loop_barrier)
    assert mutations.equivalent(op, loop[0], c, loop_barrier) is None and mutations.outcome(c, loop[1]) is not None
    first_k = next(n for n in range(barrier, len(c.ptx.split("\n"))) if "cp.async.cg" in c.ptx.split("\n")[n])
    k_copy = re.search(r"\[(%rd\d+)\+0\]", c.ptx.split("\n")[first_k])
    assert k_copy is not None       # (the K tile lies 9216 bytes above the Q tile, whose rows are 144 bytes apart)
    lines = c.ptx.split("\n")
    for offset, listed in ((-9072, False), (0, True)):     # onto the Q bytes of thread + 8 (its next row), or not
        lines[first_k] = c.ptx.split("\n")[first_k].replace(k_copy.group(0), f"[{k_copy.group(1)}+{offset}]")
        onto_q = "\n".join(lines)
        assert mutations._barrier_orders_nothing(onto_q, barrier) == listed
        assert mutations._copies_waited_later(onto_q, wait) == listed


def test_the_causal_attentions_epilogue_barrier_after_a_loop_that_always_runs_is_equivalent_on_sm_120(
        unpipelined_where_two_stages_do_not_fit) -> None:
    """sm_120's 128x128 (d 128) causal attention: after its K loop, `cp.async.wait_all; bar.sync 0` precede the
    epilogue's stmatrix of O into the bytes of the Q tile. Q's cp.async copies are still in flight there only on
    the path that skips the loop, whose trip count is (128 * %ctaid.x + 128) >> 7: at least 1 for every block
    id (no wrap: the block's first row is below 2^31), so no thread takes that path, and after the loop's last
    barrier the warps read only the V tile, which O's bytes miss. The barrier is listed and its mutant runs
    clean. With the trip count able to reach 0 (the constant lowered to -256), the path is followed, Q's
    copies are in flight at the stores, and the barrier is not listed."""
    c = mutations.prepare("fa_f16_q128k128d128_causal", "sm_120")
    assert c is not None
    lines = c.ptx.split("\n")
    barrier = next(n + 1 for n in range(len(lines) - 1, 0, -1)
                   if lines[n].strip() == "bar.sync \t0;" and lines[n - 1].strip() == "cp.async.wait_all;")
    assert any(t.strip().startswith("stmatrix") for t in lines[barrier:barrier + 20])
    assert mutations._barrier_orders_nothing(c.ptx, barrier)
    op = OPERATORS["delete bar.sync"]
    (what, ptx), = [(what, ptx) for line, what, ptx in op.mutants(c.ptx) if line == barrier]
    assert mutations.equivalent(op, what, c, barrier) is not None and mutations.outcome(c, ptx) is None
    trip = next(n for n, t in enumerate(lines) if re.fullmatch(r"add\.s32\s+%r\d+, %r\d+, 128;", t.strip()))
    lines[trip] = lines[trip].replace(", 128;", ", -256;")
    assert not mutations._barrier_orders_nothing("\n".join(lines), barrier)


def test_block_id_arithmetic_is_bounded_without_wrapping() -> None:
    """`Values.bounds`: spans of block-id arithmetic read at the definition that reaches the statement (a counter
    set before its loop and decremented in it), and the comparisons they decide; an unknown operand (a
    parameter), a value that can be negative, or an unsigned comparison of one decides nothing."""
    from ptx_values import Values
    body = ["mov.u32 %r1, %ctaid.x;", "shl.b32 %r2, %r1, 7;", "add.s32 %r3, %r2, 128;", "shr.s32 %r4, %r3, 7;",
            "setp.gt.s32 %p1, %r4, 0;", "ld.param.b32 %r5, [p];", "setp.gt.s32 %p2, %r5, 0;",
            "add.s32 %r6, %r2, -256;", "setp.gt.s32 %p3, %r6, 0;", "setp.lt.u32 %p4, %r1, 65536;",
            "add.s32 %r7, %r1, -1;", "setp.lt.u32 %p6, %r7, 2147483647;", "setp.lt.s32 %p7, %r7, 2147483647;", "$L1:",
            "add.s32 %r4, %r4, -1;", "setp.ne.s32 %p5, %r4, 0;"]
    v = Values(body, 0, len(body))
    assert v.bounds("%r4", {}, 4) == (1, 2**31)
    assert v.truth("%p1", {}) is True and v.truth("%p2", {}) is None and v.truth("%p3", {}) is None
    assert v.truth("%p4", {}) is None and v.truth("%p5", {}) is None
    assert v.truth("%p6", {}) is None and v.truth("%p7", {}) is True     # -1 unsigned is not below 2^31 - 1


def test_the_causal_attentions_softmax_barriers_that_order_nothing_on_sm_100() -> None:
    """sm_100's causal attention: the softmax warpgroup's bar.sync 1, 128 before thread 0 initializes the Q
    tile's mbarrier and issues its TMA load (before it, the warps only read the tensor-memory address) and the
    one between the epilogue's tcgen05.ld and its stmatrix of the output tile (before it, thread 0 only
    invalidates mbarriers) are listed, and run clean; the barriers that order the loop's mbarriers before their
    invalidation and the staged tile before its TMA store are not. A shared read of the staged tile's bytes
    before the second, or a shared write into the Q tile's bytes (what the TMA load's expect_tx bounds) before
    the first, unlists it."""
    c = _attention("sm_100")
    named = [n + 1 for n, t in enumerate(c.ptx.split("\n")) if t.split("//")[0].strip() == "bar.sync 1, 128;"]
    assert len(named) == 5
    listed = [n for n in named if mutations._barrier_orders_nothing(c.ptx, n)]
    assert listed == [named[0], named[2]]
    op = OPERATORS["delete bar.sync"]
    for line, what, ptx in op.mutants(c.ptx):
        if line in listed:
            assert mutations.equivalent(op, what, c, line) is not None and mutations.outcome(c, ptx) is None
        elif line in named[3:]:
            assert mutations.outcome(c, ptx) is not None, f"a barrier not listed survives: line {line}"
    staged = _edited(c.ptx, named[2], "ld.shared.b32 %r9999, [__tileir_dsmem+9216];")
    assert not mutations._barrier_orders_nothing(staged, named[2] + 1)
    assert mutations._barrier_orders_nothing(_edited(c.ptx, named[2], "ld.shared.b32 %r9999, [__tileir_dsmem+"
                                                                      "67592];"), named[2] + 1)
    onto_q = _edited(c.ptx, named[0], "st.shared.b32 [__tileir_dsmem+8188], %r1;")
    assert not mutations._barrier_orders_nothing(onto_q, named[0] + 1)
    assert mutations._barrier_orders_nothing(_edited(c.ptx, named[0], "st.shared.b32 [__tileir_dsmem+8400], %r1;"),
                                             named[0] + 1)


def test_the_causal_attentions_unused_mbarrier_init_is_equivalent_on_sm_100() -> None:
    """sm_100's causal attention initializes one mbarrier more than it uses (the last of its block): that init's
    deletion is listed (every mbarrier operand evaluated, the K/V ring's stage-indexed ones over their x mod 2
    stages: test_ring_depth.py) and runs clean; no other init is listed; an arrival on that mbarrier, or the
    ring's stages moved so that its second stage is that mbarrier, unlists it."""
    c = _attention("sm_100")
    op = OPERATORS["delete mbarrier.init"]
    listed = [(line, what, ptx) for line, what, ptx in op.mutants(c.ptx) if mutations._mbarrier_unused(c.ptx, line)]
    assert len(listed) == 1
    line, what, ptx = listed[0]
    assert mutations.equivalent(op, what, c, line) is not None and mutations.outcome(c, ptx) is None
    base = re.search(r"mbarrier\.init\.shared::cta\.b64 \[(%r\d+)\]", c.ptx.split("\n")[line - 1])
    offset = re.search(rf"add\.s32 \t{re.escape(base.group(1))}, %r\d+, (\d+);", c.ptx) if base else None
    assert offset is not None
    arrival = f"mbarrier.arrive.shared::cta.b64 _, [__tileir_dsmem+{offset.group(1)}];"
    assert not mutations._mbarrier_unused(_edited(c.ptx, line + 2, arrival), line)
    ring = re.search(r"add\.s32 \t%r\d+, %r\d+, (\d+);\n\tbfe\.u32", c.ptx)      # the 'stage full' ring's base
    assert ring is not None and int(offset.group(1)) - int(ring.group(1)) > 8
    moved = c.ptx.replace(ring.group(0), ring.group(0).replace(ring.group(1), str(int(offset.group(1)) - 8)), 1)
    assert not mutations._mbarrier_unused(moved, line)


def test_the_mma_threads_wait_for_its_own_commit_is_equivalent_on_sm_100() -> None:
    """sm_100's causal attention: the MMA thread's 'previous P V complete' wait waits for its own tcgen05.commit
    after the P@V MMAs, and what it issues before its next commit (the next block's Q K^T MMAs, into the scores'
    tensor-memory columns, beside the output's) conflicts with nothing those MMAs do; that next commit tracks them
    too, so the softmax warps' 'scores complete' wait still follows them. Listed and clean; no other wait of the
    kernel is; the scores' columns moved onto the output's, another arrival on that mbarrier, or a shared store
    before the next commit unlists it."""
    c = _attention("sm_100")
    lines = c.ptx.split("\n")
    op = OPERATORS["skip an mbarrier wait"]
    waits = {line: (what, ptx) for line, what, ptx in op.mutants(c.ptx)}
    listed = [line for line in waits if mutations._commit_wait_redundant(c.ptx, line)]
    assert len(listed) == 1 and "wait: previous P V complete" in lines[listed[0] - 1]
    line = listed[0]
    what, ptx = waits[line]
    assert mutations.equivalent(op, what, c, line) is not None and mutations.outcome(c, ptx) is None
    scores = re.search(r"add\.s32 \t(%r\d+), (%r\d+), 64;", c.ptx)
    assert scores is not None
    overlapping = c.ptx.replace(scores.group(0), scores.group(0).replace(", 64;", ", 32;"), 1)
    assert not mutations._commit_wait_redundant(overlapping, line)
    mbarrier = re.search(r"add\.s32 \t%r\d+, %r\d+, (\d+);", "\n".join(lines[line - 4:line - 1]))
    assert mbarrier is not None
    arrival = f"mbarrier.arrive.shared::cta.b64 _, [__tileir_dsmem+{mbarrier.group(1)}];"
    last = max(n for n, t in enumerate(lines, 1) if "tcgen05.ld" in t)
    assert not mutations._commit_wait_redundant(_edited(c.ptx, last + 1, arrival), line)
    fence = next(n for n in range(line, len(lines)) if "tcgen05.fence::after_thread_sync" in lines[n]) + 1
    store = _edited(c.ptx, fence + 1, "st.shared.b32 [__tileir_dsmem+0], %r1;")
    assert mutations._commit_wait_redundant(_edited(c.ptx, fence + 1, "add.s32 %r9999, %r1, 1;"), line)
    assert not mutations._commit_wait_redundant(store, line)


def test_the_epilogues_after_fence_past_a_barrier_is_modelled_on_sm_100() -> None:
    """sm_100's causal attention: the softmax warps' tcgen05.fence::after_thread_sync before the epilogue's
    tcgen05.ld of the output follows their 'mma complete' mbarrier wait with a bar.sync 1, 128 between, which
    hands over no tensor-memory work (its four warps reach only their own lane quarters, and none issues an mma,
    cp, shift, alloc or dealloc before any instance of it): listed as modelled like a fence right after an
    mbarrier wait, and runs clean. The fences before the loop's rescale and before the dealloc (whose paths back
    meet other tcgen05 instructions first) are not listed by this rule, and the dealloc's is reported; a
    tcgen05.shift before one of the barrier's instances unlists it."""
    c = _attention("sm_100")
    lines = c.ptx.split("\n")
    op = OPERATORS["delete tcgen05.fence::after_thread_sync"]
    fences = {line: (what, ptx) for line, what, ptx in op.mutants(c.ptx)}
    epilogue = min(n for n in fences if n > _site(c, "mbarrier.inval"))
    assert "tcgen05.ld" in "\n".join(lines[epilogue:epilogue + 6])
    assert mutations._after_sync_handed_by_mbarrier(c.ptx, epilogue)
    what, ptx = fences[epilogue]
    assert mutations.equivalent(op, what, c, epilogue) == mutations.MODELLED_PAST_BARRIERS
    assert mutations.outcome(c, ptx) is None
    dealloc = max(fences)
    rescale = max(n for n in fences if n < _site(c, "mbarrier.inval"))
    assert not mutations._after_sync_handed_by_mbarrier(c.ptx, rescale)     # (listed by another, backward rule)
    assert not mutations._after_sync_handed_by_mbarrier(c.ptx, dealloc)
    assert mutations.equivalent(op, fences[dealloc][0], c, dealloc) is None
    assert mutations.outcome(c, fences[dealloc][1]) is not None
    named = [n + 1 for n, t in enumerate(lines) if t.split("//")[0].strip() == "bar.sync 1, 128;"]
    shifted = _edited(c.ptx, named[-1], "tcgen05.shift.cta_group::1.down [%r16];")
    assert not mutations._after_sync_handed_by_mbarrier(shifted, epilogue)


def test_the_attentions_proxy_fence_after_its_inits_is_equivalent_on_sm_100() -> None:
    """sm_100's causal attention: the softmax warps' first fence.proxy.async follows only thread 0's mbarrier.init
    (each fenced by a fence.mbarrier_init first) and warp 0's tcgen05.alloc store of the tensor-memory address,
    which bar.sync 0 published before it and no TMA load writes (each within its tensor map's box): listed, and
    clean. The fences after the P and O stores are not listed (and are reported). A generic store the fence
    would order, or a fence.mbarrier_init taken away unlists it; so do, in the larger attention whose stages take
    4 boxes an expect_tx, tensor-map boxes unknown or large enough to reach the address slot."""
    c = _attention("sm_100")
    op = OPERATORS["delete fence.proxy.async"]
    boxes = mutations._tma_boxes(c)
    assert boxes and all(b >= 8192 for b in boxes.values())
    mutants = {line: (what, ptx) for line, what, ptx in op.mutants(c.ptx)}
    listed = [line for line in mutants if mutations._fence_orders_published_only(c.ptx, line, boxes)]
    assert listed == [min(mutants)]
    line = listed[0]
    what, ptx = mutants[line]
    assert mutations.equivalent(op, what, c, line) is not None and mutations.outcome(c, ptx) is None
    for other in set(mutants) - {line}:
        assert mutations.equivalent(op, mutants[other][0], c, other) is None
        assert mutations.outcome(c, mutants[other][1]) is not None
    store = _edited(c.ptx, line, "st.shared.b32 [__tileir_dsmem+59392], %r1;")
    assert not mutations._fence_orders_published_only(store, line + 1, boxes)
    fences = [n + 1 for n, t in enumerate(c.ptx.split("\n")[:line]) if "fence.mbarrier_init" in t.split("//")[0]]
    init_fence = fences[-1]         # the last before it, after the last inits
    lines = c.ptx.split("\n")
    unfenced = "\n".join(lines[:init_fence - 1] + lines[init_fence:])
    assert not mutations._fence_orders_published_only(unfenced, line - 1, boxes)
    # the larger attention's stages take 4 TMA boxes each, announced by one expect_tx: its sum alone bounds each
    # box's bytes so loosely that the last box of a stage may reach the address slot; the tensor maps' boxes do not
    big = mutations.prepare("fa_f16_q128k64d128_causal", "sm_100")
    assert big is not None
    first = min(line for line, _, _ in op.mutants(big.ptx))
    assert mutations._fence_orders_published_only(big.ptx, first, mutations._tma_boxes(big))
    assert not mutations._fence_orders_published_only(big.ptx, first, {})
    assert not mutations._fence_orders_published_only(big.ptx, first, {k: 1 << 20 for k in mutations._tma_boxes(big)})


def test_a_proxy_fence_must_come_between_the_generic_stores_and_their_release_on_sm_100() -> None:
    """sm_100's causal attention: the softmax warps store P through the generic proxy, fence.proxy.async, then
    arrive on 'P stored', after which the MMA thread's tcgen05.mma reads P through the async proxy. The PTX ISA
    orders generic-proxy writes with the async proxy only by a proxy fence of the writing thread (an mbarrier
    handoff, or a tcgen05.commit's arrival, orders the threads, not the proxies): without the fence, with the
    fence moved after the arrival that publishes the stores, or with the reading thread fencing in its place,
    the mma's read is reported as a missing fence.proxy.async."""
    c = _attention("sm_100")
    lines = c.ptx.split("\n")
    fence = next(n for n in range(_site(c, "st.shared.v2.b16"), len(lines))
                 if lines[n - 1].strip().startswith("fence.proxy.async"))
    arrive = next(n for n in range(fence, len(lines)) if lines[n - 1].strip().startswith("mbarrier.arrive"))
    wait = next(n for n, t in enumerate(lines, 1) if "// wait: P stored" in t)
    spin = next(n for n in range(wait, len(lines)) if re.match(r"\s*@%p\d+ bra", lines[n - 1]))
    deleted = lines[:fence - 1] + lines[fence:]
    variants = {
        "deleted": deleted,
        "after the arrival": deleted[:arrive - 1] + [lines[fence - 1]] + deleted[arrive - 1:],
        "by the reader": lines[:spin] + ["\tfence.proxy.async.shared::cta;"] + lines[spin:fence - 1] + lines[fence:],
    }
    for how, edited in variants.items():
        reported = mutations.outcome(c, "\n".join(edited))
        assert reported is not None and "missing fence.proxy.async" in reported and "tcgen05.mma" in reported, \
            f"{how}: {reported}"


def test_the_softmax_warps_q_tile_wait_is_equivalent_on_sm_100() -> None:
    """sm_100's causal attention: the softmax warps wait for the Q tile's one-shot TMA load, though they never
    touch its bytes (their stores, stmatrix and the O tile's TMA store, within its tensor map's box, all miss
    them); the MMA thread waits for the load itself before its Q K^T MMAs, and thread 0 invalidates the
    mbarrier only after its wait on the MMA thread's final tcgen05.commit, which tracks those MMAs. Listed
    (the MMA thread's own wait on the load, whose MMAs read Q, is not) and clean; a softmax load of a Q byte,
    or the MMA thread's wait taken away, unlists it."""
    c = _attention("sm_100")
    op = OPERATORS["skip an mbarrier wait"]
    boxes = mutations._tma_boxes(c)
    mutants = {line: (what, ptx) for line, what, ptx in op.mutants(c.ptx)}
    listed = [line for line in mutants if mutations._one_shot_load_handed_by_commit(c.ptx, line, boxes)]
    lines = c.ptx.split("\n")
    assert len(listed) == 1 and "one-shot TMA load" in lines[listed[0] - 1]
    line = listed[0]
    what, ptx = mutants[line]
    assert mutations.equivalent(op, what, c, line) is not None and mutations.outcome(c, ptx) is None
    mma_wait = next(n for n in mutants if n < line and "one-shot TMA load" in lines[n - 1])
    assert not mutations._one_shot_load_handed_by_commit(c.ptx, mma_wait, boxes)
    load = _edited(c.ptx, line + 2, "ld.shared.b32 %r9999, [__tileir_dsmem+64];")
    assert not mutations._one_shot_load_handed_by_commit(load, line, boxes)
    unwaited = "\n".join(lines[:mma_wait - 1] + ["\t{ .reg .pred p; setp.eq.u32 p, 0, 0; selp.u32 %r568, 1, 0, p; }"]
                         + lines[mma_wait:])
    assert not mutations._one_shot_load_handed_by_commit(unwaited, line, boxes)


def test_a_stage_counters_quotient_by_the_ring_depth_is_evaluated() -> None:
    """A 3-stage ring's wait asks for parity (i / 3) & 1, which LLVM computes as bit 1 of mul.hi.u32(i, 0xAAAAAAAB):
    the unsigned product's high half is evaluated exactly (ptx_values), so every mbarrier site of the chunked
    layernorm's staged normalizing loop has a value and the ring reasons can hold over the function (it had none,
    and its 12 first-pass waits and releases on sm_90 and sm_100 were survivors)."""
    import ptx_values

    codes = ["mov.b32 %r1, 0;", "$L_loop:", "mul.hi.u32 %r2, %r1, -1431655765;", "bfe.u32 %r3, %r2, 1, 1;",
             "add.s32 %r1, %r1, 1;", "setp.ne.b32 %p1, %r1, 7;", "@%p1 bra $L_loop;"]
    values = ptx_values.Values(codes, 0, len(codes))
    assert [values.value("%r3", {"%r1": i}) for i in range(7)] == [(i // 3) & 1 for i in range(7)]
    assert values.value("%r2", {"%r1": 4294967295}) == (4294967295 * 0xAAAAAAAB) >> 32


def test_the_copy_wait_after_a_ring_of_tracked_copies_is_equivalent_on_sm_120() -> None:
    """sm_120's 8-bit 256x128 matmul copies B by cp.async into a 2-stage ring, each thread's copies tracked by its
    cp.async.mbarrier.arrive.noinc on the stage's full mbarrier, which every thread waits on in the next iteration:
    the cp.async.wait_all after the K loop has no copy to wait for. No static reason holds (the loop's trip count
    is a parameter), and the unmutated run shows every thread saw its arrivals' phases complete there: listed by
    `_orders_nothing_new`, and its mutant runs clean. The ring's waits (the stage-full one with cp.async arrivals
    and TMA bytes, the stage-empty one that acquires the consumers' reads) are not listed."""
    c = mutations.prepare("mm_i8_256x128x64", "sm_120")
    assert c is not None
    full = _site(c, "{ .reg .pred p; mbarrier.try_wait")
    waits = [n + 1 for n, t in enumerate(c.ptx.split("\n")) if t.strip() == "cp.async.wait_all;"]
    after_loop = min(w for w in waits if w > full)
    op = OPERATORS["delete cp.async.wait"]
    (what, ptx), = [(what, ptx) for line, what, ptx in op.mutants(c.ptx) if line == after_loop]
    assert not mutations._no_copy_in_flight(c.ptx, after_loop) and not mutations._copies_waited_later(c.ptx,
                                                                                                       after_loop)
    assert "has no cp.async copy in flight" in (mutations.equivalent(op, what, c, after_loop) or "")
    assert mutations.outcome(c, ptx) is None
    ring = [n + 1 for n, t in enumerate(c.ptx.split("\n")) if "// wait: stage" in t]
    assert len(ring) == 2 and not any(mutations._orders_nothing_new(c, line) for line in ring)


def test_the_mma_threads_p_v_two_back_wait_is_equivalent_on_sm_100() -> None:
    """sm_100 attention, 128 x 128 blocks: before its scores MMA into a tensor-memory buffer the MMA thread waits
    for the P V MMAs of two iterations back, which read P from that buffer. The commit of the previous
    iteration's scores tracks those MMAs (issued before it), the softmax warps wait for it before they store P and
    arrive on 'P stored', which the MMA thread waited for before its previous P V MMAs: the unmutated run shows the
    wait's phase known to the thread already, so it is listed (`_orders_nothing_new`; its mutant was a survivor);
    the MMA thread's 'P stored' wait, which acquires the softmax warps' stores, is not listed."""
    c = mutations.prepare("fa_f16_q128k128d128", "sm_100")
    assert c is not None
    lines = c.ptx.split("\n")
    (two_back,) = [n + 1 for n, t in enumerate(lines) if "// wait: P V two back complete" in t]
    (stored,) = [n + 1 for n, t in enumerate(lines) if "// wait: P stored" in t]
    op = OPERATORS["skip an mbarrier wait"]
    (what,) = [what for line, what, _ in op.mutants(c.ptx) if line == two_back]
    assert "already happens after the phase" in (mutations.equivalent(op, what, c, two_back) or "")
    assert not mutations._orders_nothing_new(c, stored)



def test_the_softmax_barrier_before_the_rings_invalidation_is_equivalent_on_sm_100() -> None:
    """sm_100 causal attention, 128 x 64 blocks: after the loop the two softmax warpgroups each wait for the MMA
    thread's last commit ('mma complete'), meet at bar.sync 1, 256, and thread 0 invalidates the rings' and the Q
    load's mbarriers. The rings are used only by the producer and MMA threads (no participants), and every softmax
    thread's wait on the Q mbarrier came before its first arrival on 'P stored', which the MMA thread waited for
    before that commit: the unmutated run shows the barrier bringing its threads only their waits on 'mma
    complete', which is never invalidated, so it is listed (`_orders_nothing_new`; its mutant was the last
    survivor). The softmax barriers that order the output tile's stmatrix before the TMA store and the
    tensor-memory reads before the dealloc are not listed, and their mutants are reported."""
    c = mutations.prepare("fa_bf16_q128k64d128_causal", "sm_100")
    assert c is not None
    lines = c.ptx.split("\n")
    (done,) = [n + 1 for n, t in enumerate(lines) if "// wait: mma complete" in t]
    named = [n + 1 for n, t in enumerate(lines) if t.split("//")[0].strip() == "bar.sync 1, 256;" and n + 1 > done]
    assert len(named) == 4 and "mbarrier.inval" in "\n".join(lines[named[0]:named[0] + 8])
    op = OPERATORS["delete bar.sync"]
    mutants = {line: (what, ptx) for line, what, ptx in op.mutants(c.ptx)}
    what, ptx = mutants[named[0]]
    assert "gave none of its threads an event" in (mutations.equivalent(op, what, c, named[0]) or "")
    assert mutations.outcome(c, ptx) is None
    for line in named[2:]:
        assert not mutations._orders_nothing_new(c, line)
        assert mutations.outcome(c, mutants[line][1]) is not None

def test_the_epilogues_after_fence_past_a_barrier_of_two_warpgroups_is_modelled_on_sm_100() -> None:
    """sm_100 causal attention, 128 x 128 blocks: its two softmax warpgroups (warps w and w + 4 share a lane
    quarter) wait for the last MMAs' commit, meet at bar.sync 1, 256 and fence before they read O back. Each warp
    reads and writes only its own 16 lanes (every tcgen05.ld / st address evaluated per warp, the S / P buffers
    over both stages), so the barrier hands over no tensor-memory work and the fence orders only the mbarrier's
    handoff: listed as modelled (`_warps_apart`; its mutant was a survivor). The same PTX with the first read-back
    addressed at lane 0 for every warp (two warps of a quarter then share lanes) is not listed."""
    c = mutations.prepare("fa_f16_q128k128d128_causal", "sm_100")
    assert c is not None
    lines = c.ptx.split("\n")
    (done,) = [n + 1 for n, t in enumerate(lines) if "// wait: mma complete" in t]
    fence = next(n + 1 for n, t in enumerate(lines) if n + 1 > done and t.strip() == "tcgen05.fence::after_thread_sync;")
    op = OPERATORS["delete tcgen05.fence::after_thread_sync"]
    (what,) = [what for line, what, _ in op.mutants(c.ptx) if line == fence]
    assert mutations.equivalent(op, what, c, fence) == mutations.MODELLED_PAST_BARRIERS
    base = re.search(r"ld\.volatile\.shared\.b32\s+(%r\d+)", c.ptx)
    assert base is not None
    read = next(n for n, t in enumerate(lines) if n + 1 > fence and "tcgen05.ld." in t)
    edited = lines[:read] + [re.sub(r"\[%r\d+\]", f"[{base.group(1)}]", lines[read])] + lines[read + 1:]
    assert not mutations._after_sync_handed_by_mbarrier("\n".join(edited), fence)


@pytest.mark.parametrize("gpu", ["sm_80", "sm_120"])
def test_the_overlapping_output_guard_of_rope_is_reached_by_the_aliased_launches(gpu: str) -> None:
    """Rope stores the two halves of D as two tiles of one partition of y: our compiler orders them (membar.cta;
    bar.sync 0) only where y's runtime strides make the view overlap itself, so no launch of a contiguous y
    reaches the guard and its mutants used to survive. The launch with the heads' stride halved (OVERLAPPING:
    head h's second half lands on head h + 1's first) runs it; the unmutated PTX stays clean there and in place
    (IN_PLACE, x passed as y), and every mutant of the guard's barrier is reported, by that launch only."""
    c = mutations.prepare("rope_bf16_s4h32d128", gpu)
    assert c is not None
    assert [launch.label for launch in c.aliased] == ["in place", "overlapping output view"]
    assert mutations.outcome(c, c.ptx) is None
    lines = c.ptx.split("\n")
    (guard,) = [n + 2 for n, t in enumerate(lines) if t.strip() == "membar.cta;"]
    assert lines[guard - 1].split() == ["bar.sync", "0;"]
    found = 0
    for name in ("split an aligned barrier", "delete bar.sync"):
        for line, what, ptx in OPERATORS[name].mutants(c.ptx):
            if line != guard or mutations.equivalent(OPERATORS[name], what, c, line) is not None:
                continue
            found += 1
            reported = mutations.outcome(c, ptx)
            assert reported is not None and reported.startswith("overlapping output view: "), f"{what}: {reported}"
            assert mutations.outcome(c, ptx, extra=False) is None
    assert found >= 1


def test_a_sweep_in_shards_scores_as_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--shard I/N --json F` runs the I-th share of the kernel-target pairs and writes each verdict as it is
    known (a sweep of the whole catalogue, 28360 mutants, takes several sittings); `--report` scores the
    shards' verdicts together as the unsharded run scores them."""
    args = ["--configs", KERNEL, "--targets", "sm_80,sm_90", "--per-operator", "1", "--quiet"]
    assert mutations.main(args) == 0
    whole = capsys.readouterr().out
    shards = [tmp_path / f"s{i}.jsonl" for i in (1, 2)]
    for i, path in enumerate(shards, 1):
        assert mutations.main([*args, "--shard", f"{i}/2", "--json", str(path)]) == 0
    capsys.readouterr()
    assert all(path.read_text().strip() for path in shards)     # one kernel-target pair each
    assert mutations.main(["--report", *map(str, shards)]) == 0
    joined = capsys.readouterr().out

    def score(text: str) -> str:
        return next(line for line in text.splitlines() if line.startswith("mutation score"))
    assert score(joined) == score(whole) and "(2 kernels)" in joined
    # a shard run again resumes: nothing new is run, nothing written twice
    before = shards[0].read_text()
    assert mutations.main([*args, "--shard", "1/2", "--json", str(shards[0])]) == 0
    assert shards[0].read_text() == before and score(capsys.readouterr().out) != ""


def test_the_barrier_after_an_attentions_key_loop_is_reported_by_the_launch_without_keys(
        unpipelined_where_two_stages_do_not_fit) -> None:
    """On sm_120 the attention's Q staging is reused by O's epilogue (stmatrix), and the key loop's first wait
    orders Q's cp.async before that; the barrier after the loop matters only where the loop runs no iteration (an
    empty key sequence), so its deletion survived every launch with keys. The launch without keys (RESHAPED) runs
    clean unmutated and reports that deletion as a race (outcome runs the launch with keys first: the label says
    that one ran clean). Where K is loaded by TMA no launch without keys is made: an empty dimension makes no
    tensor map."""
    c = mutations.prepare("fa_f16_q128k128d128", "sm_120")
    assert c is not None
    assert [r.label for r in c.reshaped] == ["no keys"]
    assert mutations.outcome(c, c.ptx) is None
    lines = c.ptx.split("\n")
    epilogue = next(n for n, t in enumerate(lines) if "stmatrix" in t)
    barrier = max(n for n in range(epilogue) if lines[n].split()[:1] == ["bar.sync"]) + 1
    (ptx,) = [ptx for line, _, ptx in OPERATORS["delete bar.sync"].mutants(c.ptx) if line == barrier]
    reported = mutations.outcome(c, ptx)
    assert reported is not None and reported.startswith("no keys: ") and "data race" in reported, reported
    tma = mutations.prepare("fa_f16_q128k128d128", "sm_90")
    assert tma is not None and "cp.async.bulk.tensor" in tma.ptx and tma.reshaped == []


def test_a_wgmma_fence_after_only_same_shape_wgmmas_is_equivalent_and_the_first_one_is_reported() -> None:
    """sm_90 tf32: each K step runs two groups of m64n256k8 wgmmas, each behind its own wgmma.fence, the K-major
    copy of the next K slice between them. The second fence follows only wgmmas of the same shape on the
    accumulator (ordered among themselves by the PTX ISA) since the first: the unmutated run shows it ordering
    nothing (redundancy.wgmma_fence), so deleting it is equivalent; deleting the first is reported."""
    c = mutations.prepare("mm_tf32_128x256x64", "sm_90")
    assert c is not None and mutations._one_wgmma_form(c.ptx)
    op = OPERATORS["delete wgmma.fence"]
    (first, a), (second, _) = [(line, ptx) for line, _, ptx in op.mutants(c.ptx)]
    assert mutations.equivalent(op, "", c, second) is not None
    assert mutations.equivalent(op, "", c, first) is None
    reported = mutations.outcome(c, a)
    assert reported is not None and "wgmma.mma_async without wgmma.fence" in reported, reported
