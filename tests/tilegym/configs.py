"""The TileGym / cutile-python configurations: one row per exported kernel specialization.

Each row names a kernel of ``kernels/<module>.py``, its parameters in the kernel's order (arrays
with the shapes of the source's own tests or benchmarks, runtime scalars, compile-time
constants), the optimization hints the source's launcher sets (``occupancy``, ``num_ctas``) and
the targets whose default tile sizes these are (``default_for``: the source picks tile sizes per
GPU generation, from the first entry of its autotuning list or its fixed launch values).
Every row is compiled for every target of ``TARGETS``; the manifest records where NVIDIA's
tileiras compiles it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

TARGETS: tuple[str, ...] = ("sm_80", "sm_90", "sm_100", "sm_120")
BYTECODE_VERSION = "13.4"
ALL = TARGETS

# bytes per element (cuTile dtype names; fp4 packs two to a byte)
ITEMSIZE: dict[str, float] = {
    "float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "int32": 4, "int64": 8,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e8m0fnu": 1, "float4_e2m1fn": 0.5,
}
SHORT: dict[str, str] = {
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float8_e4m3fn": "e4m3",
    "float8_e5m2": "e5m2",
}


@dataclass(frozen=True)
class Arr:
    """A C-contiguous array argument."""
    dtype: str
    shape: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kind": "array", "dtype": self.dtype, "shape": list(self.shape)}


@dataclass(frozen=True)
class ArrList:
    """A list of arrays (TileGym's group GEMM); every element has ``arr``'s dtype and rank."""
    arrays: tuple[Arr, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kind": "list", "arrays": [a.to_json() for a in self.arrays]}


@dataclass(frozen=True)
class Scalar:
    dtype: str
    value: float | int

    def to_json(self) -> dict[str, Any]:
        return {"kind": "scalar", "dtype": self.dtype, "value": self.value}


Param = Arr | ArrList | Scalar | int | float | bool     # a bare value is a constant


@dataclass(frozen=True)
class Config:
    name: str
    module: str                        # kernels/<module>.py
    kernel: str
    params: tuple[Param, ...]
    hints: dict[str, int] = field(default_factory=dict)
    default_for: tuple[str, ...] = ALL
    sample: bool = False               # in the fast default test

    @property
    def source(self) -> str:
        from vendor import SOURCES     # noqa: PLC0415 (the kernel file's origin)
        repo, path = SOURCES[self.module]
        return f"{repo}:{path}"

    def to_json(self) -> dict[str, Any]:
        def param(p: Param) -> dict[str, Any]:
            if isinstance(p, (Arr, ArrList, Scalar)):
                return p.to_json()
            return {"kind": "constant", "value": p}
        return {"name": self.name, "module": self.module, "kernel": self.kernel,
                "source": self.source, "file": f"bytecode/{self.name}.tileirbc",
                "params": [param(p) for p in self.params], "hints": self.hints,
                "default_for": list(self.default_for), "sample": self.sample}


def A(dtype: str, *shape: int) -> Arr:
    return Arr(dtype, tuple(shape))


def i32(v: int) -> Scalar:
    return Scalar("int32", v)


def f32(v: float) -> Scalar:
    return Scalar("float32", v)


def pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


SM80, SM90, SM100, SM120 = ("sm_80",), ("sm_90",), ("sm_100",), ("sm_120",)
HOPPER_UP = ("sm_90", "sm_100")


# ------------------------------------------------------------------------------ TileGym GEMMs

def _matmul() -> list[Config]:
    out = []
    # _matmul_autotune_configs: first entry per generation
    tiles = {"sm80": ((64, 64, 32), SM80), "sm90": ((128, 128, 32), HOPPER_UP),
             "sm120": ((128, 64, 64), SM120)}
    for dt in ("float16", "float32", "float8_e4m3fn"):
        for gen, ((tm, tn, tk), targets) in tiles.items():
            m = n = k = 4096
            out.append(Config(f"tg_matmul_{SHORT[dt]}_{tm}x{tn}x{tk}", "tg_matmul", "_matmul_kernel",
                              (A(dt, m, k), A(dt, k, n), A(dt, m, n), tm, tn, tk),
                              {"num_ctas": 1, "occupancy": 1}, targets,
                              sample=(dt == "float16" and gen == "sm80")))
    # _static_persistent_matmul_autotune_configs: first entry per generation
    persistent = {"sm80": ((64, 64, 32), 1, 2, SM80), "sm100": ((128, 512, 64), 4, 1, HOPPER_UP),
                  "sm120": ((64, 64, 64), 1, 2, SM120)}
    for gen, ((tm, tn, tk), ctas, occ, targets) in persistent.items():
        for ta, tb in ((False, False), (False, True)):
            m = n = k = 4096
            b = A("float16", n, k) if tb else A("float16", k, n)
            out.append(Config(f"tg_matmul_persistent_f16_{tm}x{tn}x{tk}{'_tb' if tb else ''}", "tg_matmul",
                              "_static_persistent_matmul_kernel",
                              (A("float16", m, k), b, A("float16", m, n), i32(m), i32(n), i32(k),
                               tm, tn, tk, ta, tb, 8, -1),
                              {"num_ctas": ctas, "occupancy": occ}, targets))
    return out


def _bmm() -> list[Config]:
    out = []
    q, m, n, k = 4, 1024, 512, 1024                        # tests/ops/test_bmm.py
    for dt in ("float16", "float8_e4m3fn"):
        out.append(Config(f"tg_bmm_{SHORT[dt]}_128x128x32", "tg_bmm", "_bmm_kernel",
                          (A(dt, q, m, k), A(dt, q, k, n), A(dt, q, m, n), 128, 128, 32)))
    # _bmm_autotune_configs: first entry per generation
    persistent = {"sm80": ((64, 64, 32), 1, 1, SM80), "sm90": ((64, 64, 64), 2, 1, SM90),
                  "sm100": ((128, 256, 64), 2, 1, SM100), "sm120": ((64, 64, 32), 1, 1, SM120)}
    for gen, ((tm, tn, tk), ctas, occ, targets) in persistent.items():
        out.append(Config(f"tg_bmm_persistent_f16_{tm}x{tn}x{tk}_{gen}", "tg_bmm",
                          "_static_persistent_bmm_kernel",
                          (A("float16", q, m, k), A("float16", q, k, n), A("float16", q, m, n), i32(q),
                           m, n, k, tm, tn, tk, 8, False, False),
                          {"num_ctas": ctas, "occupancy": occ}, targets))
    return out


def _group_gemm() -> list[Config]:
    out = []
    shapes = ((256, 512, 1024), (512, 1024, 1024), (1024, 2048, 1024), (2048, 512, 1024))  # (M, N, K)
    tiles = {"sm80": ((128, 128, 128), ("sm_80", "sm_90", "sm_100"), 132),
             "sm120": ((64, 128, 128), SM120, 84)}
    for gen, ((tm, tn, tk), targets, sms) in tiles.items():
        for tb in (False, True):
            dt = "float16"
            a = ArrList(tuple(A(dt, m, k) for m, n, k in shapes))
            b = ArrList(tuple(A(dt, n, k) if tb else A(dt, k, n) for m, n, k in shapes))
            c = ArrList(tuple(A(dt, m, n) for m, n, k in shapes))
            out.append(Config(f"tg_group_gemm_f16_{tm}x{tn}x{tk}{'_tb' if tb else ''}", "tg_group_gemm",
                              "_group_gemm_kernel", (a, b, c, tm, tn, tk, sms, tb),
                              {"num_ctas": 1, "occupancy": 1}, targets))
    return out


def _moe() -> list[Config]:
    out = []
    # tests/ops/test_moe.py (32 tokens, hidden 1024, intermediate 512, 16 experts, top-4);
    # moe_interface's default config: 128x128x64, GROUP_SIZE_M 32
    tokens, hidden, inter, experts, topk = 32, 1024, 512, 16, 4
    tm, tn, tk = 128, 128, 64
    em = (tokens * topk + experts * (tm - 1) + tm - 1) // tm * tm
    for stage, (n, k, routed) in (("up", (2 * inter, hidden, 0)), ("down", (hidden, inter, 1))):
        dt = "bfloat16"
        out.append(Config(f"tg_moe_bf16_{stage}_{tm}x{tn}x{tk}", "tg_moe", "_fused_moe_kernel",
                          (A(dt, tokens * (topk if routed else 1) * k), A(dt, experts, n, k),
                           A(dt, tokens * topk, n), A(dt, 0), A(dt, 0), A("float32", tokens * topk),
                           A("int32", em), A("int32", em // tm), A("int32", 1),
                           n, k, i32(em), i32(tokens * topk), 0, 0, tm, tn, tk, 32, routed,
                           topk, 0, 0, int(k % tk == 0), k)))
    return out


# ------------------------------------------------------------------------------ TileGym attention

def _attention() -> list[Config]:
    out = []
    fwd_tiles = {"sm80": ((64, 64), 2, ("sm_80", "sm_120")), "sm90": ((256, 128), 1, HOPPER_UP)}
    # tests/ops/test_attention.py: (batch, heads, seq, head_dim, causal, dtype)
    cases = ((1, 32, 2047, 128, True, "float16"), (2, 32, 4095, 128, True, "bfloat16"),
             (2, 32, 4095, 128, True, "float8_e5m2"), (2, 32, 4096, 64, False, "float16"))
    for b, h, s, d, causal, dt in cases:
        for gen, ((tm, tn), occ, targets) in fwd_tiles.items():
            even_k = s % 128 == 0
            qkv = A(dt, b, h, s, d)
            suffix = f"{SHORT[dt]}_d{d}_{'causal' if causal else 'full'}_{tm}x{tn}"
            out.append(Config(f"tg_fmha_{suffix}", "tg_attention", "_fmha_kernel",
                              (qkv, qkv, qkv, qkv, f32(1 / math.sqrt(d)), i32(0), d, h, tm, tn, 1,
                               causal, even_k),
                              {"num_ctas": 1, "occupancy": occ}, targets,
                              sample=(dt == "float16" and d == 64 and gen == "sm80")))
    # forward with LSE and the backward kernels (fp16, head_dim 128, causal, 2x32x4096)
    b, h, s, d, dt = 2, 32, 4096, 128, "float16"
    qkv = A(dt, b, h, s, d)
    lse = A("float32", b * h * s)
    for gen, ((tm, tn), occ, targets) in fwd_tiles.items():
        out.append(Config(f"tg_fmha_fwd_lse_f16_d128_{tm}x{tn}", "tg_attention", "_fmha_fwd_kernel_with_lse",
                          (qkv, qkv, qkv, qkv, lse, f32(1 / math.sqrt(d)), i32(0), d, h, b, s, tm, tn, 1,
                           True, True), {"num_ctas": 1, "occupancy": occ}, targets))
    # _FMHA_BWD_*_TILE_CONFIGS_BY_D[128]: first entries; preprocess uses the smallest TILE_M
    out.append(Config("tg_fmha_bwd_preprocess_f16_d128_16", "tg_attention", "_fmha_bwd_preprocess_kernel",
                      (qkv, qkv, lse, 16, d, h, s)))
    out.append(Config("tg_fmha_bwd_dkdv_f16_d128_16x32", "tg_attention", "_fmha_bwd_dkdv_kernel",
                      (qkv, qkv, qkv, qkv, qkv, qkv, lse, lse, f32(1 / math.sqrt(d)), d, h, h, s, 16, 32,
                       1, True), {"occupancy": 2}))
    out.append(Config("tg_fmha_bwd_dq_f16_d128_32x16", "tg_attention", "_fmha_bwd_dq_kernel",
                      (qkv, qkv, qkv, qkv, qkv, lse, lse, f32(1 / math.sqrt(d)), d, h, s, 32, 16, 1, True),
                      {"occupancy": 2}))
    # dkdv / dq at head_dim 64 (first entries of the d=64 lists)
    qkv64 = A(dt, b, h, s, 64)
    out.append(Config("tg_fmha_bwd_dkdv_f16_d64_32x64", "tg_attention", "_fmha_bwd_dkdv_kernel",
                      (qkv64, qkv64, qkv64, qkv64, qkv64, qkv64, lse, lse, f32(0.125), 64, h, h, s, 32, 64,
                       1, True), {"occupancy": 2}))
    out.append(Config("tg_fmha_bwd_dq_f16_d64_64x32", "tg_attention", "_fmha_bwd_dq_kernel",
                      (qkv64, qkv64, qkv64, qkv64, qkv64, lse, lse, f32(0.125), 64, h, s, 64, 32, 1, True),
                      {"occupancy": 2}))
    return out


def _mla() -> list[Config]:
    out = []
    # tests/ops/test_mla.py: bf16, head dim 128 + rope dim 64; _mla_sm80/_sm90 first entries
    b, h, s, d, kpe = 2, 16, 4096, 128, 64
    dt = "bfloat16"
    for gen, ((tm, tn), occ, targets) in {"sm80": ((64, 64), 2, ("sm_80", "sm_120")),
                                           "sm90": ((64, 64), 1, HOPPER_UP)}.items():
        for group in (1, 4):
            q, qpe = A(dt, b, h, s, d), A(dt, b, h, s, kpe)
            kv, kpe_a = A(dt, b, h // group, s, d), A(dt, b, 1, s, kpe)
            out.append(Config(f"tg_mla_prefill_bf16_g{group}_{tm}x{tn}_occ{occ}", "tg_mla", "_prefill_mla_kernel",
                              (q, qpe, kv, kpe_a, kv, q, f32(1 / math.sqrt(d + kpe)), d, kpe, i32(h), tm, tn, group),
                              {"num_ctas": 1, "occupancy": occ}, targets))
    # mla_decoding: TILE_H 16, TILE_N 128, D 512, KPE 64 (tests/ops/test_mla_decoding.py)
    b, h, s, d, kpe = 4, 128, 4096, 512, 64
    dt = "float16"
    out.append(Config("tg_mla_decode_f16_16x128", "tg_mla_decoding", "_naive_absorb_mla_transpose_kernel",
                      (A(dt, b, h, d), A(dt, b, h, kpe), A(dt, b, s, d), A(dt, b, s, d), A(dt, b, s, kpe),
                       A(dt, b, h, d), A("float32", b, h), f32(1 / math.sqrt(d + kpe)), d, 16, 128, kpe, s,
                       True)))
    # splitk_reduce (tests/ops/test_splitk_reduce.py: head dim 512; USE_DOT from the split count)
    for splits, use_dot, targets in ((8, True, SM80), (8, False, ("sm_90", "sm_100", "sm_120")),
                                     (16, True, ALL)):
        b, h, d = 1, 32, 512
        out.append(Config(f"tg_splitk_reduce_f16_{splits}{'_dot' if use_dot else ''}", "tg_splitk_reduce",
                          "_splitk_reduce_kernel",
                          (A("float16", b, h, splits, d), A("float32", b, h, splits), A("float16", b, h, d),
                           b, 4096, h, d, splits, pow2(splits), 128, use_dot), {}, targets))
    return out


# ------------------------------------------------------------------------------ TileGym row ops

def _norms() -> list[Config]:
    out = []
    for m, n, dt in ((4096, 4096, "float16"), (2048, 8192, "bfloat16")):
        tile_m = 16 if pow2(n) <= 1024 else (2 if pow2(n) >= 16384 else 4)
        x = A(dt, m, n)
        out.append(Config(f"tg_rmsnorm_persistent_{SHORT[dt]}_{m}x{n}", "tg_rms_norm",
                          "_rms_norm_kernel_static_persistent",
                          (x, x, A(dt, n), A("float32", m), tile_m, pow2(n), 1e-6, 0.0),
                          sample=(n == 4096)))
        out.append(Config(f"tg_rmsnorm_gather_{SHORT[dt]}_{m}x{n}", "tg_rms_norm", "_rms_norm_kernel_gather",
                          (x, A(dt, n), x, A("float32", m), n, 1e-6, 0.0, min(pow2(n), 4096))))
        out.append(Config(f"tg_rmsnorm_cached_{SHORT[dt]}_{m}x{n}", "tg_rms_norm",
                          "_rms_norm_kernel_multi_wave_cached",
                          (x, A(dt, n), x, A("float32", m), n, 1e-6, 0.0, pow2(n))))
    # backward: _bwd_tiles picks TILE_M 4 for rows of 4096
    out.append(Config("tg_rmsnorm_bwd_f16_4096x4096", "tg_rms_norm", "_rms_bwd_kernel",
                      (A("float16", 4096, 4096), A("float16", 4096, 4096), A("float16", 4096, 4096),
                       A("float16", 4096), A("float32", 4096), A("float32", 132, 4096), 4, 4096),
                      {"occupancy": 1}))
    # layer_norm_legacy forward: BLOCK_SIZE = min(64 KiB / elem, largest power of 2 <= N)
    out.append(Config("tg_layernorm_f16_4096x4096", "tg_layer_norm_legacy", "_layer_norm_fwd_kernel",
                      (A("float16", 4096, 4096), A("float16", 4096, 4096), A("float16", 4096),
                       A("float16", 4096), A("float32", 4096), A("float32", 4096), 4096, 1e-5, 0.0, 4096)))
    for dt, n in (("float16", 4096), ("float32", 8192)):
        x = A(dt, 4096, n)
        out.append(Config(f"tg_softmax_{SHORT[dt]}_{n}", "tg_softmax", "_softmax_kernel",
                          (x, x, 4096, pow2(n), n), {"occupancy": 4}))
        out.append(Config(f"tg_softmax_tma_{SHORT[dt]}_{n}", "tg_softmax", "_softmax_kernel_tma",
                          (x, x, 4096, n, pow2(n)), {"occupancy": 2}))
        out.append(Config(f"tg_softmax_chunked_{SHORT[dt]}_{n}", "tg_softmax", "_softmax_kernel_chunked",
                          (x, x, 4096, n, min(pow2(n), 8192)), {"occupancy": 4}))
    return out


def _elementwise() -> list[Config]:
    out = []
    # RoPE: llama-like q (2, 32, 4096, 128), k (2, 8, 4096, 128), cos/sin (1, 4096, 128)
    for dt in ("float16", "bfloat16"):
        out.append(Config(f"tg_rope_{SHORT[dt]}_h32_kv8_d128", "tg_rope", "_rope_kernel",
                          (A(dt, 2, 32, 4096, 128), A(dt, 2, 8, 4096, 128), A(dt, 1, 4096, 128),
                           A(dt, 1, 4096, 128), 1, 4096, 32, 8, 64), {"occupancy": 9},
                          sample=(dt == "float16")))
    # SwiGLU (rows 4096, hidden 11008) and silu_and_mul (hidden 14336)
    x = A("float16", 4096, 11008)
    out.append(Config("tg_swiglu_fwd_f16_11008", "tg_swiglu", "_swiglu_forward_kernel", (x, x, x, pow2(11008))))
    out.append(Config("tg_swiglu_bwd_f16_11008", "tg_swiglu", "_swiglu_backward_kernel",
                      (x, x, x, x, x, pow2(11008 // 1))))
    out.append(Config("tg_silu_and_mul_bf16_14336", "tg_silu_and_mul", "_silu_and_mul_kernel_row_wise",
                      (A("bfloat16", 4096, 2 * 14336), A("bfloat16", 4096, 14336), pow2(14336), 14336)))
    out.append(Config("tg_silu_and_mul_bwd_bf16_14336", "tg_silu_and_mul",
                      "_silu_and_mul_backward_kernel_row_wise",
                      (A("bfloat16", 4096, 14336), A("bfloat16", 4096, 2 * 14336), A("bfloat16", 4096, 14336),
                       A("bfloat16", 4096, 14336), pow2(14336), 14336)))
    return out


# ------------------------------------------------------------------------------ cutile-python samples

def _samples() -> list[Config]:
    out = []
    m = n = k = 4096
    for dt, (tm, tn, tk) in (("float16", (128, 256, 64)), ("float32", (32, 32, 32))):
        args = (A(dt, m, k), A(dt, k, n), A(dt, m, n), tm, tn, tk)
        out.append(Config(f"cp_matmul_{SHORT[dt]}_{tm}x{tn}x{tk}", "cp_MatMul", "matmul_kernel", args,
                          sample=(dt == "float32")))
        out.append(Config(f"cp_matmul_persistent_{SHORT[dt]}_{tm}x{tn}x{tk}", "cp_MatMul",
                          "persistent_matmul_kernel", args))
    for dt, out_dt in (("float16", "float16"), ("float32", "float32"), ("float8_e4m3fn", "float16")):
        out.append(Config(f"cp_bmm_{SHORT[dt]}_128x256x128", "cp_BatchMatMul", "batch_matmul_kernel",
                          (A(dt, 4, 512, 256), A(dt, 4, 256, 1024), A(out_dt, 4, 512, 1024), 128, 256, 128)))
    for causal in (False, True):
        for dt in ("float16", "float8_e4m3fn"):
            qkv = A(dt, 2, 8, 1024, 64)
            o = A("float16" if dt != "float16" else dt, 2, 8, 1024, 64)
            out.append(Config(f"cp_fmha_{SHORT[dt]}_d64_{'causal' if causal else 'full'}_128x128", "cp_AttentionFMHA",
                              "fmha_kernel", (qkv, qkv, qkv, o, f32(0.125), i32(0), 64, 8, 128, 128, 1, causal,
                                              True)))
    m, n, k, sbs = 512, 512, 768, 32
    e4, e8 = "float8_e4m3fn", "float8_e8m0fnu"
    out.append(Config("cp_mxfp8_matmul_256x256x128", "cp_BlockScaledMatMul", "block_scaled_matmul_kernel",
                      (A(e4, m, k), A(e8, m, k // sbs), A(e4, k, n), A(e8, k // sbs, n), A("float32", m, n),
                       256, 256, 128, sbs)))
    out.append(Config("cp_mxfp8_matmul_swizzled_256x256x128", "cp_BlockScaledMatMul",
                      "block_scaled_matmul_kernel",
                      (A(e4, m, k), A(e8, m // 128, k // sbs // 4, 32, 16), A(e4, k, n),
                       A(e8, n // 128, k // sbs // 4, 32, 16), A("float32", m, n), 256, 256, 128, sbs)))
    # fp4 (e2m1) operands: MXFP4 (ue8m0 scales per 32) and NVFP4 (e4m3 scales per 16), at the
    # sample's 2-D scale layout and the 128 x 128 / 128 x 256 tiles with K tile 128
    e2 = "float4_e2m1fn"
    for fmt, scale, sbs in (("mxfp4", e8, 32), ("nvfp4", e4, 16)):
        for tm, tn in ((128, 128), (128, 256)):
            out.append(Config(f"cp_{fmt}_matmul_{tm}x{tn}x128", "cp_BlockScaledMatMul",
                              "block_scaled_matmul_kernel",
                              (A(e2, m, k), A(scale, m, k // sbs), A(e2, k, n), A(scale, k // sbs, n),
                               A("float32", m, n), tm, tn, 128, sbs)))
    # MoE sample: 48 tokens, hidden 512, 64 experts, intermediate 1024, top-8, bf16, 128x128x64
    tokens, hidden, experts, inter, topk, tm = 48, 512, 64, 1024, 8, 128
    em = (tokens * topk + experts * (tm - 1)) // tm * tm
    dt = "bfloat16"
    for stage, (a_rows, n_, k_, routed) in (("up", (tokens, 2 * inter, hidden, False)),
                                             ("down", (tokens * topk, hidden, inter, True))):
        out.append(Config(f"cp_moe_bf16_{stage}_128x128x64", "cp_MoE", "fused_moe_kernel",
                          (A(dt, a_rows, k_), A(dt, experts, n_, k_), A(dt, tokens * topk, n_),
                           A("float32", tokens * topk), A("int32", em), A("int32", em // tm),
                           i32(topk if not routed else 1), routed, 128, 128, 64)))
    out.append(Config("cp_moe_silu_and_mul_bf16_1024", "cp_MoE", "silu_and_mul_kernel",
                      (A(dt, tokens * topk, inter), A(dt, tokens * topk, inter), A(dt, tokens * topk, inter),
                       inter)))
    # LayerNorm sample: TILE_N 1024, bwd TILE_M 32
    x = A("float16", 4096, 4096)
    out.append(Config("cp_layernorm_fwd_f16_1024", "cp_LayerNorm", "layer_norm_fwd",
                      (x, A("float16", 4096), A("float16", 4096), x, A("float32", 4096), A("float32", 4096),
                       f32(1e-5), 1024), sample=True))
    out.append(Config("cp_layernorm_bwd_dx_f16_1024", "cp_LayerNorm", "layer_norm_bwd_dx_partial_dwdb",
                      (x, x, A("float32", 64, 4096), A("float32", 64, 4096), x, A("float16", 4096),
                       A("float32", 4096), A("float32", 4096), A("int32", 128), 1024)))
    out.append(Config("cp_layernorm_bwd_dwdb_f16_32x1024", "cp_LayerNorm", "layer_norm_bwd_dwdb",
                      (A("float32", 64, 4096), A("float32", 64, 4096), A("float16", 4096), A("float16", 4096),
                       32, 1024)))
    out.append(Config("cp_transpose_f32_32x32", "cp_Transpose", "transpose_kernel",
                      (A("float32", 1024, 512), A("float32", 512, 1024), 32, 32)))
    out.append(Config("cp_vec_add_1d_f32_1024", "cp_VectorAddition", "vec_add_kernel_1d",
                      (A("float32", 1_000_000),) * 3 + (1024,)))
    out.append(Config("cp_vec_add_2d_gather_f32_1x1024", "cp_VectorAddition", "vec_add_kernel_2d_gather",
                      (A("float32", 1000, 1000),) * 3 + (1, 1024)))
    return out


def all_configs() -> list[Config]:
    configs = [*_matmul(), *_bmm(), *_group_gemm(), *_moe(), *_attention(), *_mla(), *_norms(),
               *_elementwise(), *_samples()]
    names = [c.name for c in configs]
    assert len(names) == len(set(names)), "configuration names must be unique"
    return configs
