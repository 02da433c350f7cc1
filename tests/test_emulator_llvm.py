"""PTX emulator on LLVM's own NVPTX output (tests/data/ptx/*.ll, compiled here for sm_80 and sm_90),
checked against numpy."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from tileiras.emulator.host import emulate
from tileiras.emulator.parser import parse_module

DATA = Path(__file__).resolve().parent / "data"
TARGETS = ("sm_80", "sm_90")


@lru_cache(maxsize=None)
def ptx_of(name: str, cpu: str) -> str:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    machine = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(cpu=cpu, features="+ptx80",
                                                                                   opt=3)
    module = llvm.parse_assembly((DATA / name).read_text())
    return machine.emit_assembly(module)


@pytest.mark.parametrize("cpu", TARGETS)
def test_intrinsics_grab_bag(cpu: str) -> None:
    rng = np.random.default_rng(11)
    n = 64
    xs = rng.integers(-2**31, 2**31, n + 1, dtype=np.int64).astype(np.int32)
    xs[3], xs[4] = 0, -2**31
    fs = rng.uniform(-10, 10, n + 1).astype(np.float32)
    fs[5], fs[7] = np.nan, -0.0
    ds = rng.uniform(0, 100, n)
    (o, *_), _ = emulate(ptx_of("ptx/intrinsics.ll", cpu), "grab", (1, 1, 1), (n, 1, 1),
                         [np.zeros(n * 32, np.int32), xs, fs, ds])
    o = o.reshape(n, 32).view(np.uint32)
    x, y = xs[:n].astype(np.int64), xs[1:].astype(np.int64)
    ux, uy = x & 0xFFFFFFFF, y & 0xFFFFFFFF
    f, g = fs[:n], fs[1:]
    sh = uy & 31
    ynz = y | 1

    def u(v: object) -> np.ndarray:
        return np.array([int(a) & 0xFFFFFFFF for a in np.asarray(v).tolist()], dtype=np.uint32)

    def bits(v: object) -> np.ndarray:
        return np.asarray(v, dtype=np.float32).view(np.uint32)

    def trunc_div(a: int, b: int) -> int:
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q

    fi = np.where(np.isnan(f), 0, np.trunc(f)).astype(np.int64)
    fu = np.where(np.isnan(f), 0, np.trunc(np.abs(f))).astype(np.int64)
    with np.errstate(all="ignore"):
        expected = [
            [bin(v).count("1") for v in ux], [32 - int(v).bit_length() for v in ux],
            [32 if v == 0 else (int(v) & -int(v)).bit_length() - 1 for v in ux],
            [int(f"{int(v):032b}"[::-1], 2) for v in ux],
            [int.from_bytes(int(v).to_bytes(4, "little"), "big") for v in ux],
            [((int(a) << int(s)) | (int(b) >> (32 - int(s)))) if s else int(a) for a, b, s in zip(ux, uy, sh)],
            [((int(b) >> int(s)) | (int(a) << (32 - int(s)))) if s else int(b) for a, b, s in zip(ux, uy, sh)],
            np.maximum(x, y), np.minimum(ux, uy), np.abs(x),
            [trunc_div(int(a), int(b)) for a, b in zip(x, ynz)],
            [int(a) - int(b) * trunc_div(int(a), int(b)) for a, b in zip(x, ynz)],
            ux // (ynz & 0xFFFFFFFF), ux % (ynz & 0xFFFFFFFF), x >> sh, ux >> sh, ux << sh, (x * uy) >> 32,
            bits((f.astype(np.float64) * g + 1.5).astype(np.float32)), bits(np.sqrt(np.abs(f))),
            bits(np.fmin(f, g)), bits(np.fmax(f, g)), bits(np.floor(f)), bits(np.ceil(f)), bits(np.trunc(f)),
            bits(np.rint(f)), fi + fu, bits(f / g), bits((np.sqrt(ds) + ds).astype(np.float32)),
            np.where(np.isnan(f) | np.isnan(g), 7, np.where(f < g, x, y)),
            (f.astype(np.float16) * f.astype(np.float16)).view(np.uint16), bits(np.copysign(g, f)),
        ]
    for k, exp in enumerate(expected):
        np.testing.assert_array_equal(o[:, k], u(exp), err_msg=f"column {k}")


@pytest.mark.parametrize("cpu", TARGETS)
@pytest.mark.parametrize("n,blocks", [(1000, 2), (37, 1), (5000, 3)])
def test_block_reduction(cpu: str, n: int, blocks: int) -> None:
    rng = np.random.default_rng(n)
    data = rng.integers(-50, 50, n).astype(np.float32)     # integers: every summation order agrees
    (_, out), stats = emulate(ptx_of("ptx/reduce.ll", cpu), "reduce", (blocks, 1, 1), (256, 1, 1),
                              [data, np.zeros(blocks, np.float32), np.int32(n)])
    exp = [data[np.arange(n) % (256 * blocks) // 256 == b].sum() for b in range(blocks)]
    np.testing.assert_array_equal(out, np.array(exp, np.float32))
    assert stats.ctas == blocks and stats.warp_instructions > 0


def _steps(x: int) -> int:
    c = 0
    while x > 1:
        x = 3 * x + 1 if x & 1 else x >> 1
        c += 1
    return c


@pytest.mark.parametrize("cpu", TARGETS)
def test_control_flow_calls_locals_atomics(cpu: str) -> None:
    n = 96
    k = 0x0123456789ABCDEF
    (out, fmax, cnt), _ = emulate(ptx_of("ptx/control.ll", cpu), "control", (1, 1, 1), (n, 1, 1),
                                  [np.zeros(n * 8, np.int32), np.zeros(1, np.float32), np.zeros(1, np.uint32),
                                   np.uint64(k)])
    out = out.reshape(n, 8)
    t = np.arange(n)
    np.testing.assert_array_equal(out[:, 0], [_steps(v + 1) for v in t])
    np.testing.assert_array_equal(out[:, 1], np.where(t % 7 < 5, 100 + t % 7, -1))
    np.testing.assert_array_equal(out[:, 2], (t & 15) * (t + 1))
    prod = [k * (v + 1) for v in t]
    np.testing.assert_array_equal(out[:, 3].view(np.uint32), [(p >> 64) & 0xFFFFFFFF for p in prod])
    np.testing.assert_array_equal(out[:, 4].view(np.uint32), [p & 0xFFFFFFFF for p in prod])
    assert fmax[0] == 6 * 1.5
    assert cnt[0] == n * (n + 1) // 2
    np.testing.assert_array_equal(out[:, 5], np.cumsum(t + 1) - (t + 1))
    h = np.stack([t.astype(np.float16) * t.astype(np.float16) + np.float16(0.5),
                  np.full(n, 3.0, np.float16)], axis=1)
    np.testing.assert_array_equal(out[:, 6].view(np.uint32), h.view(np.uint32).reshape(-1))
    np.testing.assert_array_equal(out[:, 7], n * (n + 1) // 2)


def test_lead_kernels_from_tests_data_llvm() -> None:
    """The repository's hand-written LLVM kernels (tests/data/llvm) run as well."""
    ptx = ptx_of("llvm/vadd.ll", "sm_90")
    n = 1000
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 0.25, np.float32)
    (_, _, c), _ = emulate(ptx, "vadd", ((n + 127) // 128, 1, 1), (128, 1, 1), [a, b, np.zeros(n, np.float32),
                                                                                 np.int32(n)])
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("name", ["ptx/intrinsics.ll", "ptx/reduce.ll", "ptx/control.ll", "llvm/vadd.ll",
                                  "llvm/scalars.ll", "llvm/allparams.ll", "llvm/vadd_debug.ll"])
def test_llvm_output_parses_with_debug_info_and_every_target(name: str) -> None:
    for cpu in TARGETS:
        mod = parse_module(ptx_of(name, cpu))
        assert any(f.kind == "entry" for f in mod.functions.values())
