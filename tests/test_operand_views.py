"""One staged tile read by two mmas, as it is and transposed (tileaa/mma_operands.py): attention's
backward pass reads its keys in S = Q K^T and again in dQ = dS K. The tile stays in one shared buffer
that both mmas read, each its own way (ldmatrix with and without .trans; wgmma and tcgen05.mma
descriptors with their own transpose bits), on every target; the emulator (race checker on) agrees
with numpy."""

from __future__ import annotations

import sys
from pathlib import Path

import cuda.tile as ct
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_tile_layer import _array, _entry, _export, _ptx  # noqa: E402


@ct.kernel
def keys_twice(q, keys, s_out, o_out, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """S = Q K^T, then O = S K: `keys` is read transposed by the first mma and as it is by the second."""
    bm = ct.bid(0)
    x = ct.load(q, index=(bm, 0), shape=(TM, TK))
    y = ct.load(keys, index=(0, 0), shape=(TN, TK))
    s = ct.mma(x, ct.transpose(y), ct.zeros((TM, TN), dtype=ct.float32))
    o = ct.mma(s.astype(ct.float16), y, ct.zeros((TM, TK), dtype=ct.float32))
    ct.store(s_out, index=(bm, 0), tile=s)
    ct.store(o_out, index=(bm, 0), tile=o)


def _kernel(tm: int, tn: int, tk: int) -> bytes:
    from cuda.tile.compilation import ConstantConstraint

    return _export(keys_twice, [_array(ct.float16, 2), _array(ct.float16, 2), _array(ct.float32, 2),
                                _array(ct.float32, 2), ConstantConstraint(tm), ConstantConstraint(tn),
                                ConstantConstraint(tk)])


# target -> what both mmas must be (the tensor-core form of the target, never a register round trip)
FORMS = {"sm_80": "mma.sync.aligned.m16n8k16", "sm_90": "wgmma.mma_async", "sm_100": "tcgen05.mma",
         "sm_120": "mma.sync.aligned.m16n8k16"}


@pytest.mark.parametrize("gpu", list(FORMS))
def test_a_tile_read_both_ways_stays_in_one_buffer(gpu: str, tmp_path: Path) -> None:
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    data = _kernel(128, 64, 64)
    ptx = _ptx(data, gpu, tmp_path)
    assert FORMS[gpu] in ptx
    if gpu in ("sm_80", "sm_120"):   # the keys by ldmatrix both ways, never stored from registers first
        assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx and "st.shared.v4" not in ptx
    rng = np.random.default_rng(2)
    q, keys = rng.standard_normal((256, 64)).astype(np.float16), rng.standard_normal((64, 64)).astype(np.float16)
    module = load_module(data, "k.tileirbc")
    s, o = run_arrays(module, _entry(module), (2, 1, 1), [q, keys, np.zeros((256, 64), np.float32),
                                                          np.zeros((256, 64), np.float32)],
                      backend="emulator", gpu_name=gpu, check_races=True)[2:]
    ref_s = q.astype(np.float64) @ keys.astype(np.float64).T
    assert np.abs(s - ref_s).max() < 1e-3
    ref_o = s.astype(np.float16).astype(np.float64) @ keys.astype(np.float64)
    assert np.abs(o - ref_o).max() <= 2e-3 * np.abs(ref_o).max()
