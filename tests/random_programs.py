"""Random cuda_tile programs for differential testing: hypothesis strategies and a checker.

Two families, each a whole kernel in TileIR text plus its input arrays:

* `elementwise_programs`: a random DAG of arithmetic, math, compare, select and
  conversion ops (directed rounding and flush_to_zero included) over
  i8..i64/f16/bf16/f32/f64 tiles loaded from 1-D or 2-D arrays (some column-major)
  whose ragged shapes need masked loads and stores;
* `reduction_programs`: a reduce or scan along a random axis of a 1-D or 2-D tile,
  with a random combining body (or a two-result arg-max), its identity and a padding
  value for the ragged edge.

`check(program, gpu)` runs a program under the reference interpreter and under the PTX
emulator on what we compile for `gpu`, and lists the differences.

Accuracy contract: integers, and floats from IEEE-exact ops (add, sub, mul, div, fma,
sqrt in any rounding mode, min/max, abs, neg, floor, ceil, remf, conversions), must
match bit for bit (any NaN matches any NaN; -0 and +0 differ). Math functions go through
libdevice, whose documented error bounds (CUDA C Programming Guide, "Mathematical
Functions") are `MATH_ULPS`; a math op's result is only ever stored (never fed into
another op), so that bound is the whole allowed distance. f16/bf16 math is computed in
f32 and rounded: at most 1 ulp. Reductions use bodies that are associative and
commutative on the drawn values (small integers for float sums, +-1 and specials for
products, a total order for arg-max), so any combining order gives the interpreter's
exact result.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import ml_dtypes as md
import numpy as np
from hypothesis import strategies as st

INTS = ("i8", "i16", "i32", "i64")
FLOATS = ("f16", "bf16", "f32", "f64")
TYPES = INTS + FLOATS
DTYPE: dict[str, Any] = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
                         "f16": np.float16, "bf16": md.bfloat16, "f32": np.float32, "f64": np.float64}
BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64}
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}

# libdevice's documented maximum ulp error (f32, f64); f16/bf16 get 1 (computed in f32)
MATH_ULPS: dict[str, tuple[int, int]] = {
    "exp": (2, 1), "exp2": (2, 1), "log": (1, 1), "log2": (1, 1), "sin": (2, 2), "cos": (2, 2),
    "tan": (4, 2), "sinh": (3, 2), "cosh": (2, 1), "tanh": (2, 1), "rsqrt": (2, 1),
    "pow": (4, 2), "atan2": (3, 2),
}
UNARY_MATH = ("exp", "exp2", "log", "log2", "sin", "cos", "tan", "sinh", "cosh", "tanh", "rsqrt")

INT_BINARY = ("addi", "subi", "muli", "andi", "ori", "xori", "maxi signed", "maxi unsigned",
              "mini signed", "mini unsigned", "mulhii", "shli", "shri signed", "shri unsigned",
              "divi signed", "divi unsigned", "divi signed rounding<negative_inf>",
              "divi signed rounding<positive_inf>", "divi unsigned rounding<positive_inf>",
              "remi signed", "remi unsigned")
FLOAT_BINARY = ("addf", "subf", "mulf", "divf", "maxf", "minf", "maxf propagate_nan", "minf propagate_nan", "remf")
FLOAT_UNARY = ("negf", "absf", "floor", "ceil", "sqrt")
PREDICATES = ("equal", "not_equal", "less_than", "less_than_or_equal", "greater_than", "greater_than_or_equal")
ROUNDINGS = ("", " rounding<zero>", " rounding<negative_inf>", " rounding<positive_inf>")


@dataclass(frozen=True)
class Program:
    text: str                         # the module in TileIR text
    grid: tuple[int, ...]
    arrays: tuple[np.ndarray, ...]    # every argument: inputs, then outputs (initial contents)
    ulps: tuple[int, ...]             # per output: allowed ulp distance (0: bit exact)

    @property
    def n_inputs(self) -> int:
        return len(self.arrays) - len(self.ulps)

    def __repr__(self) -> str:       # what hypothesis prints for a falsifying example
        arrays = "\n".join(np.array2string(a, threshold=64) for a in self.arrays)
        return f"Program(grid={self.grid}, ulps={self.ulps})\n{self.text}arrays:\n{arrays}"


@dataclass
class Value:
    name: str
    ty: str                           # element type
    ulps: int = 0                     # > 0: a math result, only to be stored


@dataclass
class KernelText:
    """Builds the text of one entry `@k` over tiles of one shape."""
    tile: tuple[int, ...]
    params: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    count: int = 0

    def fresh(self, prefix: str = "v") -> str:
        self.count += 1
        return f"%{prefix}{self.count}"

    def t(self, ty: str, shape: Optional[tuple[int, ...]] = None) -> str:
        shape = self.tile if shape is None else shape
        return f"tile<{''.join(f'{d}x' for d in shape)}{ty}>"

    def op(self, text: str) -> str:
        name = self.fresh()
        self.lines.append(f"{name} = {text}")
        return name

    def view(self, ty: str, ndim: int, tile: tuple[int, ...], padding: Optional[str]) -> tuple[str, str]:
        """A partition view of a new array parameter (`ptr, shape..., strides...`): its name and type."""
        i = len(self.params)
        shape = ", ".join(f"%n{i}_{d}" for d in range(ndim))
        strides = ", ".join(f"%s{i}_{d}" for d in range(ndim))
        self.params.append(f"%p{i}: tile<ptr<{ty}>>, " + ", ".join(f"%n{i}_{d}: tile<i32>" for d in range(ndim))
                           + ", " + ", ".join(f"%s{i}_{d}: tile<i32>" for d in range(ndim)))
        tv = f"tensor_view<{'?x' * ndim}{ty}, strides=[{','.join('?' * ndim)}]>"
        pad = f"padding_value = {padding}, " if padding else ""
        pv = f"partition_view<tile=({'x'.join(map(str, tile))}), {pad}{tv}>"
        self.lines.append(f"%tv{i} = make_tensor_view %p{i}, shape = [{shape}], strides = [{strides}] "
                          f": tile<i32> -> {tv}")
        self.lines.append(f"%pv{i} = make_partition_view %tv{i} : {pv}")
        return f"%pv{i}", pv

    def index(self, ndim: int) -> str:
        """Block (bx, by) loads and stores tile (bx, by) of its arrays."""
        return ", ".join(["%bx", "%by", "%bz"][:ndim])

    def load(self, ty: str, ndim: int, padding: Optional[str] = None) -> str:
        pv, vt = self.view(ty, ndim, self.tile, padding)
        x = self.fresh("x")
        self.lines.append(f"{x}, {self.fresh('tk')} = load_view_tko weak {pv}[{self.index(ndim)}] : {vt}, "
                          f"tile<i32> -> {self.t(ty)}, token")
        return x

    def store(self, value: str, ty: str, ndim: int, tile: Optional[tuple[int, ...]] = None) -> None:
        tile = self.tile if tile is None else tile
        pv, vt = self.view(ty, ndim, tile, None)
        self.lines.append(f"{self.fresh('st')} = store_view_tko weak {value}, {pv}[{self.index(ndim)}] : "
                          f"{self.t(ty, tile)}, {vt}, tile<i32> -> token")

    def text(self) -> str:
        body = ["%bx, %by, %bz = get_tile_block_id : tile<i32>"] + self.lines + ["return"]
        return "entry @k(" + ", ".join(self.params) + ") {\n  " + "\n  ".join(body) + "\n}\n"


# -- input data -----------------------------------------------------------------------------------
def _int_values(rng: np.random.Generator, ty: str, n: int) -> np.ndarray:
    bits = BITS[ty]
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    edges = np.array([lo, hi, -1, 0, 1, 2, -2, bits - 1, bits, lo + 1], np.int64)
    raw = rng.integers(0, 1 << 64, n, dtype=np.uint64).view(np.int64).astype(DTYPE[ty])   # any bit pattern
    small = rng.integers(-9, 10, n).astype(DTYPE[ty])
    pick = rng.integers(0, 3, n)
    out = np.where(pick == 0, raw, small)
    return np.where(pick == 2, edges[rng.integers(0, len(edges), n)].astype(DTYPE[ty]), out).astype(DTYPE[ty])


def _float_values(rng: np.random.Generator, ty: str, n: int) -> np.ndarray:
    dt = DTYPE[ty]
    info = md.finfo(dt) if ty == "bf16" else np.finfo(dt)
    edges = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, float(info.max), float(-info.max),
                      float(info.smallest_subnormal), float(info.tiny), 2.0, 3.0], np.float64).astype(dt)
    normal = (rng.standard_normal(n) * 4).astype(dt)
    small = rng.integers(-8, 9, n).astype(dt)
    bits = rng.integers(0, 1 << BITS[ty], n, dtype=np.uint64).astype(UINT[BITS[ty]]).view(dt)
    pick = rng.integers(0, 8, n)
    out = np.where(pick < 3, normal, small)
    out = np.where(pick == 6, edges[rng.integers(0, len(edges), n)], out)
    return np.where(pick == 7, bits, out).astype(dt)


def values(rng: np.random.Generator, ty: str, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    flat = _int_values(rng, ty, n) if ty in INTS else _float_values(rng, ty, n)
    return flat.reshape(shape)


# -- the shape of a program ---------------------------------------------------------------------
def _layout(draw: Callable, rank: int, max_tile: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(tile, array shape, grid): ragged array edges so loads pad and stores mask."""
    pow2 = [1 << k for k in range(max_tile.bit_length())]
    tile = tuple(draw(st.sampled_from(pow2 if rank == 1 else pow2[1:5])) for _ in range(rank))
    grid = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    shape = tuple(draw(st.integers((g - 1) * t + 1, g * t)) for g, t in zip(grid, tile))
    return tile, shape, grid


def _orders(draw: Callable, arrays: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Some 2-D arrays in column-major order: the kernels then see strides (1, rows)."""
    return tuple(np.asfortranarray(a) if a.ndim == 2 and draw(st.booleans()) else a for a in arrays)


# -- elementwise DAGs ----------------------------------------------------------------------------
class _Dag:
    def __init__(self, draw: Callable, k: KernelText) -> None:
        self.draw, self.k = draw, k
        self.values: list[Value] = []
        self.results: list[Value] = []       # math results: stored, never reused

    def pick(self, kinds: tuple[str, ...]) -> Value:
        """An operand whose type is one of `kinds`; converts one when there is none."""
        ok = [v for v in self.values if v.ty in kinds]
        if ok:
            return self.draw(st.sampled_from(ok))
        return self.convert(self.draw(st.sampled_from(self.values)), self.draw(st.sampled_from(kinds)))

    def add(self, name: str, ty: str, ulps: int = 0) -> Value:
        v = Value(name, ty, ulps)
        (self.results if ulps else self.values).append(v)
        return v

    def convert(self, v: Value, to: str) -> Value:
        k, draw = self.k, self.draw
        a, b = k.t(v.ty), k.t(to)
        if v.ty == to:
            return v
        if v.ty in INTS and to in INTS:
            if BITS[to] > BITS[v.ty]:
                sign = draw(st.sampled_from(["signed", "unsigned"]))
                return self.add(k.op(f"exti {v.name} {sign} : {a} -> {b}"), to)
            return self.add(k.op(f"trunci {v.name} : {a} -> {b}"), to)
        if BITS[v.ty] == BITS[to] and draw(st.booleans()):
            return self.add(k.op(f"bitcast {v.name} : {a} -> {b}"), to)
        if v.ty in INTS:
            sign = draw(st.sampled_from(["signed", "unsigned"]))       # itof: nearest_even only
            return self.add(k.op(f"itof {v.name} {sign} : {a} -> {b}"), to)
        if to in INTS:
            sign = draw(st.sampled_from(["signed", "unsigned"]))
            return self.add(k.op(f"ftoi {v.name} {sign} : {a} -> {b}"), to)
        rnd = draw(st.sampled_from(ROUNDINGS)) if BITS[to] < BITS[v.ty] else ""
        return self.add(k.op(f"ftof {v.name}{rnd} : {a} -> {b}"), to)

    def const(self, ty: str, value: int) -> str:
        return self.k.op(f"constant <{ty}: {value}> : {self.k.t(ty)}")

    def int_op(self) -> None:
        k, draw = self.k, self.draw
        x = self.pick(INTS)
        t = k.t(x.ty)
        family = draw(st.sampled_from(["binary", "cmp", "unary", "binary", "binary"]))
        if family == "unary":
            self.add(k.op(f"{draw(st.sampled_from(['absi', 'negi']))} {x.name} : {t}"), x.ty)
            return
        y = self.pick((x.ty,))
        if family == "cmp":
            pred = draw(st.sampled_from(PREDICATES))
            sign = draw(st.sampled_from(["signed", "unsigned"]))
            c = k.op(f"cmpi {pred} {x.name}, {y.name}, {sign} : {t} -> {k.t('i1')}")
            self.select(c)
            return
        name = draw(st.sampled_from(INT_BINARY))
        mnemonic, _, attrs = name.partition(" ")
        divisor = y.name
        if mnemonic in ("divi", "remi"):
            # 0 and -1 divisors are undefined (division by zero, INT_MIN / -1): make them 3
            one, two, three = self.const(x.ty, 1), self.const(x.ty, 2), self.const(x.ty, 3)
            up = k.op(f"addi {y.name}, {one} : {t}")
            bad = k.op(f"cmpi less_than {up}, {two}, unsigned : {t} -> {k.t('i1')}")
            divisor = k.op(f"select {bad}, {three}, {y.name} : {k.t('i1')}, {t}")
        sep = " " if attrs else ""
        self.add(k.op(f"{mnemonic} {x.name}, {divisor}{sep}{attrs} : {t}"), x.ty)

    def select(self, cond: str) -> None:
        x = self.draw(st.sampled_from(self.values))
        y = self.pick((x.ty,))
        self.add(self.k.op(f"select {cond}, {x.name}, {y.name} : {self.k.t('i1')}, {self.k.t(x.ty)}"), x.ty)

    def float_op(self) -> None:
        k, draw = self.k, self.draw
        x = self.pick(FLOATS)
        t = k.t(x.ty)
        full = x.ty in ("f32", "f64")           # directed rounding: f32/f64 only
        ftz = " flush_to_zero" if x.ty == "f32" and draw(st.booleans()) else ""   # f32 only
        family = draw(st.sampled_from(["math", "binary", "cmp", "unary", "fma", "binary"]))
        if family == "unary":
            name = draw(st.sampled_from(FLOAT_UNARY))
            rnd = draw(st.sampled_from(ROUNDINGS)) + ftz if name == "sqrt" and full else ""
            self.add(k.op(f"{name} {x.name}{rnd} : {t}"), x.ty)
            return
        if family == "math":
            name = draw(st.sampled_from(UNARY_MATH + ("pow", "atan2")))
            ulps = 1 if not full else MATH_ULPS[name][x.ty == "f64"]
            if name in ("pow", "atan2"):
                y = self.pick((x.ty,))
                self.add(k.op(f"{name} {x.name}, {y.name} : {t}"), x.ty, ulps)
            else:
                self.add(k.op(f"{name} {x.name} : {t}"), x.ty, ulps)
            return
        y = self.pick((x.ty,))
        if family == "cmp":
            pred = draw(st.sampled_from(PREDICATES))
            order = draw(st.sampled_from(["ordered", "unordered"]))
            self.select(k.op(f"cmpf {pred} {order} {x.name}, {y.name} : {t} -> {k.t('i1')}"))
            return
        rnd = draw(st.sampled_from(ROUNDINGS)) if full else ""
        if family == "fma":
            z = self.pick((x.ty,))
            self.add(k.op(f"fma {x.name}, {y.name}, {z.name}{rnd}{ftz} : {t}"), x.ty)
            return
        name = draw(st.sampled_from(FLOAT_BINARY))
        mnemonic, _, attrs = name.partition(" ")
        if mnemonic in ("maxf", "minf"):
            rnd = f" {attrs}" if attrs else ""
        if mnemonic == "remf":
            rnd = ftz = ""
        self.add(k.op(f"{mnemonic} {x.name}, {y.name}{rnd}{ftz} : {t}"), x.ty)


@st.composite
def elementwise_programs(draw: Callable) -> Program:
    rank = draw(st.sampled_from([1, 2]))
    tile, shape, grid = _layout(draw, rank, 64 if rank == 1 else 16)
    k = KernelText(tile)
    dag = _Dag(draw, k)
    in_types = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=3))
    for ty in in_types:
        dag.add(k.load(ty, rank), ty)
    for _ in range(draw(st.integers(2, 10))):
        dag.int_op() if draw(st.booleans()) else dag.float_op()
    loaded = len(in_types)
    computed = dag.values[loaded:] or dag.values
    stored = dag.results + [computed[-1]] + draw(st.lists(st.sampled_from(computed), max_size=2, unique_by=id))
    for v in stored:
        k.store(v.name, v.ty, rank)
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    arrays = [values(rng, ty, shape) for ty in in_types] + [values(rng, v.ty, shape) for v in stored]
    return Program(k.text(), grid, _orders(draw, arrays), tuple(v.ulps for v in stored))


# -- reductions and scans -------------------------------------------------------------------------
def _bits_of(ty: str, value: float) -> str:
    """A float constant as the hex of its bits (how the text form spells inf, nan, -0)."""
    raw = np.array([value], np.float64).astype(DTYPE[ty]).view(UINT[BITS[ty]])[0]
    return f"0x{int(raw):0{BITS[ty] // 4}X}"


# body -> identity (a true identity, so the tree order of compiled code cannot matter)
INT_BODIES: dict[str, Callable[[int], int]] = {
    "addi": lambda b: 0, "muli": lambda b: 1, "andi": lambda b: -1, "ori": lambda b: 0, "xori": lambda b: 0,
    "maxi signed": lambda b: -(1 << (b - 1)), "mini signed": lambda b: (1 << (b - 1)) - 1,
    "maxi unsigned": lambda b: 0, "mini unsigned": lambda b: -1,
}
FLOAT_BODIES: dict[str, float] = {
    "addf": -0.0, "mulf": 1.0, "maxf": -np.inf, "minf": np.inf,
    "maxf propagate_nan": -np.inf, "minf propagate_nan": np.inf,
}
PADDINGS = (None, "zero", "neg_zero", "nan", "pos_inf", "neg_inf")


def _reduction_values(rng: np.random.Generator, ty: str, body: str, shape: tuple[int, ...]) -> np.ndarray:
    """Values on which the float body is exact in any order (ints wrap: always exact)."""
    if ty in INTS:
        return values(rng, ty, shape)
    # argmax: no NaN (it is unordered); -0 == +0 ties are fine, the smaller index wins
    specials = np.array([np.inf, -np.inf, 0.0, -0.0] + ([] if body == "argmax" else [np.nan]), np.float64)
    if body == "addf":
        base = rng.integers(-3, 4, shape).astype(np.float64)      # sums stay exact even in bf16
    elif body == "mulf":
        base = rng.choice(np.array([1.0, -1.0]), shape)
    else:
        with np.errstate(invalid="ignore"):
            base = _float_values(rng, ty, int(np.prod(shape))).reshape(shape).astype(np.float64)
        if body == "argmax":
            base = np.where(np.isnan(base), 1.0, base)
    rare = rng.random(shape) < 0.05
    return np.where(rare, specials[rng.integers(0, len(specials), shape)], base).astype(DTYPE[ty])


def _argmax_body(k: KernelText, ty: str) -> list[str]:
    """(value, index) pairs: the larger value wins, a tie goes to the smaller index. A total order,
    so any combining order gives the same pair (values must not be NaN)."""
    s, i, b = k.t(ty, ()), k.t("i32", ()), k.t("i1", ())
    cmp = (lambda p: f"cmpi {p} %v, %va, signed : {s} -> {b}") if ty in INTS else \
        (lambda p: f"cmpf {p} ordered %v, %va : {s} -> {b}")
    return [f"(%v: {s}, %va: {s}, %j: {i}, %ja: {i}) {{",
            f"  %gt = {cmp('greater_than')}", f"  %eq = {cmp('equal')}",
            f"  %lt = cmpi less_than %j, %ja, signed : {i} -> {b}",
            f"  %tie = andi %eq, %lt : {b}", f"  %take = ori %gt, %tie : {b}",
            f"  %m = select %take, %v, %va : {b}, {s}", f"  %n = select %take, %j, %ja : {b}, {i}",
            f"  yield %m, %n : {s}, {i}", "}"]


def _indices(k: KernelText, axis: int) -> str:
    """The position of every element along `axis`, as an i32 tile of the kernel's shape."""
    n = k.tile[axis]
    io = k.op(f"iota : {k.t('i32', (n,))}")
    if len(k.tile) == 1:
        return io
    col = (n, 1) if axis == 0 else (1, n)
    shaped = k.op(f"reshape {io} : {k.t('i32', (n,))} -> {k.t('i32', col)}")
    return k.op(f"broadcast {shaped} : {k.t('i32', col)} -> {k.t('i32')}")


@st.composite
def reduction_programs(draw: Callable) -> Program:
    rank = draw(st.sampled_from([1, 2]))
    tile, shape, grid = _layout(draw, rank, 64 if rank == 1 else 16)
    ty = draw(st.sampled_from(TYPES))
    kind = draw(st.sampled_from(["reduce", "scan", "argmax"]))
    body = "argmax" if kind == "argmax" else \
        draw(st.sampled_from(sorted(INT_BODIES) if ty in INTS else sorted(FLOAT_BODIES)))
    if kind == "argmax":
        low = -(1 << (BITS[ty] - 1)) if ty in INTS else -np.inf
        ident = str(low) if ty in INTS else _bits_of(ty, low)
    else:
        ident = str(INT_BODIES[body](BITS[ty])) if ty in INTS else _bits_of(ty, FLOAT_BODIES[body])
    padding = draw(st.sampled_from(PADDINGS if ty in FLOATS and kind != "argmax" else (None, "zero")))
    axis = draw(st.integers(0, rank - 1))
    k = KernelText(tile)
    x = k.load(ty, rank, padding)
    s = k.t(ty, ())
    kept = tuple(n for d, n in enumerate(tile) if d != axis)
    out_tile = tile if kind == "scan" else tuple(1 if d == axis else n for d, n in enumerate(tile))
    r = k.fresh("r")
    if kind == "argmax":
        j = _indices(k, axis)
        idx = k.fresh("r")
        k.lines.append(f"{r}, {idx} = reduce {x}, {j} dim={axis} identities=[{ident} : {ty}, 2147483647 : i32] "
                       f": {k.t(ty)}, {k.t('i32')} -> {k.t(ty, kept)}, {k.t('i32', kept)}")
        k.lines += _argmax_body(k, ty)
    else:
        if kind == "scan":
            reverse = "true" if draw(st.booleans()) else "false"
            head = f"scan {x} dim={axis} reverse={reverse} identities=[{ident} : {ty}] : {k.t(ty)} -> {k.t(ty)}"
        else:
            head = f"reduce {x} dim={axis} identities=[{ident} : {ty}] : {k.t(ty)} -> {k.t(ty, kept)}"
        mnemonic, _, attrs = body.partition(" ")
        a, b, c = k.fresh("a"), k.fresh("b"), k.fresh("c")
        k.lines += [f"{r} = {head}", f"({a}: {s}, {b}: {s}) {{",
                    f"  {c} = {mnemonic} {a}, {b}{' ' + attrs if attrs else ''} : {s}",
                    f"  yield {c} : {s}", "}"]
    results = [(r, ty)] + ([(idx, "i32")] if kind == "argmax" else [])
    out_shape = shape if kind == "scan" else tuple(g if d == axis else n for d, (g, n) in enumerate(zip(grid, shape)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    arrays = [_reduction_values(rng, ty, body, shape)]
    for value, vty in results:
        if kind != "scan":
            value = k.op(f"reshape {value} : {k.t(vty, kept)} -> {k.t(vty, out_tile)}")
        k.store(value, vty, rank, out_tile)
        arrays.append(values(rng, vty, out_shape))
    return Program(k.text(), grid, _orders(draw, arrays), (0,) * len(results))


# -- running and comparing ----------------------------------------------------------------------
def run(program: Program, backend: str, gpu: Optional[str] = None) -> list[np.ndarray]:
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    module = load_module(program.text.encode(), "random.mlir")
    out = run_arrays(module, "k", program.grid, [a.copy(order="K") for a in program.arrays], backend=backend,
                     gpu_name=gpu, stdout=io.StringIO())
    return [np.asarray(a) for a in out[program.n_inputs:]]


def _ordered(a: np.ndarray) -> np.ndarray:
    """Float bits as integers in value order (-0 just below +0), so ulp distance is a difference."""
    bits = a.dtype.itemsize * 8
    u = a.view(UINT[bits]).astype(np.uint64)
    sign = np.uint64(1 << (bits - 1))
    mag = (u & ~sign).astype(np.int64)
    return np.where(u & sign, -mag - 1, mag)


def differences(program: Program, got: list[np.ndarray], want: list[np.ndarray]) -> list[str]:
    with np.errstate(invalid="ignore"):                     # NaN through float64 casts
        return _differences(program, got, want)


def _differences(program: Program, got: list[np.ndarray], want: list[np.ndarray]) -> list[str]:
    problems = []
    for i, (g, w, ulps) in enumerate(zip(got, want, program.ulps)):
        if w.dtype.kind in "iu":
            bad = g != w
        else:
            nan_g, nan_w = np.isnan(g.astype(np.float64)), np.isnan(w.astype(np.float64))
            dist = np.abs(_ordered(g) - _ordered(w))
            bad = (nan_g != nan_w) | (~nan_w & (dist > ulps))
        if bad.any():
            where = tuple(int(j) for j in np.argwhere(bad)[0])
            problems.append(f"output {i}: {int(bad.sum())} of {bad.size} elements differ (allowed {ulps} ulp); "
                            f"first at {where}: emulator {g[where]!r}, interpreter {w[where]!r}")
    return problems


def check(program: Program, gpu: str) -> list[str]:
    with np.errstate(all="ignore"):
        want = run(program, "interpreter")
    return differences(program, run(program, "emulator", gpu), want)
