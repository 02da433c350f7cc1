"""NVIDIA's own cluster PTX in our emulator: the strong check of clusters, multicast TMA and CTA pairs.

TileGym's persistent matmul at 128x512x64 asks for 4 CTAs per tile block (`.reqnctapercluster 4`,
`.blocksareclusters`). NVIDIA's tileiras compiles it, for sm_90, as a 2x2 split of the tile with
multicast TMA (A shared by the CTAs of one M half, B by those of one N half, each CTA loading half of
each shared box and multicasting it) and, for sm_100, as two CTA pairs (tcgen05.mma.cta_group::2,
paired tensor memory, cta_group::2 TMA loads completing on the pair leader's mbarrier through the
peer-bit mask, multicast commits). Its PTX is captured at test time from a private copy of its bin
folder whose `ptxas` copies the PTX aside (never committed), run over whole clusters with the race
checker on, and compared with numpy. A wait removed must be reported.

The tensor-map boxes are read off NVIDIA's PTX (copy coordinates, shared offsets, expect_tx counts):
sm_90 A and B (32, 64) (half of each shared 64-row box per CTA), C (64, 64); sm_100 A (32, 64), B and
C (64, 64); all 128-byte swizzled f16.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tileiras.emulator import EmulatorError, Memory, run_ptx
from tileiras.codegen.tensormap import for_array

sys.path.insert(0, os.path.dirname(__file__))
import frontend_samples as fs  # noqa: E402

pytestmark = [pytest.mark.sweep,
              pytest.mark.skipif(fs.oracle("tileiras") is None, reason="NVIDIA's tileiras is not installed")]

NAME = "tg_matmul_persistent_f16_128x512x64"
BYTECODE = Path(__file__).resolve().parent / "tilegym" / "bytecode" / f"{NAME}.tileirbc"
BOXES = {"sm_90": ((32, 64), (32, 64), (64, 64)), "sm_100": ((32, 64), (64, 64), (64, 64))}
WRAPPER = """#!/bin/sh
for a in "$@"; do case "$a" in *.ptx) cp "$a" "$PTX_CAPTURE_DIR/" ;; esac; done
exec "$(dirname "$0")/ptxas.real" "$@"
"""


@pytest.fixture(scope="module")
def nvidia_ptx(tmp_path_factory) -> dict:
    """target -> the PTX NVIDIA's tileiras hands its ptxas for the persistent matmul."""
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
    out = {}
    for target in BOXES:
        work = root / target
        work.mkdir()
        env = dict(os.environ, PTX_CAPTURE_DIR=str(work))
        res = subprocess.run([str(root / "bin" / "tileiras"), "--gpu-name", target, str(BYTECODE), "-o",
                              str(work / "mm.cubin")], capture_output=True, text=True, timeout=300, env=env)
        assert res.returncode == 0, res.stderr
        ptx = sorted(work.glob("*.ptx"))
        assert len(ptx) == 1, f"expected one PTX file from {target}, got {ptx}"
        out[target] = ptx[0].read_text()
    return out


def _run(ptx: str, target: str, m: int, n: int, k: int) -> tuple:
    from accumulation import full_precision

    rng = np.random.default_rng(7)
    a = full_precision(rng, (m, k), np.float16).astype(np.float16)     # random full-precision f16 values
    b = full_precision(rng, (k, n), np.float16).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    mem = Memory()
    addrs = []
    for arr in (a, b, c):
        addrs.append(mem.alloc(arr.nbytes))
        mem.write(addrs[-1], arr.tobytes())
    params: list = []
    for p, arr in zip(addrs, (a, b, c)):
        params += [p, *arr.shape, *(s // arr.itemsize for s in arr.strides)]
    params += [m, n, k]
    params += [for_array(p, arr.shape, arr.strides, "f16", box, "128B")
               for p, arr, box in zip(addrs, (a, b, c), BOXES[target])]
    stats = run_ptx(ptx, NAME, (1, 1, 1), (256, 1, 1), params, mem, check_races=True)
    got = np.frombuffer(mem.read(addrs[2], c.nbytes), np.float16).reshape(m, n).astype(np.float64)
    return got, a.astype(np.float64) @ b.astype(np.float64), stats


def _assert_product(got: np.ndarray, want: np.ndarray, m: int, n: int, k: int) -> None:
    """`got`: the f32 sum of K products of `_run`'s inputs, rounded to f16."""
    from accumulation import assert_accumulated, full_precision

    rng = np.random.default_rng(7)
    a, b = full_precision(rng, (m, k), np.float16), full_precision(rng, (k, n), np.float16)
    assert_accumulated(got, want, a, b.T, "f32", out="f16")


@pytest.mark.parametrize("target", ["sm_90", "sm_100"])
def test_nvidia_cluster_matmul_matches_numpy(nvidia_ptx, target: str) -> None:
    ptx = nvidia_ptx[target]
    assert ".reqnctapercluster 4" in ptx and "barrier.cluster.wait" in ptx and "multicast::cluster" in ptx
    if target == "sm_100":
        assert "tcgen05.mma.cta_group::2" in ptx and "mapa.shared::cluster" in ptx
    # partial tiles in M and N, one cluster looping over 2 x 2 tile blocks
    got, want, stats = _run(ptx, target, 208, 784, 192)
    assert stats.ctas == 4
    _assert_product(got, want, 208, 784, 192)


@pytest.mark.parametrize("target", ["sm_90", "sm_100"])
def test_nvidia_cluster_matmul_without_its_full_barrier_wait_is_reported(nvidia_ptx, target: str) -> None:
    """The MMA issuer's wait for the TMA loads of a stage (the last mbarrier wait before the first MMA)
    removed: the MMA reads multicast (sm_90) or pair-loaded (sm_100) bytes no wait published."""
    ptx = nvidia_ptx[target]
    first_mma = ptx.index("wgmma.mma_async" if target == "sm_90" else "tcgen05.mma.cta_group::2")
    waits = list(re.finditer(r"mbarrier\.try_wait\.parity\.shared\.b64\s+(%p\d+),[^;]*;", ptx[:first_mma]))
    assert waits
    w = waits[-1]
    ptx = ptx[:w.start()] + f"mov.pred {w.group(1)}, -1;" + ptx[w.end():]
    with pytest.raises(EmulatorError, match="read before the mbarrier wait|data race"):
        _run(ptx, target, 128, 512, 128)
