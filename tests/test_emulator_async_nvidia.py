"""NVIDIA's own pipelined PTX in our emulator: the strong check of TMA, wgmma, tcgen05 and mbarriers.

cuTile kernels (a 128x128-tiled matmul for f16, fp8 e4m3 and tf32 inputs, and flash attention),
exported with contiguous 16-byte aligned arrays, are compiled by NVIDIA's tileiras for sm_90 and
sm_100. tileiras runs the ptxas beside it, so the test runs it from a private copy of its bin folder
whose `ptxas` is a wrapper that copies the PTX aside first (NVIDIA's PTX is captured at test time,
never committed). The PTX is warp-specialized: a TMA producer warp, a wgmma warpgroup (sm_90) or a
tcgen05.mma warp with tensor memory (sm_100), a TMA-store epilogue warp, mbarrier rings between
them, setmaxnreg.

Its hidden `.param .align 64 .b8 [128]` parameters are the tensor maps of the arrays, which
NVIDIA's driver fills at launch; we pass our own encoding of the same maps
(`tileiras.codegen.tensormap`), with the boxes and swizzles its PTX expects (read off its copies:
coordinates, shared-memory offsets, expect_tx byte counts, descriptor swizzle modes). Results must
match numpy with the race checker on; PTX with a wait, a fence or a release moved must be reported.
"""


import io
import os
import re
import shutil
import stat
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from tileiras.emulator import EmulatorError, Memory, run_ptx
from tileiras.codegen.tensormap import for_array

sys.path.insert(0, os.path.dirname(__file__))
import corpus_kernels  # noqa: E402
from accumulation import accumulator, assert_accumulated, full_precision  # noqa: E402
import frontend_samples as fs  # noqa: E402

pytestmark = pytest.mark.skipif(fs.oracle("tileiras") is None, reason="NVIDIA's tileiras is not installed")

TILE = 128
SMALL = 64         # the f16-64 case: 64 x 64 tiles, which sm_100 computes with M = 64 tcgen05.mma
# (input type, target) -> K tile, output type and the boxes (outermost first) of the A, B and C tensor
# maps, read off NVIDIA's PTX: its TMA copies (coordinates, shared offsets) and expect_tx byte counts.
# fp8 and tf32 operands are rearranged in shared memory by generic stores before the MMAs read them.
CONFIGS = {
    ("f16", "sm_90"): (64, "f16", (TILE, 64), (64, 64), (64, 64)),
    ("f16", "sm_100"): (64, "f16", (TILE, 64), (64, 64), (TILE, 64)),
    ("e4m3", "sm_90"): (128, "f16", (TILE, 128), (128, 128), (64, 64)),
    ("e4m3", "sm_100"): (128, "f16", (TILE, 128), (128, 128), (TILE, 64)),
    ("f32", "sm_90"): (32, "f32", (TILE, 32), (32, 32), (64, 32)),
    ("f32", "sm_100"): (32, "f32", (TILE, 32), (32, 32), (TILE, 32)),
    ("f16-64", "sm_100"): (64, "f16", (SMALL, 64), (64, 64), (SMALL, 64)),
}
# attention: q, k, v, o of shape (heads, ATTN_S, 64); the Q box is a query block, K and V boxes 64 keys, and
# the O box per target
ATTN_S = 256
ATTN_O_BOX = {"sm_90": (1, 64, 64), "sm_100": (1, TILE, 64)}
# tf32 B is N-major on sm_100: its descriptor asks for 128-byte swizzling of 32-byte atoms
SWIZZLE_B = {("f32", "sm_100"): "128B_atom_32B"}
NUMPY = {"f16": np.float16, "f32": np.float32, "e4m3": ml_dtypes.float8_e4m3fn}

WRAPPER = """#!/bin/sh
for a in "$@"; do case "$a" in *.ptx) cp "$a" "$PTX_CAPTURE_DIR/" ;; esac; done
exec "$(dirname "$0")/ptxas.real" "$@"
"""


def _export_matmul(target: str, ty: str, tk: int, out: str, tile: int = TILE) -> bytes:
    import cuda.tile as ct
    from cuda.tile.compilation import (ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature,
                                       export_kernel)

    @ct.kernel
    def mm(a, b, c, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        i = ct.bid(0)
        j = ct.bid(1)
        acc = ct.zeros((TM, TN), dtype=ct.float32)
        for k in range(ct.num_tiles(a, 1, shape=(TM, TK))):
            x = ct.load(a, index=(i, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
            y = ct.load(b, index=(k, j), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
            if x.dtype == ct.float32:
                x = ct.astype(x, ct.tfloat32)
                y = ct.astype(y, ct.tfloat32)
            acc = ct.mma(x, y, acc)
        ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))

    types = {"f16": ct.float16, "f32": ct.float32, "e4m3": ct.float8_e4m3fn}

    def arr(t: str) -> ArrayConstraint:
        return ArrayConstraint(dtype=types[t], ndim=2, index_dtype=ct.int32, stride_lower_bound_incl=0,
                               alias_groups=(), may_alias_internally=False, stride_constant=(None, 1),
                               shape_divisible_by=(16, 16), stride_divisible_by=(16, 1), base_addr_divisible_by=16)

    sig = KernelSignature(parameters=[arr(ty), arr(ty), arr(out), ConstantConstraint(tile), ConstantConstraint(tile),
                                      ConstantConstraint(tk)],
                          calling_convention=CallingConvention.cutile_python_v1(), symbol="mm")
    buf = io.BytesIO()
    export_kernel(mm, [sig], buf, output_format="tileir_bytecode", bytecode_version="13.4", gpu_code=target)
    return buf.getvalue()


def _export_attention(target: str) -> bytes:
    """Flash attention (online softmax), one (query block, head) per CTA: two MMAs per key block, the
    second with the probabilities as its A operand."""
    import cuda.tile as ct
    from cuda.tile.compilation import (ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature,
                                       ScalarConstraint, export_kernel)

    def arr() -> ArrayConstraint:
        return ArrayConstraint(dtype=ct.float16, ndim=3, index_dtype=ct.int32, stride_lower_bound_incl=0,
                               alias_groups=(), may_alias_internally=False, stride_constant=(None, None, 1),
                               shape_divisible_by=(1, 16, 16), stride_divisible_by=(16, 16, 1),
                               base_addr_divisible_by=16)

    sig = KernelSignature(parameters=[arr(), arr(), arr(), arr(), ScalarConstraint(ct.float32),
                                      ConstantConstraint(ATTN_S), ConstantConstraint(64), ConstantConstraint(TILE),
                                      ConstantConstraint(64)],
                          calling_convention=CallingConvention.cutile_python_v1(), symbol="attn")
    buf = io.BytesIO()
    export_kernel(corpus_kernels.load("matmul").attention, [sig], buf, output_format="tileir_bytecode", bytecode_version="13.4", gpu_code=target)
    return buf.getvalue()


def _export_scaled(target: str) -> bytes:
    """Block-scaled fp8 matmul (mmaf_scaled): one e8m0 scale per 32 elements of K for A's rows and B's columns."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature, export_kernel

    @ct.kernel
    def ms(a, sa, b, sb, c):
        i = ct.bid(0)
        j = ct.bid(1)
        acc = ct.zeros((128, 128), ct.float32)
        for k in range(ct.num_tiles(a, 1, shape=(128, 128))):
            x = ct.load(a, index=(i, k), shape=(128, 128))
            xs = ct.load(sa, index=(i, k), shape=(128, 4))
            y = ct.load(b, index=(k, j), shape=(128, 128))
            ys = ct.load(sb, index=(k, j), shape=(4, 128))
            acc = ct.mma_scaled(x, xs, y, ys, acc)
        ct.store(c, index=(i, j), tile=acc)

    def arr(t) -> ArrayConstraint:
        return ArrayConstraint(dtype=t, ndim=2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                               may_alias_internally=False, stride_constant=(None, 1), shape_divisible_by=(16, 16),
                               stride_divisible_by=(16, 1), base_addr_divisible_by=16)

    sig = KernelSignature(parameters=[arr(ct.float8_e4m3fn), arr(ct.float8_e8m0fnu), arr(ct.float8_e4m3fn),
                                      arr(ct.float8_e8m0fnu), arr(ct.float32)],
                          calling_convention=CallingConvention.cutile_python_v1(), symbol="ms")
    buf = io.BytesIO()
    export_kernel(ms, [sig], buf, output_format="tileir_bytecode", bytecode_version="13.4", gpu_code=target)
    return buf.getvalue()


@pytest.fixture(scope="module")
def nvidia_ptx(tmp_path_factory) -> dict:
    """(input type or "attn", target) -> the PTX NVIDIA's tileiras hands its ptxas."""
    tool = fs.oracle("tileiras")
    root = tmp_path_factory.mktemp("nvtool")
    src_bin = os.path.dirname(tool)
    (root / "bin").mkdir()
    (root / "lib").mkdir()
    shutil.copy2(tool, root / "bin" / "tileiras")
    shutil.copy2(os.path.join(src_bin, "ptxas"), root / "bin" / "ptxas.real")
    shutil.copy2(os.path.join(src_bin, "..", "lib", "libnvvm.so.4"), root / "lib" / "libnvvm.so.4")
    wrapper = root / "bin" / "ptxas"
    wrapper.write_text(WRAPPER)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    jobs = {key: (lambda key=key, c=c: _export_matmul(key[1], key[0].split("-")[0], c[0], c[1], _tile(key)))
            for key, c in CONFIGS.items()}
    jobs.update({("attn", target): (lambda target=target: _export_attention(target)) for target in ATTN_O_BOX})
    jobs["scaled", "sm_100"] = lambda: _export_scaled("sm_100")
    out = {}
    for (ty, target), export in jobs.items():
        work = root / f"{ty}_{target}"
        work.mkdir()
        (work / "mm.tileirbc").write_bytes(export())
        env = dict(os.environ, PTX_CAPTURE_DIR=str(work))
        res = subprocess.run([str(root / "bin" / "tileiras"), "--gpu-name", target, str(work / "mm.tileirbc"),
                              "-o", str(work / "mm.cubin")], capture_output=True, text=True, timeout=300, env=env)
        assert res.returncode == 0, res.stderr
        ptx = sorted(work.glob("*.ptx"))
        assert len(ptx) == 1, f"expected one PTX file from {target}, got {ptx}"
        out[ty, target] = ptx[0].read_text()
    return out


def _tile(key: tuple) -> int:
    return SMALL if key[0].endswith("-64") else TILE


def _run(ptx: str, key: tuple, m: int, n: int, k: int, check_races: bool = True) -> tuple:
    ty = key[0].split("-")[0]
    _, out_ty, a_box, b_box, c_box = CONFIGS[key]
    rng = np.random.default_rng(7)
    # random full-precision values of the input format (f32 ones the tensor cores truncate to tf32)
    a = full_precision(rng, (m, k), NUMPY[ty]).astype(NUMPY[ty])
    b = full_precision(rng, (k, n), NUMPY[ty]).astype(NUMPY[ty])
    c = np.zeros((m, n), NUMPY[out_ty])
    mem = Memory()
    addrs = []
    for arr in (a, b, c):
        addrs.append(mem.alloc(arr.nbytes))
        mem.write(addrs[-1], arr.tobytes())
    params: list = []
    for p, arr in zip(addrs, (a, b, c)):
        params += [p, *arr.shape, *(s // arr.itemsize for s in arr.strides)]
    names = {"e4m3": "u8"}
    swizzles = ("128B", SWIZZLE_B.get(key, "128B"), "128B")
    params += [for_array(p, arr.shape, arr.strides, names.get(t, t), box, sw)
               for p, arr, t, box, sw in zip(addrs, (a, b, c), (ty, ty, out_ty), (a_box, b_box, c_box), swizzles)]
    tile = _tile(key)
    stats = run_ptx(ptx, "mm", (m // tile, n // tile, 1), (256, 1, 1), params, mem, check_races=check_races)
    got = np.frombuffer(mem.read(addrs[2], c.nbytes), c.dtype).reshape(m, n).astype(np.float64)
    return got, a.astype(np.float64) @ b.astype(np.float64), stats


def _assert_product(got: np.ndarray, ref: np.ndarray, key: tuple, m: int, n: int, k: int) -> None:
    """`got` is A @ B accumulated in f32 over K (the tf32 rounding of f32 inputs), rounded to the output type."""
    ty = key[0].split("-")[0]
    rng = np.random.default_rng(7)      # the inputs `_run` made
    a = full_precision(rng, (m, k), NUMPY[ty])
    b = full_precision(rng, (k, n), NUMPY[ty])
    assert_accumulated(got, ref, a, b.T, accumulator("f32", ty, key[1]), "tf32" if ty == "f32" else ty,
                       out=CONFIGS[key][1])


@pytest.mark.parametrize("key", sorted(CONFIGS), ids=lambda k: f"{k[0]}-{k[1]}")
def test_nvidia_matmul_matches_numpy(nvidia_ptx, key) -> None:
    ptx = nvidia_ptx[key]
    assert "cp.async.bulk.tensor" in ptx and "mbarrier.try_wait" in ptx
    assert ("wgmma.mma_async" in ptx) if key[1] == "sm_90" else ("tcgen05.mma" in ptx)
    # 2 x 2 CTAs; 7 K tiles wrap the producer/consumer rings (5 to 7 stages) so the phases flip
    tk = CONFIGS[key][0]
    m = n = 2 * _tile(key)
    got, ref, stats = _run(ptx, key, m, n, 7 * tk)
    assert stats.ctas == 4
    _assert_product(got, ref, key, m, n, 7 * tk)


@pytest.mark.parametrize("target", sorted(ATTN_O_BOX))
def test_nvidia_flash_attention_matches_numpy(nvidia_ptx, target) -> None:
    ptx = nvidia_ptx["attn", target]
    heads, d = 2, 64
    rng = np.random.default_rng(11)
    q, k, v = (full_precision(rng, (heads, ATTN_S, d), np.float16).astype(np.float16) for _ in range(3))
    o = np.zeros_like(q)
    mem = Memory()
    addrs = []
    for arr in (q, k, v, o):
        addrs.append(mem.alloc(arr.nbytes))
        mem.write(addrs[-1], arr.tobytes())
    params: list = []
    for p, arr in zip(addrs, (q, k, v, o)):
        params += [p, *arr.shape, *(s // arr.itemsize for s in arr.strides)]
    params.append(0.125)
    boxes = ((1, TILE, d), (1, 64, d), (1, 64, d), ATTN_O_BOX[target])
    params += [for_array(p, arr.shape, arr.strides, "f16", box, "128B")
               for p, arr, box in zip(addrs, (q, k, v, o), boxes)]
    run_ptx(ptx, "attn", (ATTN_S // TILE, heads, 1), (256, 1, 1), params, mem, check_races=True)
    got = np.frombuffer(mem.read(addrs[3], o.nbytes), np.float16).reshape(o.shape).astype(np.float32)
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float32), k.astype(np.float32)) * 0.125
    p = np.exp(s - s.max(-1, keepdims=True))
    pn = p / p.sum(-1, keepdims=True)
    ref = np.einsum("hqk,hkd->hqd", pn, v.astype(np.float32))
    # P is rounded to f16 before P @ V (2^-11 of each p |v|), the row sum may count it unrounded, O is rounded
    # to f16: 2^-11 each; the f32 sums of 64 (Q K^T) and ATTN_S (P V) exact products are far below that
    bound = np.einsum("hqk,hkd->hqd", pn, np.abs(v.astype(np.float32)))
    assert (np.abs(got - ref) <= 2.0 ** -10 * (bound + np.abs(ref))).all(), np.abs(got - ref).max()


def test_nvidia_block_scaled_fp8_matmul_matches_numpy(nvidia_ptx) -> None:
    # sm_100: tcgen05.mma.kind::mxf8f6f4.block_scale with scale factors that cp.async (A's) and TMA (B's) bring
    # to shared memory and tcgen05.cp ...32x128b.warpx4 copies into tensor memory
    ptx = nvidia_ptx["scaled", "sm_100"]
    assert "kind::mxf8f6f4.block_scale" in ptx and "32x128b.warpx4" in ptx
    m, n, k = 128, 256, 384
    rng = np.random.default_rng(5)
    a = full_precision(rng, (m, k), ml_dtypes.float8_e4m3fn).astype(ml_dtypes.float8_e4m3fn)
    b = full_precision(rng, (k, n), ml_dtypes.float8_e4m3fn).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.integers(122, 133, (m, k // 32)).astype(np.uint8)      # e8m0: 2^(e - 127)
    sb = rng.integers(122, 133, (k // 32, n)).astype(np.uint8)
    c = np.zeros((m, n), np.float32)
    mem = Memory()
    addrs = []
    for arr in (a, sa, b, sb, c):
        addrs.append(mem.alloc(arr.nbytes))
        mem.write(addrs[-1], arr.tobytes())
    params: list = []
    for p, arr in zip(addrs, (a, sa, b, sb, c)):
        params += [p, *arr.shape, *(s // arr.itemsize for s in arr.strides)]
    params += [for_array(addrs[0], a.shape, a.strides, "u8", (128, 128), "128B"),
               for_array(addrs[2], b.shape, b.strides, "u8", (128, 128), "128B"),
               for_array(addrs[3], sb.shape, sb.strides, "u8", (4, 128)),
               for_array(addrs[4], c.shape, c.strides, "f32", (128, 32), "128B")]
    run_ptx(ptx, "ms", (m // 128, n // 128, 1), (256, 1, 1), params, mem, check_races=True)
    got = np.frombuffer(mem.read(addrs[4], c.nbytes), np.float32).reshape(m, n)
    scaled_a = a.astype(np.float64) * np.repeat(np.exp2(sa - 127.0), 32, axis=1)
    scaled_b = b.astype(np.float64) * np.repeat(np.exp2(sb - 127.0), 32, axis=0)
    assert_accumulated(got.astype(np.float64), scaled_a @ scaled_b, scaled_a, scaled_b.T, "f32")


def _without(ptx: str, pattern: str, replacement: str = "") -> str:
    out, count = re.subn(pattern, replacement, ptx, count=1)
    assert count == 1, f"no '{pattern}' in NVIDIA's PTX"
    return out


def test_nvidia_pipeline_missing_mbarrier_wait_is_reported(nvidia_ptx) -> None:
    # the consumer's wait for the A stage (in the K loop) succeeds at once: its wgmma reads TMA data too early
    ptx = _without(nvidia_ptx["f16", "sm_90"], r"mbarrier\.try_wait\.parity\.shared\.b64 (%p\d+), \[%r\d+\], [^;]*;",
                   r"mov.pred \1, -1;")
    with pytest.raises(EmulatorError, match=r"read before the mbarrier wait: .* TMA load .* issues the "
                                            r"wgmma.mma_async"):
        _run(ptx, ("f16", "sm_90"), TILE, TILE, 4 * 64)


def test_nvidia_pipeline_releasing_a_stage_before_its_wgmma_completes_is_reported(nvidia_ptx) -> None:
    # wait_group 2 instead of 1: the consumer frees a stage whose wgmma may still read it; the producer's next
    # TMA load into that stage is not ordered after the read
    ptx = _without(nvidia_ptx["f16", "sm_90"], r"wgmma\.wait_group\.sync\.aligned\s+1;",
                   "wgmma.wait_group.sync.aligned 2;")
    with pytest.raises(EmulatorError, match=r"data race \(write-after-read\): the TMA load at line \d+ overwrites "
                                            r"shared address 0x\w+, but thread 0 read it at line \d+ "
                                            r"'wgmma.mma_async.*' and no mbarrier or barrier orders that read"):
        _run(ptx, ("f16", "sm_90"), TILE, TILE, 8 * 64)


def test_nvidia_pipeline_missing_wgmma_wait_is_reported(nvidia_ptx) -> None:
    ptx = _without(nvidia_ptx["f16", "sm_90"], r"wgmma\.wait_group\.sync\.aligned\s+0;")
    with pytest.raises(EmulatorError, match=r"register %r\d+ is written by the wgmma.mma_async at line \d+ and is "
                                            r"accessed before the wgmma.wait_group"):
        _run(ptx, ("f16", "sm_90"), TILE, TILE, 2 * 64, check_races=False)


@pytest.mark.parametrize("target", ["sm_90", "sm_100"])
def test_nvidia_pipeline_missing_proxy_fence_is_reported(nvidia_ptx, target) -> None:
    # the epilogue stores C to shared memory, fences, then a TMA store reads it: drop the first fence
    ptx = _without(nvidia_ptx["f16", target], r"fence\.proxy\.async\.shared::cta;")
    with pytest.raises(EmulatorError, match=r"missing fence.proxy.async: .* the TMA store"):
        _run(ptx, ("f16", target), TILE, TILE, 64)
    # without the race checker the same PTX still computes the product (the fence orders, it moves nothing)
    got, ref, _ = _run(ptx, ("f16", target), TILE, TILE, 64, check_races=False)
    _assert_product(got, ref, ("f16", target), TILE, TILE, 64)
