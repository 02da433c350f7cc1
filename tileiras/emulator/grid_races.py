"""Races between the CTAs (or clusters) of a launch on global memory (part of the race checker).

`races.py` checks the threads of one scheduling unit (a CTA, or the CTAs of one cluster run as one
state). Units of a grid are not ordered by any barrier: two of them touching the same global byte,
at least one writing it with a plain (weak) access, race unless the first published what it did
through an atomic or strong access the second observed through one of its own (a flag or a
counter with release/acquire semantics, or the atomics of split-K). The executor runs two units
at once (`executor.run_ptx`), so such races also change values; this module reports them even
when the schedule happens to hide them.

Each unit has a vector clock over the units. Every atomic or strong access acquires everything
released so far (one board for the whole grid, keyed by nothing: generous, so that no correct
handshake is reported, at the price of missing a handshake made on the wrong address) and then
releases the unit's clock. Every global byte remembers its last plain writer and last plain reader
(unit, the unit's clock at the access, PTX line): a plain access must be ordered after the other
units' plain write, and a plain write after their plain read.
"""

from __future__ import annotations

from typing import Any

from .errors import DeviceFault
from .memory import GLOBAL_BASE


class GridRaces:
    def __init__(self, np: Any, units: list[str], texts: dict) -> None:
        self.np = np
        self.names = units                                   # how a unit is named in reports (its block)
        self.board = np.zeros(len(units), dtype=np.int64)    # clocks released by atomic/strong accesses
        self.rows: dict[int, Any] = {}                       # vector clock of each unit in flight
        self.texts = texts
        self.size = 0
        # per global byte: the last plain writer's and reader's unit + 1 (0: none), its clock, the PTX line; grown
        # with zeros, which the OS hands out lazily, so a large heap costs only the bytes accessed
        self.wunit = self.wclk = self.wline = self.runit = self.rclk = self.rline = np.zeros(0, np.int64)

    def start(self, unit: int) -> None:
        row = self.np.zeros(len(self.names), dtype=self.np.int64)
        row[unit] = 1
        self.rows[unit] = row

    def finish(self, unit: int) -> None:
        self.rows.pop(unit, None)

    def _grow(self, size: int) -> None:
        np = self.np
        if size <= self.size:
            return
        old = self.size
        for name in ("wunit", "runit", "wclk", "rclk", "wline", "rline"):
            a = np.zeros(size, dtype=np.int64)
            a[:old] = getattr(self, name)
            setattr(self, name, a)
        self.size = size

    def access(self, unit: int, write: bool, strong: bool, line: int, idx: Any, tid: int, size: int,
               does: str, ix: Any = None) -> None:
        """Unit `unit` accesses global bytes `idx` (offsets in the heap of `size` bytes; indexed as `ix`, the
        same or a slice naming them)."""
        np = self.np
        self._grow(size)
        row = self.rows[unit]
        if strong:          # acquire what every unit published so far
            np.maximum(row, self.board, out=row)
        ix = idx if ix is None else ix
        self._against(row, unit, idx, ix, self.wunit, self.wclk, self.wline, "wrote", "read-after-write"
                      if not write else "write-after-write", tid, does, line)
        if write and not strong:
            self._against(row, unit, idx, ix, self.runit, self.rclk, self.rline, "read", "write-after-read", tid,
                          does, line)
        if strong:          # publish, then move on: later plain accesses are not published yet
            np.maximum(self.board, row, out=self.board)
            row[unit] += 1
            return
        clock = row[unit]
        if write:
            self.wunit[ix], self.wclk[ix], self.wline[ix] = unit + 1, clock, line
        else:
            self.runit[ix], self.rclk[ix], self.rline[ix] = unit + 1, clock, line

    def _against(self, row: Any, unit: int, idx: Any, ix: Any, who: Any, clk: Any, lines: Any, did: str,
                 kind: str, tid: int, does: str, line: int) -> None:
        np = self.np
        other = who[ix] - 1
        bad = (other >= 0) & (other != unit)
        if not np.count_nonzero(bad):
            return
        bad &= row[np.where(bad, other, 0)] < clk[ix]
        if not np.count_nonzero(bad):
            return
        i = int(np.argmax(bad))
        b = int(idx[i])
        at = int(lines[b])
        raise DeviceFault(f"data race between CTAs ({kind}): block {self.names[int(other[i])]} {did} global "
                          f"address 0x{b + GLOBAL_BASE:x} at line {at} '{self.texts.get(at, '?')}' and block "
                          f"{self.names[unit]} {does} at line {line} with no atomic or strong access ordering "
                          "them (blocks of a grid run concurrently)", tid)
