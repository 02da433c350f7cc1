"""What must be done before a CTA exits (checked when the last of its threads has exited).

* Tensor memory it allocated is deallocated (tcgen05.dealloc): the PTX ISA leaves a kernel that
  exits with columns allocated undefined, and the next CTA on the SM may wait for them forever.
* Its bulk and TMA stores (cp.async.bulk from shared memory) have finished reading shared memory
  (cp.async.bulk.wait_group.read or wait_group): the CTA's shared memory goes away when it exits.
  This one needs the race checker, which follows those reads (`happens_before.Clocks.pending`).
"""

from __future__ import annotations

from typing import Any

from .errors import EmulatorError


def check_exit(st: Any) -> None:
    for rank, tm in enumerate(st.tmem or []):
        if tm.allocated:
            start, n = min(tm.allocated.items())
            cta = "(" + ",".join(map(str, st.ctaids[rank])) + ")"
            raise EmulatorError(f"block {cta} exits with tensor-memory columns {start}..{start + n - 1} still "
                                "allocated: tcgen05.dealloc what tcgen05.alloc took before the CTA exits")
    if st.races is None:
        return
    hb = st.races.hb
    for owner, idx, tid in hb.pending:
        if owner[0] == "bulk" and len(idx):
            line = int(hb.rline[1, idx[0]])
            raise EmulatorError(f"block {st.block_id} exits while the bulk copy issued by thread {tid} at line {line} "
                                f"'{hb.texts.get(line, '?')}' may still be reading its shared memory: "
                                "cp.async.bulk.wait_group.read must wait for it before the CTA exits")
