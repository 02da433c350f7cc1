"""Hardware atoms as layouts (tileiras/layout/atoms.py) against the PTX ISA's fragment tables, and
the lowering's concrete layouts (tileiras/layout/encodings.py, run instruction by instruction
with tileiras/layout/index_eval.py) against the atoms and the algebra."""

from __future__ import annotations

import pytest

from tileiras.layout.index_eval import placements
from tileiras.layout.algebra import Layout, Swizzled, composition, make_layout, row_major, size
from tileiras.layout.atoms import LDMATRIX, MMA_C, MMA_SYNC, SMEM_SWIZZLES, Fragment, wgmma_accumulator
from tileiras.layout.encodings import BlockedLayout, MmaLayout, MmaRowLayout, row_layout


def covers_once(f: Fragment, threads: int = 32) -> bool:
    per_thread = f.rows * f.cols // threads
    image = sorted(f.tv(t, v) for t in range(threads) for v in range(per_thread))
    return image == list(range(f.rows * f.cols))


# --- mma.sync fragments: PTX ISA, "Matrix Fragments for mma.m16n8k*" ----------------------------
# (row, col) of element i of lane's fragment, transcribed per table; g = groupID, t = threadID_in_group

def _ptx_a(key: tuple[str, int], g: int, t: int, i: int) -> tuple[int, int]:
    if key == ("m16n8k8", 16):
        return (g if i < 2 else g + 8), t * 2 + (i & 1)
    if key == ("m16n8k16", 16):
        return (g if i < 2 or 4 <= i < 6 else g + 8), t * 2 + (i & 1) + (8 if i >= 4 else 0)
    if key == ("m16n8k8", 32):
        return (g if i in (0, 2) else g + 8), (t if i < 2 else t + 4)
    if key == ("m16n8k16", 8):
        return (g if i < 4 else g + 8), t * 4 + (i & 3)
    if key == ("m16n8k32", 8):
        return (g if i < 4 or 8 <= i < 12 else g + 8), t * 4 + (i & 3) + (16 if i >= 8 else 0)
    raise KeyError(key)


def _ptx_b(key: tuple[str, int], g: int, t: int, i: int) -> tuple[int, int]:
    if key == ("m16n8k8", 16):
        return t * 2 + i, g
    if key == ("m16n8k16", 16):
        return t * 2 + (i & 1) + (8 if i >= 2 else 0), g
    if key == ("m16n8k8", 32):
        return (t if i == 0 else t + 4), g
    if key == ("m16n8k16", 8):
        return t * 4 + i, g
    if key == ("m16n8k32", 8):
        return t * 4 + (i & 3) + (16 if i >= 4 else 0), g
    raise KeyError(key)


def _ptx_c(g: int, t: int, i: int) -> tuple[int, int]:
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


@pytest.mark.parametrize("key", sorted(MMA_SYNC))
def test_mma_sync_fragments_match_the_ptx_tables(key: tuple[str, int]) -> None:
    a, b = MMA_SYNC[key]
    k = int(key[0].split("k")[1])
    assert (a.rows, a.cols, b.rows, b.cols) == (16, k, k, 8)
    for frag, rule in ((a, _ptx_a), (b, _ptx_b)):
        per_thread = frag.rows * frag.cols // 32
        # every 32-bit register holds 32 / bits elements
        assert per_thread * key[1] % 32 == 0
        for lane in range(32):
            for i in range(per_thread):
                assert frag.coord(lane, i) == rule(key, lane >> 2, lane % 4, i), (key, lane, i)
        assert covers_once(frag)


def test_mma_accumulator_matches_the_ptx_table() -> None:
    for lane in range(32):
        for i in range(4):
            assert MMA_C.coord(lane, i) == _ptx_c(lane >> 2, lane % 4, i)
    assert covers_once(MMA_C)


@pytest.mark.parametrize("n", [8, 16, 64, 128, 256])
def test_wgmma_accumulator(n: int) -> None:
    f = wgmma_accumulator(n)
    for tid in range(128):
        w, lane = divmod(tid, 32)
        g, t = lane >> 2, lane % 4
        for i in range(n // 2):
            assert f.coord(tid, i) == (16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1))
    assert covers_once(f, threads=128)
    # one warp's part is the m16n8 accumulator, repeated over the n/8 column blocks
    for tid in range(0, 128, 7):
        for i in range(n // 2):
            r, c = f.coord(tid, i)
            r0, c0 = MMA_C.coord(tid % 32, i % 4)
            assert (r, c) == (16 * (tid // 32) + r0, 8 * (i // 4) + c0)
    with pytest.raises(ValueError):
        wgmma_accumulator(12)


# --- ldmatrix: PTX ISA, "Warp-level matrix load instruction: ldmatrix" -------------------------

@pytest.mark.parametrize("count,trans", sorted(LDMATRIX))
def test_ldmatrix_atoms(count: int, trans: bool) -> None:
    atom = LDMATRIX[(count, trans)]
    # lanes 8q .. 8q+7 address rows 0..7 of matrix q
    assert [atom.addresses(lane) for lane in range(8 * count)] == [r + 64 * q for q in range(count) for r in range(8)]
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for q in range(count):
            for i in range(2):
                row, col = (2 * t + i, g) if trans else (g, 2 * t + i)
                assert atom.fragment(lane, i + 2 * q) == row + 8 * col + 64 * q
    image = sorted(atom.fragment(lane, v) for lane in range(32) for v in range(2 * count))
    assert image == list(range(64 * count))


def _operand(frag_key: tuple[str, int], operand: str, stored_kmajor: bool, steps: tuple) -> Layout:
    """(lane, value) -> operand index (row + rows*col) when ldmatrix.x4 reads matrix q at the stored
    offset the lowering's step table gives, mapped to the operand matrix the mma expects."""
    half = int(frag_key[0].split("k")[1]) // 2
    r_lo, r_hi, c_lo, c_hi = (half if s == "half" else s for s in steps)
    rows = 16
    # stored (row, col) -> operand (row, col): A is (M, K), B is (K, N) with 16 columns (two blocks)
    if operand == "a":
        to_index = (lambda sr, sc: sr + rows * sc) if stored_kmajor else (lambda sr, sc: sc + rows * sr)
    else:
        to_index = (lambda sr, sc: sc + 16 * sr) if stored_kmajor else (lambda sr, sc: sr + 16 * sc)
    # ldmatrix index r + 8c + 64q, q = (q % 2, q / 2) -> operand index, as one layout
    place = Layout((8, 8, (2, 2)), (to_index(1, 0), to_index(0, 1), (to_index(r_lo, c_lo), to_index(r_hi, c_hi))))
    return composition(place, LDMATRIX[(4, not stored_kmajor)].fragment)


@pytest.mark.parametrize("kmajor", [True, False])
def test_lowering_ldmatrix_steps_give_mma_fragments(kmajor: bool) -> None:
    """ops_mma's ldmatrix.x4 placements read exactly the m16n8k16 A fragment, and the B fragments
    of two adjacent 8-column blocks, in either stored orientation."""
    from tileiras.lowering.ops_mma import _X4_STEPS

    key = ("m16n8k16", 16)
    a_frag, b_frag = MMA_SYNC[key]
    got_a = _operand(key, "a", kmajor, _X4_STEPS[("a", kmajor)])
    assert all(got_a(lane, v) == a_frag.tv(lane, v) for lane in range(32) for v in range(8))
    got_b = _operand(key, "b", kmajor, _X4_STEPS[("b", kmajor)])
    two_blocks = make_layout(b_frag.tv[0], make_layout(b_frag.tv[1], Layout(2, 16 * 8)))
    assert all(got_b(lane, v) == two_blocks(lane, v) for lane in range(32) for v in range(8))


# --- shared-memory swizzles ---------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(SMEM_SWIZZLES))
def test_smem_swizzle_modes(name: str) -> None:
    mode = SMEM_SWIZZLES[name]
    atom = 8 * mode.span                       # 8 rows of `span` bytes
    sw = mode.swizzle
    assert sorted(sw(o) for o in range(atom)) == list(range(atom))
    assert all(sw(o) // 16 == sw(o - o % 16) // 16 and sw(o) % 16 == o % 16 for o in range(atom))
    # the 8 rows' copies of any 16-byte chunk column sit in 8 different 16-byte bank groups
    for chunk in range(mode.span // 16):
        groups = {(sw(r * mode.span + 16 * chunk) // 16) % 8 for r in range(8)}
        assert len(groups) == 8
    # the element-index form is the same permutation
    for elem in (1, 2, 4, 8, 16):
        esw = mode.in_elements(elem)
        assert all(esw(i) * elem == sw(i * elem) for i in range(atom // elem))
    assert {m.tensormap for m in SMEM_SWIZZLES.values()} == {0, 1, 2, 3}
    assert {m.wgmma for m in SMEM_SWIZZLES.values()} == {0, 1, 2, 3}


@pytest.mark.parametrize("m0,k0", [(0, 0), (16, 8), (48, 48)])
def test_ldmatrix_on_a_128b_swizzled_tile_is_conflict_free(m0: int, k0: int) -> None:
    """A 64x64 f16 tile (128-byte rows) read by ldmatrix.x4 as an m16n8k16 A block: with the 128B
    swizzle each 8-lane phase reads 8 different 16-byte bank groups; unswizzled, one group."""
    atom = LDMATRIX[(4, False)]
    plain = row_major((64, 64))
    swizzled = Swizzled(SMEM_SWIZZLES["128B"].in_elements(2), plain)
    for tile, groups_per_phase in ((swizzled, 8), (plain, 1)):
        for phase in range(4):
            groups = set()
            for lane in range(8 * phase, 8 * phase + 8):
                r, q = atom.addresses(lane) % 8, atom.addresses(lane) // 64
                byte = 2 * tile(m0 + r + 8 * (q % 2), k0 + 8 * (q // 2))
                assert byte % 16 == 0
                groups.add(byte // 16 % 8)
            assert len(groups) == groups_per_phase


# --- the lowering's concrete layouts ------------------------------------------------------------

def _mma_prediction(layout: MmaLayout) -> Layout:
    """(tid, slot) -> row-major element of the (batch, rows, cols) tile: the m16n8 accumulator atom
    placed in a 16x8 block, blocks repeated per warp (columns fastest), warps over the grid."""
    b, m, n = layout.shape
    wb, wm, wn = layout.warps
    rb, rm, rn = layout.repeats
    block = composition(Layout((16, 8), (n, 1)), MMA_C.tv)          # atom in one block of the tile
    warps = Layout((wn, wm, wb), (8 * rn, 16 * rm * n, rb * m * n))
    repeats = Layout((rn, rm, rb), (8, 16 * n, m * n))
    return make_layout(make_layout(block[0], warps), make_layout(block[1], repeats))


MMA_CASES = [
    (128, (1, 16, 8), None), (128, (1, 64, 64), None), (128, (1, 128, 128), None),
    (256, (1, 128, 256), None), (128, (2, 32, 16), None), (128, (1, 64, 32), (1, 1, 2)),
    (128, (1, 64, 32), (1, 2, 2)), (128, (1, 32, 64), (1, 1, 4)), (256, (4, 16, 16), (2, 1, 2)),
    (128, (1, 64, 64), "rows"),
]


@pytest.mark.parametrize("threads,shape,warps", MMA_CASES)
def test_mma_layout_is_the_tiled_accumulator_atom(threads: int, shape: tuple, warps: object) -> None:
    if warps is None or warps == "rows":
        layout = MmaLayout.for_shape(threads, shape, row_warps_only=warps == "rows")
    else:
        layout = MmaLayout(threads, shape, warps)
    b, m, n = layout.shape
    predicted = _mma_prediction(layout)
    used = 32 * layout.warps[0] * layout.warps[1] * layout.warps[2]
    got = placements(layout, threads, b * m * n)
    slots = layout.slots(b * m * n)
    for (tid, slot), (e, first) in got.items():
        assert e == predicted(tid % used, slot), (tid, slot)
        assert first == (tid < used)
    assert sorted(e for e, first in got.values() if first) == list(range(b * m * n))
    assert size(predicted) == used * slots
    if warps == "rows":
        rows = MmaRowLayout(layout)
        got_rows = placements(rows, threads, b * m)
        assert sorted(e for e, first in got_rows.values() if first) == list(range(b * m))


BLOCKED_CASES = [(t, v, n) for t in (128, 256) for v in (1, 4, 8) for n in (1, 7, 100, 128, 1024, 4096)]


@pytest.mark.parametrize("threads,vec,n", BLOCKED_CASES)
def test_blocked_layout(threads: int, vec: int, n: int) -> None:
    layout = BlockedLayout(threads, vec)
    got = placements(layout, threads, n)
    assert sorted(e for e, first in got.values() if first) == list(range(n))
    if layout.owns_all(n):
        v = layout.run(n)
        algebra = Layout((threads, (v, n // (v * threads))), (v, (1, v * threads)))
        assert all(e == algebra(tid, slot) for (tid, slot), (e, _) in got.items())


ROW_CASES = [(t, shape) for t in (128, 256)
             for shape in ((16, 64), (4, 1024), (1, 4096), (2, 8192), (64, 8), (8, 1), (32, 32), (3, 256), (128,))]


@pytest.mark.parametrize("vec", [1, 8])
@pytest.mark.parametrize("threads,shape", ROW_CASES)
def test_row_warp_layout(threads: int, shape: tuple, vec: int) -> None:
    """Contiguous per lane (vec 1), or runs of vec elements dealt round the row's lanes: a warp's
    vector access i then covers 32 vec consecutive elements (coalesced)."""
    layout = row_layout(threads, shape, vec=vec)
    n = 1
    for d in shape:
        n *= d
    got = placements(layout, threads, n)
    assert all(0 <= e < n for e, _ in got.values())
    assert sorted(e for e, first in got.values() if first) == list(range(n))
    if layout.owns_all(n):
        cs, groups, run, span = layout.per_lane, layout.groups, layout.chunk or layout.per_lane, layout.span
        algebra = Layout(((span, groups), (run, cs // run, layout.row_groups(n))),
                         ((run, layout.cols), (1, span * run, groups * layout.cols)))
        assert all(e == algebra(tid, slot) for (tid, slot), (e, _) in got.items())
    if vec > 1 and layout.rpw > 1:   # rows narrower than 32 vectors: a vector (or what rows allow) per lane
        assert layout.per_lane == layout.run(n) <= vec and layout.span * layout.per_lane == layout.cols
        assert layout.per_lane == vec or n // layout.cols < 2 * layout.groups   # fewer rows than a wider layout holds
    if vec > 1 and layout.per_lane > vec:
        assert layout.run(n) == vec
        for slot in range(0, layout.per_lane, vec):   # one vector access of warp 0's lanes
            starts = sorted(got[(lane, slot)][0] for lane in range(32))
            assert starts == list(range(starts[0], starts[0] + 32 * vec, vec))


def test_evaluator_runs_only_what_it_knows() -> None:
    from tileiras.layout.index_eval import Evaluator

    ev = Evaluator(37)
    w = ev.pre("lshr i32 %tid, 5", "w")
    ok = ev.pre(f"icmp ult i32 {w}, 1", "ok")
    both = ev.pre(f"and i1 {ok}, 1", "ok")
    assert (ev.value(w), ev.value(ok), ev.value(both)) == (1, 0, 0)
    assert ev.value(ev.pre("sub i32 0, 1", "x")) == (1 << 32) - 1     # i32 wraps
    for bad in ("fadd float %tid, 1.0", "add i32 %nope, 1", "urem i32 %tid, 0", "icmp slt i32 %tid, 1"):
        with pytest.raises((ValueError, KeyError, ZeroDivisionError)):
            ev.pre(bad, "x")


@pytest.mark.parametrize("layout,n", [(BlockedLayout(256, 4), 4096), (BlockedLayout(128, 8), 8 * 24),
                                      (BlockedLayout(64, 1), 192), (row_layout(256, (1, 4096), vec=4), 4096),
                                      (row_layout(32, (64, 64), vec=4), 4096),
                                      (MmaLayout(128, (1, 64, 64), (1, 4, 1)), 64 * 64)])
def test_a_program_computes_what_the_evaluator_does(layout, n: int) -> None:
    """index_eval.Program (the instructions parsed once, run per value: scratch_swizzle's bank
    counts) gives every lane's element and first-copy flag as Evaluator does, and the swizzled
    scratch index of every element; it refuses what Evaluator refuses."""
    from tileiras.layout.index_eval import Evaluator, Program
    from tileiras.layout.index_math import element
    from tileiras.tileas.scratch_swizzle import ScratchSwizzle

    for slot in range(layout.slots(n)):
        run = Program(lambda pre: element(layout, pre, "%tid", n, slot))
        for tid in (0, 1, 5, 31, 32, 77, layout.threads - 1):
            ev = Evaluator(tid)
            e, first = element(layout, ev.pre, "%tid", n, slot)
            assert run(tid) == (ev.value(e), None if first is None else ev.value(first))
    swizzle = ScratchSwizzle(4, 4, 4, 1)
    index = Program(lambda pre: swizzle.index(pre, "%e"), "%e")
    for e in range(0, n, 7):
        ev = Evaluator(e, "%e")
        assert index(e) == (ev.value(swizzle.index(ev.pre, "%e")),)
    for bad in ("fadd float %tid, 1.0", "add i32 %nope, 1", "icmp slt i32 %tid, 1"):
        with pytest.raises((ValueError, KeyError)):
            Program(lambda pre, bad=bad: pre(bad, "x"))
    with pytest.raises(ZeroDivisionError):
        Program(lambda pre: pre("urem i32 %tid, 0", "x"))(3)


@pytest.mark.parametrize("layout,shape,every", [
    (BlockedLayout(128, 8), (32, 256), True),     # runs of 8, a 1024-element sweep covers whole rows
    (BlockedLayout(128, 8), (256, 32), True),     # a sweep covers 32 rows of 32
    (BlockedLayout(128, 4), (4, 16, 64), True),   # rank 3
    (BlockedLayout(128, 8), (8, 24), False),      # fewer elements than a sweep: replicated, none
    (BlockedLayout(64, 1), (64, 3), False),       # a sweep of 64 ends mid-row: the carry depends on the thread
    (row_layout(256, (4, 4096)), (4, 4096), True),            # 2 warps a row... (a persistent softmax's chunk)
    (row_layout(256, (4, 4096), vec=8), (4, 4096), True),     # ...its runs of 8 dealt round the lanes
    (row_layout(128, (16, 1024), vec=4), (16, 1024), True),   # 4 rows at once, 4 slot groups
    (row_layout(256, (64, 16), vec=8), (64, 16), True),       # several rows a warp (rpw)
    (row_layout(128, (1, 8, 512), vec=8), (1, 8, 512), True),  # rank 3, rows in the middle dimension
    (row_layout(128, (2, 4, 512), vec=8), (2, 4, 512), False),  # rows in two dimensions: none
    (row_layout(256, (2, 4096)), (2, 4096), True),            # 4 warps a row
])
def test_slot_shift_is_every_threads_distance(layout, shape, every: bool) -> None:
    """Where `slot_shift` gives a shift, every thread's element of that slot lies exactly that far
    (per dimension) from its slot-0 element; the lowering then steps addresses from one pointer."""
    import numpy as np

    n = int(np.prod(shape))
    placed = placements(layout, layout.threads, n)
    shifts = [layout.slot_shift(shape, slot) for slot in range(layout.slots(n))]
    assert all(s is not None for s in shifts) == every
    for slot, shift in enumerate(shifts):
        if shift is None:
            continue
        for tid in range(layout.threads):
            first = np.unravel_index(placed[(tid, 0)][0], shape)
            here = np.unravel_index(placed[(tid, slot)][0], shape)
            assert tuple(int(h) - int(f) for h, f in zip(here, first)) == shift
