"""The layout algebra (tileiras/layout/algebra.py): CuTe's documented examples as known values, and
the algebraic laws on many generated layouts (hierarchical, with gaps, broadcasts and
permutations)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tileiras.layout.algebra import (
    Layout, Swizzle, Swizzled, blocked_product, coalesce, column_major, complement, composition,
    cosize, depth, filter_zeros, flat, flatten, left_inverse, logical_divide, logical_product,
    make_layout, rank, raked_product, right_inverse, row_major, size, tiled_divide, zipped_divide)

L = Layout


def values(layout: Layout) -> list[int]:
    return [layout(i) for i in range(size(layout))]


def same_function(a: Layout, b: Layout) -> bool:
    return size(a) == size(b) and values(a) == values(b)


# --- known values (CuTe documentation, "CuTe Layout Algebra") -----------------------------------

KNOWN = [
    (lambda: composition(L((6, 2), (8, 2)), L((4, 3), (3, 1))), "((2,2),3):((24,2),8)"),
    (lambda: composition(L(20, 2), L((5, 4), (4, 1))), "(5,4):(8,2)"),
    (lambda: composition(L((10, 2), (16, 4)), L((5, 4), (1, 5))), "(5,(2,2)):(16,(80,4))"),
    (lambda: composition(L((12, (4, 8)), (59, (13, 1))), (L(3, 4), L(8, 2))), "(3,(2,4)):(236,(26,1))"),
    (lambda: composition(L((12, (4, 8)), (59, (13, 1))), (3, 8)), "(3,(4,2)):(59,(13,1))"),
    (lambda: complement(L(4, 1), 24), "6:4"),
    (lambda: complement(L(6, 4), 24), "4:1"),
    (lambda: complement(L((4, 6), (1, 4)), 24), "1:0"),
    (lambda: complement(L(4, 2), 24), "(2,3):(1,8)"),
    (lambda: complement(L((2, 4), (1, 6)), 24), "3:2"),
    (lambda: complement(L((2, 2), (1, 6)), 24), "(3,2):(2,12)"),
    (lambda: logical_divide(L((4, 2, 3), (2, 1, 8)), L(4, 2)), "((2,2),(2,3)):((4,1),(2,8))"),
    (lambda: logical_divide(L((9, (4, 8)), (59, (13, 1))), (L(3, 3), L((2, 4), (1, 8)))),
     "((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))"),
    (lambda: logical_product(L((2, 2), (4, 1)), L(6, 1)), "((2,2),(2,3)):((4,1),(2,8))"),
    (lambda: blocked_product(L((2, 5), (5, 1)), L((3, 4), (1, 3))), "((2,3),(5,4)):((5,10),(1,30))"),
    (lambda: raked_product(L((2, 5), (5, 1)), L((3, 4), (1, 3))), "((3,2),(4,5)):((10,5),(30,1))"),
    (lambda: coalesce(L((2, (1, 6)), (1, (6, 2)))), "12:1"),
    (lambda: coalesce(L((2, 4), (4, 1))), "(2,4):(4,1)"),
    (lambda: coalesce(L((4, 2), (1, 4))), "8:1"),
    (lambda: filter_zeros(L((4, 3), (1, 0))), "(4,1):(1,0)"),
]


@pytest.mark.parametrize("compute,expected", KNOWN, ids=[e for _, e in KNOWN])
def test_known_values(compute, expected: str) -> None:
    assert repr(compute()) == expected


def test_zipped_and_tiled_divide_shapes() -> None:
    a = L((9, (4, 8)), (59, (13, 1)))
    tiler = (L(3, 3), L((2, 4), (1, 8)))
    z = zipped_divide(a, tiler)
    assert repr(z) == "((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))"
    assert z[0] == composition(a, tiler)
    t = tiled_divide(a, tiler)
    assert rank(t) == 3 and t[0] == z[0] and (t[1], t[2]) == (z[1][0], z[1][1])


def test_coordinates_of_every_depth() -> None:
    a = L((2, (3, 4)), (1, (2, 6)))     # compact, column-major
    assert values(a) == list(range(24))
    assert a(1, (2, 3)) == 1 + 4 + 18 and a(1, 11) == a(1, (2, 3)) and a(23) == 23
    assert [row_major((3, 4))(r, c) for r in range(3) for c in range(4)] == list(range(12))
    assert (size(a), cosize(a), rank(a), depth(a)) == (24, 24, 2, 2)
    assert column_major((2, (3, 4))) == (1, (2, 6))


def test_bad_layouts_are_rejected() -> None:
    with pytest.raises(ValueError):
        L((2, 3), (1,))
    with pytest.raises(ValueError):
        L(4, -1)
    with pytest.raises(ValueError):
        composition(L((6, 2), (1, 10)), L(3, 4))      # every 4th of a 6-mode is not affine
    with pytest.raises(ValueError):
        complement(L((2, 2), (1, 1)), 8)              # overlapping modes have no complement


def test_swizzle_is_an_involution_and_a_bijection() -> None:
    for sw in (Swizzle(3, 4, 3), Swizzle(2, 3, 3), Swizzle(1, 0, 5)):
        span = 1 << (sw.base + sw.shift + sw.bits)
        image = [sw(i) for i in range(span)]
        assert sorted(image) == list(range(span))
        assert all(sw(sw(i)) == i for i in range(span))
    assert Swizzle(3, 4, 3)(0x80) == 0x90 and Swizzle(3, 4, 3)(0x3F0) == 0x380
    tile = Swizzled(Swizzle(3, 3, 3), row_major((8, 64)))
    assert sorted(tile(r, c) for r in range(8) for c in range(64)) == list(range(512))


# --- generated layouts --------------------------------------------------------------------------

@st.composite
def grouped(draw, modes: list[tuple[int, int]]) -> Layout:
    """A random hierarchy over flat (shape, stride) modes, order kept."""
    def group(ms: list[tuple[int, int]], level: int) -> tuple:
        if len(ms) == 1 and (level > 0 or draw(st.booleans())):
            return ms[0]
        if level >= 2 or len(ms) == 1:
            return tuple(s for s, _ in ms), tuple(d for _, d in ms)
        cuts = sorted(draw(st.sets(st.integers(1, len(ms) - 1), max_size=len(ms) - 1))) if len(ms) > 1 else []
        parts = [ms[i:j] for i, j in zip([0, *cuts], [*cuts, len(ms)])]
        kids = [group(p, level + 1) for p in parts]
        return tuple(k[0] for k in kids), tuple(k[1] for k in kids)
    shape, stride = group(modes, 0)
    return Layout(shape, stride)


@st.composite
def any_layouts(draw) -> Layout:
    n = draw(st.integers(1, 4))
    modes = [(draw(st.integers(1, 6)), draw(st.integers(0, 40))) for _ in range(n)]
    return draw(grouped(modes))


@st.composite
def injective_layouts(draw, pow2: bool = False, max_modes: int = 4) -> Layout:
    """Modes nested in a random order, with gaps between them (`pow2`: all powers of two)."""
    n = draw(st.integers(1, max_modes))
    extents = [draw(st.sampled_from([2, 4, 8]) if pow2 else st.integers(2, 5)) for _ in range(n)]
    order = draw(st.permutations(range(n)))
    strides = [0] * n
    current = 1
    for i in order:
        strides[i] = current * draw(st.sampled_from([1, 1, 2, 4]) if pow2 else st.sampled_from([1, 1, 2, 3]))
        current = strides[i] * extents[i]
    return draw(grouped(list(zip(extents, strides))))


@st.composite
def pow2_layouts(draw, max_modes: int = 3) -> Layout:
    n = draw(st.integers(1, max_modes))
    modes = [(draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from([0, 1, 2, 4, 8, 16, 32]))) for _ in range(n)]
    return draw(grouped(modes))


def extent(layout: Layout) -> int:
    """The nesting bound of an injective layout: the largest shape * stride of its modes."""
    return max(s * d for s, d in zip(flat(layout.shape), flat(layout.stride)))


@settings(max_examples=150, deadline=None)
@given(any_layouts())
def test_flatten_and_coalesce_keep_the_function(a: Layout) -> None:
    for b in (flatten(a), coalesce(a)):
        assert same_function(a, b)
    c = coalesce(a)
    assert depth(c) <= 1 and coalesce(c) == c
    assert cosize(a) == max(values(a)) + 1
    # filter_zeros drops exactly the broadcasts: the same indices, each reached once per non-broadcast coordinate
    f = filter_zeros(a)
    assert set(values(f)) == set(values(a)) and size(coalesce(f)) * sum(1 for v in values(a) if v == 0) == size(a)


@settings(max_examples=150, deadline=None)
@given(pow2_layouts(), injective_layouts(pow2=True, max_modes=3))
def test_composition_is_function_composition(a: Layout, b: Layout) -> None:
    assume(cosize(b) <= size(a))                               # B's image inside A's domain
    r = composition(a, b)
    assert size(r) == size(b)
    assert [r(i) for i in range(size(b))] == [a(b(i)) for i in range(size(b))]


@settings(max_examples=100, deadline=None)
@given(pow2_layouts(), injective_layouts(pow2=True, max_modes=3), injective_layouts(pow2=True, max_modes=3))
def test_composition_is_associative(a: Layout, b: Layout, c: Layout) -> None:
    assume(cosize(c) <= size(b) and cosize(b) <= size(a))
    left, right = composition(composition(a, b), c), composition(a, composition(b, c))
    assert same_function(left, right)


@settings(max_examples=100, deadline=None)
@given(pow2_layouts(max_modes=2), pow2_layouts(max_modes=2), pow2_layouts(max_modes=2))
def test_by_mode_composition(a0: Layout, a1: Layout, b0: Layout) -> None:
    a = make_layout(a0, a1)
    r = composition(a, (b0, size(a1)))
    assert r[0] == composition(a0, b0) and same_function(r[1], a1)


@settings(max_examples=150, deadline=None)
@given(injective_layouts(), st.integers(1, 3))
def test_complement_is_disjoint_and_completes(a: Layout, k: int) -> None:
    m = extent(a) * k
    c = complement(a, m)
    strides = flat(coalesce(c).stride)
    assert list(strides) == sorted(strides)                   # ordered, hence unique
    both = values(make_layout(a, c))
    assert sorted(both) == list(range(m))                      # disjoint, and covers [0, m) exactly
    assert set(values(a)) & set(values(c)) == {0}


@settings(max_examples=150, deadline=None)
@given(injective_layouts())
def test_inverses(a: Layout) -> None:
    li = left_inverse(a)
    assert all(li(a(i)) == i for i in range(size(a)))
    ri = right_inverse(a)
    assert all(a(ri(i)) == i for i in range(size(ri)))
    if cosize(a) == size(a):                                   # a permutation of [0, size)
        assert size(ri) == size(a) and same_function(coalesce(ri), coalesce(li))


@settings(max_examples=150, deadline=None)
@given(pow2_layouts(max_modes=4), injective_layouts(pow2=True, max_modes=2))
def test_logical_divide_regroups_the_same_indices(a: Layout, tile: Layout) -> None:
    assume(size(a) % extent(tile) == 0)
    d = logical_divide(a, tile)
    assert size(d) == size(a) and rank(d) == 2
    assert size(d[0]) == size(tile) and size(d[1]) * size(tile) == size(a)
    assert same_function(d[0], composition(a, tile))
    assert sorted(values(d)) == sorted(values(a))              # each of A's indices, as often as A has it
    # the divided coordinates are a permutation of A's: composing A with (tile, rest) is the divide
    tiler = make_layout(tile, complement(tile, size(a)))
    assert sorted(values(tiler)) == list(range(size(a)))
    assert same_function(d, composition(a, tiler))


@settings(max_examples=100, deadline=None)
@given(injective_layouts(pow2=True, max_modes=2), injective_layouts(pow2=True, max_modes=2))
def test_zipped_divide_by_mode(t0: Layout, t1: Layout) -> None:
    a = row_major((extent(t0) * 2, extent(t1) * 4))
    assume(size(a) <= 4096)
    z = zipped_divide(a, (t0, t1))
    assert same_function(z[0], composition(a, (t0, t1)))
    assert sorted(values(z)) == list(range(size(a)))
    assert size(z[1]) == size(a) // (size(t0) * size(t1))


@settings(max_examples=150, deadline=None)
@given(injective_layouts(pow2=True, max_modes=3), injective_layouts(pow2=True, max_modes=3))
def test_products(a: Layout, b: Layout) -> None:
    assume(size(a) * cosize(b) <= 4096)
    p = logical_product(a, b)
    assert size(p) == size(a) * size(b) and p[0] == a
    image = values(p)
    assert len(set(image)) == len(image)                       # the copies of A never collide
    for q in (blocked_product(a, b), raked_product(a, b)):
        assert size(q) == size(p) and rank(q) == max(rank(a), rank(b))
        assert sorted(values(q)) == sorted(image)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))
def test_blocked_and_raked_products_of_compact_tiles(m: int, n: int, p: int, q: int) -> None:
    a, b = L((m, n)), L((p, q))
    blocked, raked = blocked_product(a, b), raked_product(a, b)
    for r in range(m * p):
        for c in range(n * q):
            # blocked: tile (r // m, c // n) of B holds A at (r % m, c % n); raked interleaves
            assert blocked(r, c) == a(r % m, c % n) + size(a) * b(r // m, c // n)
            assert raked(r, c) == a(r // p, c // q) + size(a) * b(r % p, c % q)
