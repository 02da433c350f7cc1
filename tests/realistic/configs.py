"""The realistic configurations: one row per exported module.

Every configuration names a kernel of ``kernels.py``, its parameters in the kernel's order
(arrays with the shapes of a real launch, runtime scalars with their values, compile-time
constants) and the launch grid. ``generate.py`` specializes the arrays the way cuTile's launcher
specializes real tensors (C-contiguous, 16-byte aligned base, divisibility facts of the actual
shape and strides) and writes the launch recipe into ``manifest.json`` for the benchmarks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

TARGETS: tuple[str, ...] = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
BYTECODE_VERSION = "13.4"

# bytes per element of each array dtype (cuTile names)
ITEMSIZE: dict[str, int] = {
    "float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "int32": 4, "float8_e4m3fn": 1,
}
# short names used in configuration names
SHORT: dict[str, str] = {
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "int8": "i8", "int32": "i32",
    "float8_e4m3fn": "e4m3",
}


@dataclass(frozen=True)
class Arr:
    name: str
    dtype: str
    shape: tuple[int, ...]
    output: bool = False

    @property
    def strides(self) -> tuple[int, ...]:
        out, step = [], 1
        for n in reversed(self.shape):
            out.append(step)
            step *= n
        return tuple(reversed(out))

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * ITEMSIZE[self.dtype]


@dataclass(frozen=True)
class Scalar:
    name: str
    dtype: str
    value: float | int


@dataclass(frozen=True)
class Const:
    name: str
    value: int | bool


Param = Arr | Scalar | Const


@dataclass(frozen=True)
class Config:
    name: str
    family: str
    kernel: str                        # function name in kernels.py
    params: tuple[Param, ...]          # in the kernel's parameter order
    grid: tuple[int, int, int]
    flops: int = 0                     # useful floating-point (or integer) operations
    tiles: dict[str, int] = field(default_factory=dict)
    targets: tuple[str, ...] = TARGETS
    sample: bool = False               # in the fast default test sample

    @property
    def arrays(self) -> list[Arr]:
        return [p for p in self.params if isinstance(p, Arr)]

    @property
    def bytes_moved(self) -> int:
        """Compulsory DRAM traffic: every input read once, every output written once."""
        return sum(a.nbytes for a in self.arrays)

    def to_json(self) -> dict[str, Any]:
        params = []
        for p in self.params:
            if isinstance(p, Arr):
                params.append({"kind": "array", "name": p.name, "dtype": p.dtype,
                               "shape": list(p.shape), "strides": list(p.strides),
                               "output": p.output})
            elif isinstance(p, Scalar):
                params.append({"kind": "scalar", "name": p.name, "dtype": p.dtype, "value": p.value})
            else:
                params.append({"kind": "constant", "name": p.name, "value": p.value})
        return {"name": self.name, "family": self.family, "kernel": self.kernel,
                "symbol": self.name, "file": f"bytecode/{self.name}.tileirbc",
                "tiles": dict(self.tiles), "dtypes": sorted({a.dtype for a in self.arrays}),
                "params": params, "grid": list(self.grid), "flops": self.flops,
                "bytes": self.bytes_moved, "targets": list(self.targets), "sample": self.sample}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------- families

# matmul input dtype -> (output dtype, tf32 rounding, first target with the tensor-core type)
_MM_TYPES: dict[str, tuple[str, bool, str]] = {
    "float16": ("float16", False, "sm_80"),
    "bfloat16": ("bfloat16", False, "sm_80"),
    "tf32": ("float32", True, "sm_80"),
    "int8": ("int32", False, "sm_80"),
    "float8_e4m3fn": ("float16", False, "sm_89"),
}
_MM_TILES: tuple[tuple[int, int, int], ...] = (
    (64, 64, 32), (128, 128, 32), (128, 128, 64), (128, 256, 64), (256, 128, 64))
_MM_SAMPLE = {("float16", (128, 128, 64)), ("float16", (64, 64, 32)), ("tf32", (128, 128, 32)),
              ("int8", (128, 256, 64))}


def _targets_from(first: str) -> tuple[str, ...]:
    return tuple(t for t in TARGETS if int(t[3:]) >= int(first[3:]))


def matmuls(size: int = 4096) -> list[Config]:
    out = []
    for ti, (to, tf32, first) in _MM_TYPES.items():
        dt = "float32" if tf32 else ti
        short = "tf32" if tf32 else SHORT[ti]
        for tm, tn, tk in _MM_TILES:
            m = n = k = size
            grid = (_cdiv(m, tm) * _cdiv(n, tn), 1, 1)
            out.append(Config(
                f"mm_{short}_{tm}x{tn}x{tk}", "matmul", "matmul",
                (Arr("a", dt, (m, k)), Arr("b", dt, (k, n)), Arr("c", to, (m, n), True),
                 Const("TM", tm), Const("TN", tn), Const("TK", tk), Const("GROUP", 8),
                 Const("TF32", tf32)),
                grid, flops=2 * m * n * k, tiles={"TM": tm, "TN": tn, "TK": tk},
                targets=_targets_from(first), sample=(ti, (tm, tn, tk)) in _MM_SAMPLE))
    return out


def bmms() -> list[Config]:
    out = []
    for dt, (tm, tn, tk), sample in (("float16", (128, 128, 64), True),
                                     ("float16", (64, 64, 32), False),
                                     ("bfloat16", (128, 128, 32), False)):
        z, m, n, k = 16, 1024, 1024, 1024
        out.append(Config(
            f"bmm_{SHORT[dt]}_{tm}x{tn}x{tk}", "bmm", "bmm",
            (Arr("a", dt, (z, m, k)), Arr("b", dt, (z, k, n)), Arr("c", dt, (z, m, n), True),
             Const("TM", tm), Const("TN", tn), Const("TK", tk)),
            (m // tm, n // tn, z), flops=2 * z * m * n * k, tiles={"TM": tm, "TN": tn, "TK": tk},
            sample=sample))
    return out


def splitk() -> list[Config]:
    m = n = 1024
    k, split, tm, tn, tk = 16384, 4, 128, 128, 64
    return [Config(
        f"splitk_f16_{tm}x{tn}x{tk}_s{split}", "splitk", "splitk_matmul",
        (Arr("a", "float16", (m, k)), Arr("b", "float16", (k, n)),
         Arr("partial", "float32", (split, m, n), True),
         Const("TM", tm), Const("TN", tn), Const("TK", tk), Const("SPLIT", split)),
        (m // tm, n // tn, split), flops=2 * m * n * k, tiles={"TM": tm, "TN": tn, "TK": tk})]


def attentions() -> list[Config]:
    out = []
    bh, seq = 32, 4096
    for dt in ("float16", "bfloat16"):
        for bq, bk in ((64, 64), (128, 64), (128, 128)):
            for d in (64, 128):
                for causal in (False, True):
                    if dt == "bfloat16" and (bq, bk, d) != (128, 64, 128):
                        continue
                    flops = 4 * bh * seq * seq * d // (2 if causal else 1)
                    name = f"fa_{SHORT[dt]}_q{bq}k{bk}d{d}" + ("_causal" if causal else "")
                    out.append(Config(
                        name, "attention", "attention_fwd",
                        (Arr("q", dt, (bh, seq, d)), Arr("k", dt, (bh, seq, d)),
                         Arr("v", dt, (bh, seq, d)), Arr("o", dt, (bh, seq, d), True),
                         Scalar("qk_scale", "float32", 1.0 / math.sqrt(d)),
                         Const("BQ", bq), Const("BK", bk), Const("D", d), Const("CAUSAL", causal)),
                        (seq // bq, bh, 1), flops=flops, tiles={"BQ": bq, "BK": bk, "D": d},
                        sample=dt == "float16" and (bq, bk, d, causal) in
                        {(128, 64, 64, False), (64, 64, 128, True)}))
    return out


def norms() -> list[Config]:
    out = []
    rows = 4096
    for n, dt, sample in ((1024, "float16", False), (4096, "float16", True),
                          (16384, "float16", False), (4096, "bfloat16", False)):
        out.append(Config(
            f"layernorm_{SHORT[dt]}_n{n}", "layernorm", "layernorm",
            (Arr("x", dt, (rows, n)), Arr("w", dt, (n,)), Arr("b", dt, (n,)),
             Arr("y", dt, (rows, n), True), Scalar("eps", "float32", 1e-5), Const("N", n)),
            (rows, 1, 1), flops=8 * rows * n, tiles={"N": n}, sample=sample))
    for n, tn in ((8192, 2048), (16384, 1024)):
        out.append(Config(
            f"layernorm_chunked_f16_n{n}_t{tn}", "layernorm", "layernorm_chunked",
            (Arr("x", "float16", (rows, n)), Arr("w", "float16", (n,)), Arr("b", "float16", (n,)),
             Arr("y", "float16", (rows, n), True), Scalar("eps", "float32", 1e-5),
             Const("N", n), Const("TN", tn)),
            (rows, 1, 1), flops=8 * rows * n, tiles={"N": n, "TN": tn}))
    for n, dt, sample in ((1024, "bfloat16", False), (4096, "bfloat16", True),
                          (8192, "float16", False), (16384, "bfloat16", False)):
        out.append(Config(
            f"rmsnorm_{SHORT[dt]}_n{n}", "rmsnorm", "rmsnorm",
            (Arr("x", dt, (rows, n)), Arr("w", dt, (n,)), Arr("y", dt, (rows, n), True),
             Scalar("eps", "float32", 1e-6), Const("N", n)),
            (rows, 1, 1), flops=4 * rows * n, tiles={"N": n}, sample=sample))
    return out


def softmaxes() -> list[Config]:
    out = []
    rows = 4096
    for n, tm, dt, sample in ((1024, 4, "float16", False), (4096, 1, "float16", True),
                              (4096, 1, "float32", False), (16384, 1, "float16", False)):
        out.append(Config(
            f"softmax_{SHORT[dt]}_n{n}_r{tm}", "softmax", "softmax",
            (Arr("x", dt, (rows, n)), Arr("y", dt, (rows, n), True), Const("TM", tm), Const("N", n)),
            (rows // tm, 1, 1), flops=4 * rows * n, tiles={"TM": tm, "N": n}, sample=sample))
    return out


def reductions() -> list[Config]:
    m, n = 8192, 8192
    return [
        Config("row_sum_f32_16x512", "reduction", "row_sum",
               (Arr("x", "float32", (m, n)), Arr("y", "float32", (m,), True),
                Const("TM", 16), Const("TN", 512)),
               (m // 16, 1, 1), flops=m * n, tiles={"TM": 16, "TN": 512}, sample=True),
        Config("row_max_f16_32x256", "reduction", "row_max",
               (Arr("x", "float16", (m, n)), Arr("y", "float16", (m,), True),
                Const("TM", 32), Const("TN", 256)),
               (m // 32, 1, 1), flops=m * n, tiles={"TM": 32, "TN": 256}),
    ]


def elementwise() -> list[Config]:
    n = 1 << 24
    out = []
    for dt, t, sample in (("float32", 1024, True), ("float16", 2048, False)):
        out.append(Config(
            f"vector_add_{SHORT[dt]}_{t}", "elementwise", "vector_add",
            (Arr("a", dt, (n,)), Arr("b", dt, (n,)), Arr("c", dt, (n,), True), Const("T", t)),
            (n // t, 1, 1), flops=n, tiles={"T": t}, sample=sample))
    m = 8192
    for dt, tm, tn, sample in (("float32", 32, 32, False), ("float32", 64, 64, True),
                               ("float16", 64, 128, False)):
        out.append(Config(
            f"transpose_{SHORT[dt]}_{tm}x{tn}", "transpose", "transpose",
            (Arr("x", dt, (m, m)), Arr("y", dt, (m, m), True), Const("TM", tm), Const("TN", tn)),
            (m // tm, m // tn, 1), tiles={"TM": tm, "TN": tn}, sample=sample))
    seq, heads, d, ts = 4096, 32, 128, 4
    out.append(Config(
        f"rope_bf16_s{ts}h{heads}d{d}", "rope", "rope",
        (Arr("x", "bfloat16", (seq, heads, d)), Arr("cos", "bfloat16", (seq, d // 2)),
         Arr("sin", "bfloat16", (seq, d // 2)), Arr("y", "bfloat16", (seq, heads, d), True),
         Const("TS", ts), Const("H", heads), Const("D", d)),
        (seq // ts, 1, 1), flops=6 * seq * heads * d // 2, tiles={"TS": ts, "H": heads, "D": d},
        sample=True))
    rows, hidden, tm, tn = 4096, 14336, 4, 1024
    out.append(Config(
        f"swiglu_bf16_{tm}x{tn}", "swiglu", "swiglu",
        (Arr("gate", "bfloat16", (rows, hidden)), Arr("up", "bfloat16", (rows, hidden)),
         Arr("out", "bfloat16", (rows, hidden), True), Const("TM", tm), Const("TN", tn)),
        (rows // tm, hidden // tn, 1), flops=5 * rows * hidden, tiles={"TM": tm, "TN": tn}))
    return out


def all_configs() -> list[Config]:
    configs = [*matmuls(), *bmms(), *splitk(), *attentions(), *norms(), *softmaxes(),
               *reductions(), *elementwise()]
    names = [c.name for c in configs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"configuration names defined twice: {sorted(dup)}")
    return configs


# --------------------------------------------------------------------------- small launches
# The same kernels (the same bytecode: tile sizes and constants unchanged) at array shapes the
# Python PTX emulator runs in seconds, for the emulator-against-interpreter check. The bytecode
# also specializes the arrays (generate.array_constraint): a dimension divisible by 16 where the
# real one is, a row stride divisible by 16 bytes where the real one is, contiguity. So every
# small dimension stays a multiple of 16 where the real one is one (the batch*heads of attention
# stays 16, norm rows 16, ...), dimensions the bytecode fixes as constants (row length N, head
# dimension D, heads H) keep their value, and the grid follows the builder's rule; where a
# multiple of 16 gives more blocks along a dimension than the check needs, the launch covers
# the first LAUNCH_CAP blocks along it (the rest of the output keeps its initial contents).
LAUNCH_CAP = 2


def _const(config: Config, name: str) -> int:
    return next(int(p.value) for p in config.params if isinstance(p, Const) and p.name == name)


def _with_shapes(config: Config, shapes: dict[str, tuple[int, ...]],
                 grid: tuple[int, int, int]) -> Config:
    from dataclasses import replace

    missing = {a.name for a in config.arrays} - set(shapes)
    if missing:
        raise ValueError(f"{config.name}: no small shape for arrays {sorted(missing)}")
    params = tuple(replace(p, shape=shapes[p.name]) if isinstance(p, Arr) else p
                   for p in config.params)
    return replace(config, params=params, grid=grid, flops=0)


def _cap(blocks: int) -> int:
    return min(blocks, LAUNCH_CAP)


def _small_matmul(c: Config) -> Config:          # 2x2 output tiles, K = 2 tile steps
    tm, tn, tk = _const(c, "TM"), _const(c, "TN"), _const(c, "TK")
    m, n, k = 2 * tm, 2 * tn, 2 * tk
    return _with_shapes(c, {"a": (m, k), "b": (k, n), "c": (m, n)},
                        (_cdiv(m, tm) * _cdiv(n, tn), 1, 1))


def _small_bmm(c: Config) -> Config:             # batch stays 16 (16-divisible), 2 of it run
    tm, tn, tk, z = _const(c, "TM"), _const(c, "TN"), _const(c, "TK"), 16
    m, n, k = 2 * tm, 2 * tn, 2 * tk
    return _with_shapes(c, {"a": (z, m, k), "b": (z, k, n), "c": (z, m, n)},
                        (m // tm, n // tn, _cap(z)))


def _small_splitk(c: Config) -> Config:          # every split gets 2 K steps
    tm, tn, tk, split = _const(c, "TM"), _const(c, "TN"), _const(c, "TK"), _const(c, "SPLIT")
    m, n, k = 2 * tm, 2 * tn, 2 * split * tk
    return _with_shapes(c, {"a": (m, k), "b": (k, n), "partial": (split, m, n)},
                        (m // tm, n // tn, split))


def _small_attention(c: Config) -> Config:       # 1-2 query blocks, 2 key blocks
    bq, bk, d, bh = _const(c, "BQ"), _const(c, "BK"), _const(c, "D"), 16
    seq = max(bq, 2 * bk)
    shape = (bh, seq, d)
    return _with_shapes(c, {"q": shape, "k": shape, "v": shape, "o": shape},
                        (seq // bq, _cap(bh), 1))


def _small_rows(c: Config) -> Config:            # 16 rows at the full row length, 2 blocks run
    rows, n = 16, _const(c, "N")
    tm = next((int(p.value) for p in c.params if isinstance(p, Const) and p.name == "TM"), 1)
    shapes = {a.name: (rows, n) if len(a.shape) == 2 else a.shape for a in c.arrays}
    return _with_shapes(c, shapes, (_cap(rows // tm), 1, 1))


def _small_reduction(c: Config) -> Config:       # 2 row blocks of 2 column chunks
    tm, tn = _const(c, "TM"), _const(c, "TN")
    m, n = max(16, 2 * tm), 2 * tn
    return _with_shapes(c, {"x": (m, n), "y": (m,)}, (m // tm, 1, 1))


def _small_vector(c: Config) -> Config:
    n = 2 * _const(c, "T")
    return _with_shapes(c, {"a": (n,), "b": (n,), "c": (n,)}, (2, 1, 1))


def _small_transpose(c: Config) -> Config:       # 2x2 tiles of a (not square) matrix
    tm, tn = _const(c, "TM"), _const(c, "TN")
    m, n = 2 * tm, 2 * tn
    return _with_shapes(c, {"x": (m, n), "y": (n, m)}, (m // tm, n // tn, 1))


def _small_rope(c: Config) -> Config:            # 16 positions (16-divisible), 2 blocks run
    ts, h, d, seq = _const(c, "TS"), _const(c, "H"), _const(c, "D"), 16
    return _with_shapes(c, {"x": (seq, h, d), "cos": (seq, d // 2), "sin": (seq, d // 2),
                            "y": (seq, h, d)}, (_cap(seq // ts), 1, 1))


def _small_swiglu(c: Config) -> Config:          # 16 rows, 2 column tiles
    tm, tn, rows = _const(c, "TM"), _const(c, "TN"), 16
    shape = (rows, 2 * tn)
    return _with_shapes(c, {"gate": shape, "up": shape, "out": shape}, (_cap(rows // tm), 2, 1))


# kernel (function in kernels.py) -> its small-launch recipe
_SMALL: dict[str, Any] = {
    "matmul": _small_matmul, "bmm": _small_bmm, "splitk_matmul": _small_splitk,
    "attention_fwd": _small_attention, "layernorm": _small_rows,
    "layernorm_chunked": _small_rows, "rmsnorm": _small_rows, "softmax": _small_rows,
    "row_sum": _small_reduction, "row_max": _small_reduction, "vector_add": _small_vector,
    "transpose": _small_transpose, "rope": _small_rope, "swiglu": _small_swiglu,
}


def small(config: Config) -> Config:
    """``config`` at emulator-sized array shapes and grid: same name, bytecode and constants."""
    if config.kernel not in _SMALL:
        raise ValueError(f"{config.name}: no small-launch recipe for kernel '{config.kernel}'")
    return _SMALL[config.kernel](config)


# Ragged launches: the same kernels at shapes that stay multiples of 16 (the bytecode's facts)
# but are not multiples of the tile, so the last tile along each such dimension is partial and
# the masked (padded) loads and stores at the boundary run. Only kernels whose result is
# defined there: those loading with a padding mode, or whose out-of-bounds loads only reach
# out-of-bounds stores (elementwise, transpose). Attention, the norms, softmax and RoPE index
# whole rows or sequences without padding and have no ragged launch.
EDGE = 16


def _ragged_matmul(c: Config) -> Config:         # 2x2 output tiles and 2 K steps, the last partial
    tm, tn, tk = _const(c, "TM"), _const(c, "TN"), _const(c, "TK")
    m, n, k = tm + EDGE, tn + EDGE, tk + EDGE
    return _with_shapes(c, {"a": (m, k), "b": (k, n), "c": (m, n)},
                        (_cdiv(m, tm) * _cdiv(n, tn), 1, 1))


def _ragged_bmm(c: Config) -> Config:
    tm, tn, tk, z = _const(c, "TM"), _const(c, "TN"), _const(c, "TK"), 16
    m, n, k = tm + EDGE, tn + EDGE, tk + EDGE
    return _with_shapes(c, {"a": (z, m, k), "b": (z, k, n), "c": (z, m, n)},
                        (_cdiv(m, tm), _cdiv(n, tn), _cap(z)))


def _ragged_splitk(c: Config) -> Config:         # SPLIT + 1 K tiles: split 0 also gets the partial one
    tm, tn, tk, split = _const(c, "TM"), _const(c, "TN"), _const(c, "TK"), _const(c, "SPLIT")
    m, n, k = tm + EDGE, tn + EDGE, split * tk + EDGE
    return _with_shapes(c, {"a": (m, k), "b": (k, n), "partial": (split, m, n)},
                        (_cdiv(m, tm), _cdiv(n, tn), split))


def _ragged_reduction(c: Config) -> Config:
    tm, tn = _const(c, "TM"), _const(c, "TN")
    m, n = tm + EDGE, tn + EDGE
    return _with_shapes(c, {"x": (m, n), "y": (m,)}, (_cdiv(m, tm), 1, 1))


def _ragged_vector(c: Config) -> Config:
    t = _const(c, "T")
    n = t + EDGE
    return _with_shapes(c, {"a": (n,), "b": (n,), "c": (n,)}, (_cdiv(n, t), 1, 1))


def _ragged_transpose(c: Config) -> Config:
    tm, tn = _const(c, "TM"), _const(c, "TN")
    m, n = tm + EDGE, tn + EDGE
    return _with_shapes(c, {"x": (m, n), "y": (n, m)}, (_cdiv(m, tm), _cdiv(n, tn), 1))


def _ragged_swiglu(c: Config) -> Config:         # 16 rows (TM divides them), a partial column tile
    tm, tn, rows = _const(c, "TM"), _const(c, "TN"), 16
    shape = (rows, tn + EDGE)
    return _with_shapes(c, {"gate": shape, "up": shape, "out": shape},
                        (_cap(rows // tm), _cdiv(tn + EDGE, tn), 1))


_RAGGED: dict[str, Any] = {
    "matmul": _ragged_matmul, "bmm": _ragged_bmm, "splitk_matmul": _ragged_splitk,
    "row_sum": _ragged_reduction, "row_max": _ragged_reduction, "vector_add": _ragged_vector,
    "transpose": _ragged_transpose, "swiglu": _ragged_swiglu,
}


def ragged(config: Config) -> Config | None:
    """``config`` at small shapes whose last tiles are partial, or None where the kernel's
    result is not defined for such shapes."""
    recipe = _RAGGED.get(config.kernel)
    return recipe(config) if recipe else None
