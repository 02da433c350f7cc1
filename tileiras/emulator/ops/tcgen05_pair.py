"""tcgen05 across a CTA pair (.cta_group::2): paired allocation, the pair's MMA, multicast commits.

A cluster's CTAs 2i and 2i+1 form a pair (the even one leads). What the PTX ISA specifies and this
module does:

* tcgen05.alloc.cta_group::2: one warp of each CTA of the pair allocates; both get the same columns
  (free in both tensor memories), each writes the address to its own shared memory. dealloc and
  relinquish_alloc_permit act on each CTA's own tensor memory.
* tcgen05.mma.cta_group::2, issued by one thread of the pair: A's M rows and B's N rows are split in
  halves over the pair (the first half in the lead CTA's shared memory, the second in its peer's, at
  the same descriptor addresses); D = A * B^T (+ D) lands in both tensor memories at the same address,
  each CTA holding the rows of its half of A: Layout A for M = 256 (row r of the half in lane r), Layout
  B for M = 128 (row r of the 64, column c in lane r + 64 * (c // (N/2)), column c % (N/2): the column
  halves folded onto the two 64-lane halves). The 8 disable-output-lane registers are 4 per CTA.
* tcgen05.commit ... .multicast::cluster: the completion arrives on the mbarrier at the same offset
  in each CTA of the mask.

For the race checker the MMA's reads of both CTAs' shared memory and writes of both tensor memories
belong to the issuing thread's tcgen05 operations, published by its tcgen05.commit as on one CTA.
"""

from __future__ import annotations

from typing import Any, Optional

from ..errors import DeviceFault
from ..parser import Instr


def _np() -> Any:
    import numpy as np

    return np


def _pair(st: Any, t: int, what: str) -> int:
    """The lead CTA of thread t's pair."""
    if st.rank_of is None or st.ncta < 2:
        raise DeviceFault(f"{what} with .cta_group::2 needs a cluster of CTA pairs", t)
    lead = (t // st.cta_threads) & ~1
    if lead + 1 >= st.ncta:
        raise DeviceFault(f"{what} with .cta_group::2: CTA {lead} has no peer in this cluster of {st.ncta}", t)
    return lead


def pair_ctas(st: Any, t: int, what: str) -> tuple[int, int]:
    """The cluster ranks of thread t's pair: its leader, then the peer."""
    lead = _pair(st, t, what)
    return lead, lead + 1


def pair_columns(st: Any, t: int, n: int) -> Any:
    """The first column of thread t's CTA's half of a paired allocation of n columns: the columns the
    peer took if it allocated first, else n columns free in both tensor memories (None: full)."""
    from .tcgen05 import free_columns, tmem

    lead = _pair(st, t, "tcgen05.alloc")
    rank = t // st.cta_threads
    mine, peer = tmem(st, t), tmem(st, t, 2 * lead + 1 - rank)
    for entry in peer.pair_pending:
        s, k, first, known = entry
        if k == n:
            peer.pair_pending.remove(entry)
            if free_columns(mine, n) is None or any(not (s + n <= a or a + w <= s) for a, w in mine.allocated.items()):
                raise DeviceFault(f"tcgen05.alloc.cta_group::2: the peer CTA took columns {s}..{s + n - 1}, which "
                                  "this CTA has in use", t)
            _rendezvous(st, first, known, t)
            return s
    start = free_columns(mine, n, peer)
    if start is not None:
        mine.pair_pending.append((start, n, t, _knows(st, t)))
    return start


def _warp(st: Any, t: int) -> Any:
    """The threads of the warp that starts at thread t."""
    return _np().arange(t, min(t + 32, st.n))


def _knows(st: Any, t: int) -> Any:
    """What the warp of thread t knows now (race checker: its vector clocks and tensor-memory view), or None."""
    if st.races is None:
        return None
    hb, w = st.races.hb, _warp(st, t)
    return hb.vc[w].max(axis=0), hb.tcv[w].max(axis=0)


def _rendezvous(st: Any, first: int, known: Any, t: int) -> None:
    """The two warps of a paired tcgen05.alloc allocate collectively (the PTX ISA: one warp of each CTA of the
    pair performs it together), so each one's later instructions follow the other's allocation: thread t's warp
    learns what the first warp knew at its alloc, the first warp what t's knows now. (Modelled so NVIDIA's pair
    kernels, whose MMA thread writes the peer's freshly allocated tensor memory after no other synchronization
    with the peer's allocating warp, are ordered.)"""
    if known is None or st.races is None:
        return
    np, hb = _np(), st.races.hb
    vc, tcv = known
    mine, theirs = _warp(st, t), _warp(st, first)
    now = hb.vc[mine].max(axis=0), hb.tcv[mine].max(axis=0)
    hb.vc[mine] = np.maximum(hb.vc[mine], vc)
    hb.tcv[mine] = np.maximum(hb.tcv[mine], tcv)
    hb.vc[theirs] = np.maximum(hb.vc[theirs], now[0])
    hb.tcv[theirs] = np.maximum(hb.tcv[theirs], now[1])


def multicast_keys(st: Any, key: int, mask: int, t: int) -> list[int]:
    """The mbarriers (state-buffer offsets) at the CTA-relative offset of `key` in each CTA of `mask`
    (none for 0: NVIDIA's kernels commit with an empty mask in the CTA of a pair that is not signalled)."""
    if mask >> st.ncta:
        raise DeviceFault(f"tcgen05.commit multicast mask 0x{mask:x} names CTAs outside this cluster of {st.ncta}",
                          t)
    off = key % st.smem_stride
    return [r * st.smem_stride + off for r in range(st.ncta) if mask >> r & 1]


def pair_mma(st: Any, t: int, f: dict, k: int, a_desc: int, b_desc: int, d: int, enable: bool, dis: list,
             ins: Instr, what: str, scales: Optional[tuple] = None) -> None:
    """Thread t's tcgen05.mma.cta_group::2 (A and B from shared memory), per the module's layouts.
    `scales` (block scaling: scale-A and scale-B addresses, factors per row): each CTA's tensor core
    scales its half of A's rows and the whole of B by the factors in its own tensor memory, at the
    same addresses (tcgen05.cp.cta_group::2 writes both)."""
    np = _np()
    from .tcgen05 import _cells, _scaled, _scales, _smem_operand, _track, accumulate, tmem

    ctas = pair_ctas(st, t, "tcgen05.mma")
    m, n = f["m"], f["n"]
    if m not in (128, 256):
        raise DeviceFault(f"tcgen05.mma.cta_group::2 with M = {m}: M must be 128 or 256", t)
    if d >> 16:
        raise DeviceFault(f"tcgen05.mma.cta_group::2 D must start at lane 0, not lane {d >> 16}", t)
    (aty, aes), (bty, bes) = f["a"], f["b"]
    hm, hn = m // 2, n // 2
    A = np.concatenate([_smem_operand(st, a_desc, hm, k, aty, aes, not f["trans_a"], t, what, ins, cta=p)
                        for p in ctas])
    B = np.concatenate([_smem_operand(st, b_desc, hn, k, bty, bes, not f["trans_b"], t, what, ins, cta=p)
                        for p in ctas])
    if "e2m1" in (aty, bty):
        raise DeviceFault("tcgen05.mma.cta_group::2 on 4-bit operands is not supported by the emulator", t)
    A, B = (-A if f["neg_a"] else A), (-B if f["neg_b"] else B)
    if scales is None:
        D = A @ B.T
    else:
        sfa, sfb, vec = scales
        D = np.concatenate([
            _scaled(A[hm * i:hm * (i + 1)], _scales(st, sfa, hm, f["sf_a"], vec, f["scale"], t, ins, cta=p))
            @ _scaled(B, _scales(st, sfb, n, f["sf_b"], vec, f["scale"], t, ins, cta=p)).T
            for i, p in enumerate(ctas)])
    col0 = d & 0xFFFF
    r = np.arange(hm)[:, None]
    c = np.arange(n)[None, :]
    if m == 256:        # Layout A
        lanes, cols = np.broadcast_to(r, (hm, n)), np.broadcast_to(col0 + c, (hm, n))
    else:               # Layout B: the column halves on the two 64-lane halves
        lanes, cols = np.broadcast_arrays(r + 64 * (c // hn), col0 + c % hn)
    for i, p in enumerate(ctas):
        _cells(st, 0, col0, 128, int(cols.max()) - col0 + 1, t, "tcgen05.mma D", cta=p)
        tm = tmem(st, t, p)
        out = accumulate(f, D[hm * i:hm * (i + 1)], tm.cells[lanes, cols] if enable else None)
        keep = np.ones(lanes.shape, dtype=bool)
        if dis:
            bits = np.array(dis[4 * i:4 * i + 4], dtype=np.uint64)
            keep = ((bits[lanes // 32] >> (lanes % 32).astype(np.uint64)) & 1) == 0
        if st.races is not None:    # written when the issuing thread's next tcgen05.commit completes
            _track(st, lanes[keep], cols[keep], t, True, ins, ("tcgen05", t), cta=p)
        tm.cells[lanes[keep], cols[keep]] = out[keep]
