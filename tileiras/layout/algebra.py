"""A layout algebra in the CuTe style (seed 004, "cuTe Layout Algebra and Descriptor Grammar").

A `Layout` is a pair of congruent trees of integers, shape and stride, read as a function from
coordinates to an index: index = sum(coord_leaf * stride_leaf). Coordinates may be given at any
depth: an integer for a tuple mode is split colexicographically (first mode fastest) over that
mode's shape, so every layout is also a function of one integer in [0, size).

Composition follows CuTe: `composition(A, B)(c) == A(B(c))`, with B's shape. Strides are
non-negative (the hardware layouts this describes never walk backwards), which keeps `cosize`,
`complement` and the inverses well defined.
"""

from __future__ import annotations

from typing import Iterator, Optional, Union

IntTuple = Union[int, tuple["IntTuple", ...]]
Tiler = Union["Layout", int, tuple["Tiler", ...]]


# --- integer tuples -----------------------------------------------------------------------------

def flat(t: IntTuple) -> tuple[int, ...]:
    """The leaves of an integer tree, left to right."""
    return (t,) if isinstance(t, int) else tuple(x for c in t for x in flat(c))


def product(t: IntTuple) -> int:
    """Product of the leaves."""
    out = 1
    for x in flat(t):
        out *= x
    return out


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """Same tree structure."""
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int)
    return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b))


def crd2idx(coord: IntTuple, shape: IntTuple, stride: IntTuple) -> int:
    """Index of a coordinate of any depth (an integer spans the whole mode it stands for, and
    past its end along the last mode, as composition extends a layout)."""
    if isinstance(shape, int):
        if not isinstance(coord, int):
            raise ValueError(f"coordinate {coord} is deeper than shape {shape}")
        return coord * stride  # type: ignore[operator]
    if isinstance(coord, int):      # colexicographic; the last mode takes what is left
        out = 0
        for i, (s, d) in enumerate(zip(shape, stride)):  # type: ignore[arg-type]
            n = product(s)
            out += crd2idx(coord if i == len(shape) - 1 else coord % n, s, d)
            coord //= n
        return out
    if len(coord) != len(shape):
        raise ValueError(f"coordinate {coord} does not match shape {shape}")
    return sum(crd2idx(c, s, d) for c, s, d in zip(coord, shape, stride))  # type: ignore[arg-type]


def _fmt(t: IntTuple) -> str:
    return str(t) if isinstance(t, int) else "(" + ",".join(_fmt(c) for c in t) + ")"


# --- layouts ------------------------------------------------------------------------------------

class Layout:
    """shape:stride, two congruent integer trees."""

    __slots__ = ("shape", "stride")
    shape: IntTuple
    stride: IntTuple

    def __init__(self, shape: IntTuple, stride: Optional[IntTuple] = None) -> None:
        stride = column_major(shape) if stride is None else stride
        if not congruent(shape, stride):
            raise ValueError(f"shape {_fmt(shape)} and stride {_fmt(stride)} are not congruent")
        if any(s < 1 for s in flat(shape)) or any(d < 0 for d in flat(stride)):
            raise ValueError(f"layout {_fmt(shape)}:{_fmt(stride)} needs positive extents and non-negative strides")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "stride", stride)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("layouts are immutable")

    def __call__(self, *coord: IntTuple) -> int:
        return crd2idx(coord[0] if len(coord) == 1 else coord, self.shape, self.stride)

    def __getitem__(self, i: int) -> "Layout":
        """Mode i (a leaf layout is its own single mode)."""
        if isinstance(self.shape, int):
            if i not in (0, -1):
                raise IndexError(i)
            return self
        return Layout(self.shape[i], self.stride[i])  # type: ignore[index]

    def modes(self) -> Iterator["Layout"]:
        for i in range(rank(self)):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and (self.shape, self.stride) == (other.shape, other.stride)

    def __hash__(self) -> int:
        return hash((self.shape, self.stride))

    def __repr__(self) -> str:
        return f"{_fmt(self.shape)}:{_fmt(self.stride)}"


def column_major(shape: IntTuple, start: int = 1) -> IntTuple:
    """Compact strides, first mode fastest (CuTe's default), congruent with `shape`."""
    if isinstance(shape, int):
        return start
    out = []
    for s in shape:
        out.append(column_major(s, start))
        start *= product(s)
    return tuple(out)


def row_major(shape: tuple[int, ...]) -> Layout:
    """A flat row-major layout (last mode fastest)."""
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return Layout(tuple(shape), tuple(reversed(strides)))


def make_layout(*layouts: Layout) -> Layout:
    """Concatenation: the layouts become the modes of one layout."""
    return Layout(tuple(x.shape for x in layouts), tuple(x.stride for x in layouts))


def _from_modes(modes: list[tuple[int, int]]) -> Layout:
    """A flat layout from (shape, stride) leaves: 1:0 when empty, a leaf when alone."""
    if not modes:
        return Layout(1, 0)
    if len(modes) == 1:
        return Layout(*modes[0])
    return Layout(tuple(s for s, _ in modes), tuple(d for _, d in modes))


def size(layout: Layout) -> int:
    """Number of coordinates in the domain."""
    return product(layout.shape)


def cosize(layout: Layout) -> int:
    """One past the largest index the layout reaches."""
    return layout(size(layout) - 1) + 1


def rank(layout: Layout) -> int:
    """Number of top-level modes (1 for a leaf)."""
    return 1 if isinstance(layout.shape, int) else len(layout.shape)


def depth(layout: Layout) -> int:
    """Nesting depth of the shape (0 for a leaf)."""
    def d(t: IntTuple) -> int:
        return 0 if isinstance(t, int) else 1 + max((d(c) for c in t), default=0)
    return d(layout.shape)


def flatten(layout: Layout) -> Layout:
    """The same function with the hierarchy removed: one mode per leaf."""
    return _from_modes(list(zip(flat(layout.shape), flat(layout.stride))))


def coalesce(layout: Layout) -> Layout:
    """The same function of one integer with the fewest modes: unit modes dropped, contiguous
    neighbours (stride_next == shape * stride) merged."""
    out: list[tuple[int, int]] = []
    for s, d in zip(flat(layout.shape), flat(layout.stride)):
        if s == 1:
            continue
        if out and out[-1][0] * out[-1][1] == d:
            out[-1] = (out[-1][0] * s, out[-1][1])
        else:
            out.append((s, d))
    return _from_modes(out)


def filter_zeros(layout: Layout) -> Layout:
    """Broadcast (stride 0) modes made unit modes: what the layout actually addresses."""
    def walk(s: IntTuple, d: IntTuple) -> IntTuple:
        if isinstance(s, int):
            return 1 if d == 0 else s
        return tuple(walk(x, y) for x, y in zip(s, d))  # type: ignore[arg-type]
    return Layout(walk(layout.shape, layout.stride), layout.stride)


def _as_layout(t: Union[Layout, int]) -> Layout:
    return t if isinstance(t, Layout) else Layout(t, 1)


def _by_mode(a: Layout, tiler: tuple, op) -> Layout:  # type: ignore[no-untyped-def]
    """Apply `op` to A's first len(tiler) modes pairwise; the remaining modes are kept."""
    if len(tiler) > rank(a):
        raise ValueError(f"tiler of rank {len(tiler)} for layout {a} of rank {rank(a)}")
    modes = [op(a[i], t) for i, t in enumerate(tiler)] + [a[i] for i in range(len(tiler), rank(a))]
    return make_layout(*modes)


def composition(a: Layout, b: Tiler) -> Layout:
    """A o B: the layout with B's shape and index A(B(c)). A tuple B composes mode by mode."""
    if isinstance(b, tuple):
        return _by_mode(a, b, composition)
    b = _as_layout(b)
    if not isinstance(b.shape, int):
        return make_layout(*(composition(a, m) for m in b.modes()))
    return _compose_leaf(coalesce(a), b.shape, b.stride)  # type: ignore[arg-type]


def _compose_leaf(a: Layout, s: int, d: int) -> Layout:
    """A (coalesced) composed with s:d: every d-th index of A, the first s of them."""
    if d == 0 or s == 1:
        return Layout(s, 0)
    modes = list(zip(flat(a.shape), flat(a.stride)))
    out: list[tuple[int, int]] = []
    rest_d, rest_s = d, s
    for sh, st in modes[:-1]:
        if rest_d % sh == 0:          # the stride steps over this whole mode
            rest_d //= sh
            continue
        if sh % rest_d:
            raise ValueError(f"composition {a} o {s}:{d}: stride {d} does not divide the shape")
        sh, st, rest_d = sh // rest_d, st * rest_d, 1
        if rest_s <= sh:
            out.append((rest_s, st))
            rest_s = 1
            break
        if rest_s % sh:
            raise ValueError(f"composition {a} o {s}:{d}: shape {s} does not divide the shape")
        out.append((sh, st))
        rest_s //= sh
    if rest_s > 1:                    # the last mode of A extends as far as needed
        out.append((rest_s, modes[-1][1] * rest_d))
    return _from_modes(out)


def complement(a: Layout, cotarget: Optional[int] = None) -> Layout:
    """The ordered layout of A's repetitions: (A, complement) is injective and reaches past
    `cotarget` (default cosize(A))."""
    m = cosize(a) if cotarget is None else cotarget
    modes = sorted((d, s) for s, d in zip(flat(a.shape), flat(a.stride)) if s != 1 and d != 0)
    out: list[tuple[int, int]] = []
    current = 1
    for d, s in modes:
        if d % current:
            raise ValueError(f"complement of {a}: modes overlap or do not nest")
        out.append((d // current, current))
        current = s * d
    out.append((-(-m // current), current))
    return coalesce(_from_modes(out))


def right_inverse(layout: Layout) -> Layout:
    """R with layout(R(i)) == i for i < size(R), as large as possible."""
    shapes = flat(layout.shape)
    modes = []
    index_stride = 1
    for s, d in zip(shapes, flat(layout.stride)):
        if s != 1 and d != 0:
            modes.append((d, s, index_stride))
        index_stride *= s
    out: list[tuple[int, int]] = []
    current = 1
    for d, s, istr in sorted(modes):
        if d != current:
            break
        out.append((s, istr))
        current = s * d
    return coalesce(_from_modes(out))


def left_inverse(layout: Layout) -> Layout:
    """L with L(layout(i)) == i for every i < size(layout) (layout injective)."""
    return right_inverse(make_layout(layout, complement(layout)))


def logical_divide(a: Layout, tiler: Tiler) -> Layout:
    """(tile, rest): A composed with the tiler and the tiler's complement in size(A); by mode for
    a tuple tiler."""
    if isinstance(tiler, tuple):
        return _by_mode(a, tiler, logical_divide)
    b = _as_layout(tiler)
    return composition(a, make_layout(b, complement(b, size(a))))


def zipped_divide(a: Layout, tiler: Tiler) -> Layout:
    """((tile modes), (rest modes)): the tiles gathered in mode 0, their arrangement in mode 1."""
    if not isinstance(tiler, tuple):
        return logical_divide(a, tiler)
    d = logical_divide(a, tiler)
    n = len(tiler)
    tiles = make_layout(*(d[i][0] for i in range(n)))
    rests = [d[i][1] for i in range(n)] + [d[i] for i in range(n, rank(d))]
    return make_layout(tiles, make_layout(*rests))


def tiled_divide(a: Layout, tiler: Tiler) -> Layout:
    """((tile modes), rest_0, rest_1, ...): zipped_divide with the rest modes at top level."""
    z = zipped_divide(a, tiler)
    return make_layout(z[0], *z[1].modes())


def logical_product(a: Layout, b: Layout) -> Layout:
    """(A, A* o B): A, repeated as B arranges, each copy on indices no other copy uses."""
    return make_layout(a, composition(complement(a, size(a) * cosize(b)), b))


def _mode_pairs(a: Layout, b: Layout) -> list[tuple[Layout, Layout]]:
    """logical_product of A and B padded to one rank, paired mode by mode."""
    r = max(rank(a), rank(b))
    pad = [Layout(1, 0)]
    a = make_layout(*a.modes(), *pad * (r - rank(a)))
    b = make_layout(*b.modes(), *pad * (r - rank(b)))
    p = logical_product(a, b)
    return [(p[0][i], p[1][i]) for i in range(r)]


def blocked_product(a: Layout, b: Layout) -> Layout:
    """A as a block, blocks arranged by B: mode i is (A_i, B_i)."""
    return make_layout(*(make_layout(x, y) for x, y in _mode_pairs(a, b)))


def raked_product(a: Layout, b: Layout) -> Layout:
    """A's elements interleaved with B's arrangement (cyclic): mode i is (B_i, A_i)."""
    return make_layout(*(make_layout(y, x) for x, y in _mode_pairs(a, b)))


# --- swizzles -----------------------------------------------------------------------------------

class Swizzle:
    """Swizzle<B, M, S> (CuTe's convention): index bits [M+S, M+S+B) are XORed into bits [M, M+B).
    A bijection, its own inverse, and the identity on each aligned block of 2^M indices."""

    __slots__ = ("bits", "base", "shift")

    def __init__(self, bits: int, base: int, shift: int) -> None:
        if bits < 0 or base < 0 or shift < bits:
            raise ValueError(f"Swizzle<{bits},{base},{shift}>: need B, M >= 0 and S >= B")
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "shift", shift)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("swizzles are immutable")

    def __call__(self, index: int) -> int:
        mask = ((1 << self.bits) - 1) << self.base
        return index ^ ((index >> self.shift) & mask)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Swizzle) and (self.bits, self.base, self.shift) == (other.bits, other.base, other.shift)

    def __hash__(self) -> int:
        return hash((self.bits, self.base, self.shift))

    def __repr__(self) -> str:
        return f"Swizzle<{self.bits},{self.base},{self.shift}>"


class Swizzled:
    """A layout whose indices pass through a swizzle: what a swizzled shared-memory tile is."""

    __slots__ = ("swizzle", "layout")

    def __init__(self, swizzle: Swizzle, layout: Layout) -> None:
        object.__setattr__(self, "swizzle", swizzle)
        object.__setattr__(self, "layout", layout)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("swizzled layouts are immutable")

    def __call__(self, *coord: IntTuple) -> int:
        return self.swizzle(self.layout(*coord))

    def __repr__(self) -> str:
        return f"{self.swizzle!r} o {self.layout!r}"
