"""A Variant bound to its template: the kernel's parameters in order (arrays with the shapes of a
small launch, scalars, compile-time constants), the grid and the kernel hints.

The shapes are real launch shapes scaled down for the emulator: the bytecode depends on them only
through cuTile's specialization facts (dimensions and byte strides divisible by 16, contiguity),
which the ``facts`` axis picks: ``aligned`` (every dimension a multiple of 16), ``ragged`` (the
token / row count and K are not, as real batches are) or ``none`` (no facts at all).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from grammar import Variant

DTYPE: dict[str, str] = {       # the grammar's dtype tokens -> cuTile dtype names
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "tf32": "float32", "e4m3": "float8_e4m3fn",
    "i8": "int8", "i32": "int32", "mxfp8": "float8_e4m3fn", "nvfp4": "float4_e2m1fn",
}
ITEMSIZE: dict[str, float] = {
    "float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "int32": 4, "float8_e4m3fn": 1,
    "float8_e8m0fnu": 1, "float4_e2m1fn": 0.5,
}
EPILOGUES = ("none", "bias", "relu", "gelu", "scale", "residual", "alphabeta", "subtile")   # kernels.EPI_*
SCHEDULES = ("tiles", "persistent", "splitk", "splitr")
SPLIT_K = ("splitk", "splitr")    # split-K: strided K tiles, or contiguous ranges of them
ELTWISE_OPS = ("add", "swiglu", "gelu_bias", "scale_cast")


@dataclass(frozen=True)
class Arr:
    dtype: str                   # cuTile name
    shape: tuple[int, ...]
    output: bool = False         # the kernel writes it (compared after a launch)
    fill: str = "normal"         # how inputs are drawn: normal, ids:<n> (int32 in [0, n)), perm, lse

    @property
    def nbytes(self) -> int:
        return int(math.prod(self.shape) * ITEMSIZE[self.dtype])


@dataclass(frozen=True)
class ArrList:
    arrays: tuple[Arr, ...]


@dataclass(frozen=True)
class Scalar:
    dtype: str
    value: float | int


Param = Arr | ArrList | Scalar | int | bool      # a bare int/bool is a compile-time constant


@dataclass(frozen=True)
class Launch:
    kernel: str                                  # function of kernels.py
    params: tuple[Param, ...]
    grid: tuple[int, int, int]
    hints: dict[str, Any] = field(default_factory=dict)

    @property
    def runtime_args(self) -> list[Param]:
        """The parameters a launch passes (constants are baked into the bytecode)."""
        return [p for p in self.params if isinstance(p, (Arr, ArrList, Scalar))]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _dim(n: int, v: Variant, cut: int = 3) -> int:
    """A token / row count of `n` (a multiple of 16), or `n - cut` for a ragged variant."""
    return n - cut if v["facts"] == "ragged" else n


def _lat(v: Variant) -> int:
    return v.hints.get("latency", 0)


def _kernel_hints(v: Variant) -> dict[str, Any]:
    """The hints cuTile's kernel decorator takes, as plain values (export.py writes num_ctas as
    ``ct.ByTarget(sm_100=n)``, as TileGym does: a launch needs no cuTile)."""
    return {k: val for k, val in v.hints.items() if k != "latency"}


# ------------------------------------------------------------------------------------ matmul

_GEMM_OUT = {"f16": "float16", "bf16": "bfloat16", "tf32": "float32", "f32": "float32", "e4m3": "float16",
             "i8": "int32", "mxfp8": "float32", "nvfp4": "float32"}
_GEMM_CAST = {"f16": "float32", "bf16": "float32", "tf32": "bfloat16", "f32": "bfloat16", "e4m3": "bfloat16",
              "i8": "float32", "mxfp8": "bfloat16", "nvfp4": "bfloat16"}


def gemm_out_dtype(v: Variant) -> str:
    if v["schedule"] in SPLIT_K:                 # partial sums added with atomics in f32 (i32)
        return "int32" if v["dtype"] == "i8" else "float32"
    if v["epilogue"] == "cast":
        return _GEMM_CAST[v["dtype"]]
    if v["dtype"] == "i8" and v["epilogue"] == "scale":
        return "float16"                         # int8 GEMM with its dequantization scale
    return _GEMM_OUT[v["dtype"]]


def _gemm(v: Variant) -> Launch:
    tm, tn, tk, dt = v["tm"], v["tn"], v["tk"], v["dtype"]
    tiles_m = 4 if v["schedule"] == "persistent" else 2
    # K of 6 tiles (8 split-K): enough to wrap most rings, so that the emulator sees stages refilled (a
    # missing wait before a refill is a race only then; 2 tiles, as before, never refilled one)
    m, n, k = _dim(tiles_m * tm, v), 2 * tn, _dim((8 if v["schedule"] in SPLIT_K else 6) * tk, v, 8)
    a = DTYPE[dt]
    out = gemm_out_dtype(v)
    if dt in ("mxfp8", "nvfp4"):
        sbs, scale = (32, "float8_e8m0fnu") if dt == "mxfp8" else (16, "float8_e4m3fn")
        k = 2 * tk                               # scale tiles need whole scaling blocks
        params: tuple[Param, ...] = (
            Arr(a, (m, k)), Arr(scale, (m, k // sbs), fill="scale"), Arr(a, (k, n)),
            Arr(scale, (k // sbs, n), fill="scale"), Arr(out, (m, n), True), Arr("float32", (m,)),
            tm, tn, tk, sbs, _lat(v), EPILOGUES.index(v["epilogue"]) if v["epilogue"] != "cast" else 0)
        return Launch("gemm_scaled", params, (_cdiv(m, tm) * _cdiv(n, tn), 1, 1), _kernel_hints(v))
    a_col, b_col = v["major"][0] == "c", v["major"][1] == "c"
    epi = v["epilogue"]
    params = (
        Arr(a, (k, m) if a_col else (m, k)), Arr(a, (n, k) if b_col else (k, n)),
        Arr(out, (m, n), True),
        Arr(out, (n,)), Arr("float32", (m,)), Arr(out, (m, n)),
        Scalar("float32", 1.5), Scalar("float32", -0.5),
        tm, tn, tk, a_col, b_col, dt == "tf32", v["padding"] == "zero", _lat(v),
        SCHEDULES.index(v["schedule"]), 2, EPILOGUES.index(epi) if epi != "cast" else 0)
    tiles = _cdiv(m, tm) * _cdiv(n, tn)
    grid = {"tiles": (tiles, 1, 1), "persistent": (max(1, tiles // 3), 1, 1), "splitk": (tiles, 2, 1),
            "splitr": (tiles, 2, 1)}
    return Launch("gemm", params, grid[v["schedule"]], _kernel_hints(v))


def _bmm(v: Variant) -> Launch:
    tm, tn, tk, dt = v["tm"], v["tn"], v["tk"], v["dtype"]
    z, m, n, k = 2, _dim(2 * tm, v), 2 * tn, _dim(6 * tk, v, 8)     # K: as _gemm's
    b_col = v["major"][1] == "c"
    out = {"none": _GEMM_OUT, "scale": _GEMM_OUT, "cast": _GEMM_CAST}[v["epilogue"]][dt]
    params = (Arr(DTYPE[dt], (z, m, k)), Arr(DTYPE[dt], (z, n, k) if b_col else (z, k, n)),
              Arr(out, (z, m, n), True), Arr("float32", (z,)),
              tm, tn, tk, b_col, dt == "tf32", _lat(v), EPILOGUES.index(v["epilogue"]) if v["epilogue"] == "scale" else 0)
    return Launch("bmm", params, (_cdiv(m, tm), _cdiv(n, tn), z), _kernel_hints(v))


def _group_gemm(v: Variant) -> Launch:
    tm, tn, tk, dt = v["tm"], v["tn"], v["tk"], DTYPE[v["dtype"]]
    b_col = v["major"][1] == "c"
    n, k = 2 * tn, 2 * tk
    ms = [_dim(tm * (1 + g % 2), v) for g in range(v["groups"])]     # problems of different sizes
    params = (ArrList(tuple(Arr(dt, (m, k)) for m in ms)),
              ArrList(tuple(Arr(dt, (n, k) if b_col else (k, n)) for _ in ms)),
              ArrList(tuple(Arr(dt, (m, n), True) for m in ms)),
              tm, tn, tk, b_col, _lat(v))
    return Launch("group_gemm", params, (4, 1, 1), _kernel_hints(v))


# --------------------------------------------------------------------------------- attention

def _attn_fwd(v: Variant) -> Launch:
    d, bq, bk, g, dt = v["d"], v["bq"], v["bk"], v["gqa"], DTYPE[v["dtype"]]
    s, hkv = _dim(4 * max(bq, bk), v, 7), 2
    out = "float16" if v["dtype"] == "e4m3" else dt
    window = bq + bk if v["mask"] == "window" else 0
    params = (Arr(dt, (hkv * g, s, d)), Arr(dt, (hkv, s, d)), Arr(dt, (hkv, s, d)),
              Arr(out, (hkv * g, s, d), True), Scalar("float32", 1 / math.sqrt(d)),
              bq, bk, d, g, v["mask"] != "full", window, _lat(v))
    return Launch("attn_fwd", params, (_cdiv(s, bq), hkv * g, 1), _kernel_hints(v))


def _attn_decode(v: Variant) -> Launch:
    d, bk, g, dt = v["d"], v["bk"], v["gqa"], DTYPE[v["dtype"]]
    s, hkv = _dim(4 * bk, v, 7), 2
    window = 2 * bk if v["mask"] == "window" else 0
    params = (Arr(dt, (hkv, g, d)), Arr(dt, (hkv, s, d)), Arr(dt, (hkv, s, d)), Arr(dt, (hkv, g, d), True),
              Scalar("float32", 1 / math.sqrt(d)), g, bk, d, window, _lat(v))
    return Launch("attn_decode", params, (hkv, 1, 1), _kernel_hints(v))


def _mla_decode(v: Variant) -> Launch:
    h, bk, dt = v["heads"], v["bk"], DTYPE[v["dtype"]]
    b, s, dl, dr, hb = 2, _dim(4 * bk, v, 7), 512, 64, 16
    params = (Arr(dt, (b, h, dl)), Arr(dt, (b, h, dr)), Arr(dt, (b, s, dl)), Arr(dt, (b, s, dr)),
              Arr(dt, (b, h, dl), True), Scalar("float32", 1 / math.sqrt(dl + dr)), hb, bk, dl, dr, _lat(v))
    return Launch("mla_decode", params, (b, h // hb, 1), _kernel_hints(v))


def _attn_bwd_dq(v: Variant) -> Launch:
    d, bq, bk, dt = v["d"], v["bq"], v["bk"], DTYPE[v["dtype"]]
    bh, s = 2, _dim(2 * bq, v, 7)
    params = (Arr(dt, (bh, s, d)), Arr(dt, (bh, s, d)), Arr(dt, (bh, s, d)), Arr(dt, (bh, s, d)),
              Arr("float32", (bh, s), fill="lse"), Arr("float32", (bh, s)), Arr(dt, (bh, s, d), True),
              Scalar("float32", 1 / math.sqrt(d)), bq, bk, d, v["mask"] == "causal", _lat(v))
    return Launch("attn_bwd_dq", params, (_cdiv(s, bq), bh, 1), _kernel_hints(v))


# ------------------------------------------------------------------------------------ rows

_ROW_OUT = {"layernorm": None, "rmsnorm": None, "softmax": None, "logsumexp": "float32", "sum": "float32",
            "max": None, "cumsum": "float32", "cross_entropy": "float32"}


def _row(v: Variant) -> Launch:
    op, rows, n, chunk, dt = v["op"], v["rows"], v["cols"], v["chunk"], DTYPE[v["dtype"]]
    m = _dim(16 if rows < 8 else 32, v)
    persist = v["persistent"] == "persist"
    blocks = _cdiv(m, rows)
    grid = (max(1, blocks // 3) if persist else blocks, 1, 1)
    out = _ROW_OUT[op] or dt
    x = Arr(dt, (m, n))
    eps = Scalar("float32", 1e-5)
    tail = (rows, n, chunk, persist)
    params: dict[str, tuple[Param, ...]] = {
        "layernorm": (x, Arr(dt, (n,)), Arr(dt, (n,)), Arr(out, (m, n), True), eps, *tail),
        "rmsnorm": (x, Arr(dt, (n,)), Arr(out, (m, n), True), eps, *tail),
        "softmax": (x, Arr(out, (m, n), True), *tail),
        "logsumexp": (x, Arr(out, (m,), True), *tail),
        "sum": (x, Arr(out, (m,), True), *tail, False),
        "max": (x, Arr(out, (m,), True), *tail, True),
        "cumsum": (x, Arr(out, (m, n), True), *tail),
        "cross_entropy": (x, Arr("int32", (m,), fill=f"ids:{n}"), Arr(out, (m,), True), n, chunk, persist),
    }
    kernel = {"sum": "row_reduce", "max": "row_reduce"}.get(op, op)
    return Launch(kernel, params[op], grid, _kernel_hints(v))


def _rope(v: Variant) -> Launch:
    d, h, ts, dt = v["d"], v["heads"], v["positions"], DTYPE[v["dtype"]]
    s = _dim(max(16, 2 * ts), v, 1)
    params = (Arr(dt, (s, h, d)), Arr(dt, (s, d // 2)), Arr(dt, (s, d // 2)), Arr(dt, (s, h, d), True), ts, h, d)
    return Launch("rope", params, (_cdiv(s, ts), 1, 1), _kernel_hints(v))


# ------------------------------------------------------------------------------ elementwise

def _eltwise(v: Variant) -> Launch:
    tile, dt, op = v["tile"], DTYPE[v["dtype"]], v["op"]
    if len(tile) == 1:
        shape = (_dim(4 * tile[0], v),)
        t0, t1 = tile[0], 0
    else:
        shape = (_dim(2 * tile[0], v, 1), 2 * tile[1])
        t0, t1 = tile
    out = {"float16": "float8_e4m3fn", "bfloat16": "float8_e4m3fn", "float32": "bfloat16"}[dt] \
        if op == "scale_cast" else dt
    b = Arr(dt, (shape[1],)) if op == "gelu_bias" and t1 else Arr(dt, shape)
    params = (Arr(dt, shape), b, Arr(out, shape, True), Scalar("float32", 0.25), t0, t1, ELTWISE_OPS.index(op))
    grid = (_cdiv(shape[0], t0), _cdiv(shape[1], t1) if t1 else 1, 1)
    return Launch("eltwise", params, grid, _kernel_hints(v))


def _gather(v: Variant) -> Launch:
    op, r, n, dt = v["op"], v["rows"], v["cols"], DTYPE[v["dtype"]]
    t, vocab = _dim(2 * r, v), 64
    params = {
        "embedding": (Arr(dt, (vocab, n)), Arr("int32", (t,), fill=f"ids:{vocab}"), Arr(dt, (t, n), True), r, n),
        "index_add": (Arr(dt, (t, n)), Arr("int32", (t,), fill=f"ids:{vocab}"), Arr("float32", (vocab, n), True),
                      r, n),
        "scatter_rows": (Arr(dt, (t, n)), Arr("int32", (t,), fill="perm"), Arr(dt, (t, n), True), r, n),
    }[op]
    return Launch(op, params, (_cdiv(t, r), 1, 1), _kernel_hints(v))


def _moe_route(v: Variant) -> Launch:
    e, k, tt, dt = v["experts"], v["topk"], v["tokens"], DTYPE[v["dtype"]]
    t = _dim(2 * tt, v)
    params = (Arr(dt, (t, e)), Arr("float32", (t, k), True), Arr("int32", (t, k), True), tt, e, k)
    return Launch("moe_route", params, (_cdiv(t, tt), 1, 1), _kernel_hints(v))


BINDERS: dict[str, Callable[[Variant], Launch]] = {
    "gemm": _gemm, "bmm": _bmm, "group_gemm": _group_gemm, "attn_fwd": _attn_fwd, "attn_decode": _attn_decode,
    "mla_decode": _mla_decode, "attn_bwd_dq": _attn_bwd_dq, "row": _row, "rope": _rope, "eltwise": _eltwise,
    "gather": _gather, "moe_route": _moe_route,
}


def launch(v: Variant) -> Launch:
    return BINDERS[v.template](v)
