"""Which register values are defined: undefined state that reaches an output or a decision is reported.

Registers start undefined (and hold a poison value, `executor.POISON_BYTE`); special registers are
defined. A register an instruction writes (`program.Writer`) is defined in a thread exactly when
every register the instruction read was (the decoder records what each instruction reads:
`Program.flow`), except the accumulators of a wgmma whose scale-d is false, which it does not read;
writes made later on an instruction's behalf (bar.red's result) are defined.
A thread that stores an undefined register (st, red, atom, stmatrix to any space but local and
param) or branches on an undefined predicate is reported, naming the never-written register the
value came from. Shared memory bytes no instruction wrote are reported where they are read
(`races.py`); tensor-memory cells no instruction wrote where tcgen05.mma accumulates on them or
reads them as A, while tcgen05.ld only passes their undefinedness on to its registers
(`ops/tcgen05.py`: attention kernels load and rescale an O the first P@V then overwrites; what
tcgen05.st stores counts as written, defined or not, since such a rescale may feed an undefined
O through max/select that drop it). A register packed from a defined and an undefined part (LLVM's
vectors) is defined in the bytes that came from defined parts, for the prmt and unpacking movs
that take them apart (`byte_flow`).

Definedness is kept per register as True (every thread), False (none) or a bool vector, so that
the common case costs a few identity tests per instruction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .errors import DeviceFault

# opcodes whose register operands after the address are values leaving the thread (an output)
STORES = {"st": 1, "red": 1, "atom": 2, "stmatrix": 1, "st.async": 1, "red.async": 1}
PRIVATE_SPACES = ("local", "param", "param::func", "param::entry")


@dataclass(frozen=True)
class Flow:
    """What one decoded step reads and writes (register indices)."""

    srcs: tuple
    dsts: tuple
    sinks: tuple = ()                    # registers whose values it stores (must be defined)
    optional: tuple = ()                 # sources read only when `when` (a pred reader) holds
    when: Any = None
    uses: tuple = ()                     # (source, byte mask it reads) where only some bytes are read (prmt)
    pack: tuple = ()                     # mov d, {a, b..}: (d, ((a, byte mask of d it fills), ...))
    unpack: tuple = ()                   # mov {a, b..}, s: (s, ((a, byte mask of s it takes), ...))


def sinks_of(ins: Any, regs_in: Any) -> tuple:
    """The registers whose values a store-like instruction `ins` sends to memory."""
    first = STORES.get(ins.opcode)
    if first is None or any(m in PRIVATE_SPACES for m in ins.mods):
        return ()
    return tuple(sorted(set().union(*(regs_in(op) for op in ins.operands[first:])))) if ins.operands else ()


def byte_flow(ins: Any, reg_of: Any, bits_of: Any) -> dict:
    """The byte-level parts of an instruction's flow (`Flow.uses/pack/unpack`): LLVM packs a defined value
    with an undefined one into a wider register and extracts only the defined bytes (prmt, unpacking
    movs), which register-level definedness would report."""
    from .parser import Imm, Vec

    ops = ins.operands
    if ins.opcode == "mov" and len(ops) == 2 and (isinstance(ops[0], Vec) != isinstance(ops[1], Vec)):
        vec, other = (ops[1], ops[0]) if isinstance(ops[1], Vec) else (ops[0], ops[1])
        whole, parts = reg_of(other), []
        if whole is None:
            return {}
        width = bits_of(whole) // 8 // len(vec.items)     # the items split the whole evenly (`_` too)
        for k, item in enumerate(vec.items):
            r = reg_of(item)
            if r is not None:
                parts.append((r, ((1 << width) - 1) << (k * width)))
        if not parts:
            return {}
        return {"pack": (whole, tuple(parts))} if isinstance(ops[1], Vec) else {"unpack": (whole, tuple(parts))}
    if ins.opcode == "prmt" and list(ins.mods) == ["b32"] and len(ops) == 4 and isinstance(ops[3], Imm):
        a, b, sel = reg_of(ops[1]), reg_of(ops[2]), ops[3].value
        picks = [(sel >> (4 * i)) & 7 for i in range(4)]
        uses = []
        for r, lo in ((a, 0), (b, 4)):
            mask = sum(1 << (p - lo) for p in picks if lo <= p < lo + 4)
            if r is not None:
                uses.append((r, mask))
        return {"uses": tuple(uses)}
    return {}


def initial(prog: Any) -> list:
    """Definedness of every register when a CTA starts."""
    specials = set(prog.specials.values())
    return [i in specials for i in range(len(prog.reg_bits))]


def _and(a: Any, b: Any) -> Any:
    if a is True:
        return b
    if b is True or a is False:
        return a
    if b is False:
        return False
    return a & b


def _lanes(np: Any, v: Any, n: int) -> Any:
    if v is True or v is False:
        return np.full(n, v)
    return v


def tracked(fn: Any, flow: Flow, names: list) -> Any:
    """`fn` of a step, its writes marked defined where every register it reads is (`mark`)."""
    step = _tracked(fn, flow, names)
    srcs = flow.srcs
    if flow.sinks or flow.optional or flow.uses or flow.pack or flow.unpack:
        return step
    # the common case, every register it reads defined in every thread: straight to `fn` (runs for every
    # instruction, so without a loop where there are one or two sources)
    if len(srcs) == 1:
        a, = srcs

        def one(st: Any, m: Any) -> Any:
            return fn(st, m) if st.defined[a] is True else step(st, m)

        return one
    if len(srcs) == 2:
        a, b = srcs

        def two(st: Any, m: Any) -> Any:
            D = st.defined
            return fn(st, m) if D[a] is True and D[b] is True else step(st, m)

        return two

    def many(st: Any, m: Any) -> Any:
        D = st.defined
        for r in srcs:
            if D[r] is not True:
                return step(st, m)
        return fn(st, m)

    return many


def _tracked(fn: Any, flow: Flow, names: list) -> Any:
    srcs, sinks, optional, when = flow.srcs, flow.sinks, flow.optional, flow.when
    partly = {s: mask for s, mask in flow.uses}
    if flow.unpack:
        partly = {flow.unpack[0]: 0}        # each destination gets its own bytes: see below

    def step(st: Any, m: Any) -> Any:
        D = st.defined
        for r in sinks:
            if D[r] is not True:
                _report_sink(st, m, r, names)
        d: Any = True
        for s in srcs:
            v = D[s]
            if v is not True and s in partly and partly[s] & ~st.partial.get(s, 0) == 0:
                continue                    # only bytes some instruction defined are read
            d = _and(d, v)
            if d is False:
                break
        if optional and d is not False and _holds(st, m, when):
            for s in optional:
                d = _and(d, D[s])
        if d is True and not flow.pack and not flow.unpack:
            return fn(st, m)
        st.cur_def, st.cur_origin = d, _origin(st, srcs + optional, names)
        try:
            out = fn(st, m)
        finally:
            st.cur_def = True
        if flow.pack:
            _packed(st, m, flow.pack, d)
        elif flow.unpack:
            _unpacked(st, m, flow.unpack, names)
        return out

    return step


def _packed(st: Any, m: Any, pack: tuple, d: Any) -> None:
    """mov d, {a, b..}: where some parts are defined in every thread and the others in none, d is partly
    defined (`st.partial`: the byte mask of its defined bytes)."""
    whole, parts = pack
    if d is True:
        return
    states = [v if v is True or v is False else (True if v.all() else False if not v.any() else v)
              for v in (st.defined[r] for r, _ in parts)]
    if all(v is True or v is False for v in states):
        mask = sum(byte for (r, byte), v in zip(parts, states) if v is True)
        if mask:
            st.partial[whole] = mask


def _unpacked(st: Any, m: Any, unpack: tuple, names: list) -> None:
    """mov {a, b..}, s: each destination is defined where the bytes it takes from s are."""
    whole, parts = unpack
    v = st.defined[whole]
    for r, byte in parts:
        ok = v is True or byte & ~st.partial.get(whole, 0) == 0
        saved = st.cur_def
        st.cur_def = True if ok else v
        mark(st, r, m)
        st.cur_def = saved


def mark(st: Any, idx: int, m: Any, lanes: Any = None) -> None:
    """Register `idx` was written in threads `m` (a mask, None: all) or `lanes` (indices): defined there as
    far as what the current step read was (`st.cur_def`)."""
    if st.partial:
        st.partial.pop(idx, None)
    d, old = st.cur_def, st.defined[idx]
    if m is None and lanes is None or d is old:
        st.defined[idx] = d
    else:
        np = st.np
        sel = m if lanes is None else np.zeros(st.n, dtype=bool)
        if lanes is not None:
            sel[lanes] = True
        if d is True:           # (what np.where(sel, d, old) gives, in one step for the usual cases)
            v = sel.copy() if old is False else sel | old
        elif d is False:
            v = ~sel if old is True else old & ~sel
        else:
            v = np.where(sel, d, _lanes(np, old, st.n))
        # back to the fast form once every thread has it
        st.defined[idx] = True if np.count_nonzero(v) == st.n else v
    if d is not True:
        st.undef_origin.setdefault(idx, st.cur_origin)


def _holds(st: Any, m: Any, when: Any) -> bool:
    np = st.np
    v = np.asarray(when(st))
    if v.ndim == 0:
        return bool(v)
    lanes = np.flatnonzero(m) if m is not None else np.arange(st.n)
    return bool(v[lanes].any()) if lanes.size else False


def _origin(st: Any, srcs: tuple, names: list) -> str:
    for s in srcs:
        if st.defined[s] is not True:
            return st.undef_origin.get(s, names[s])
    return "?"


def undefined_lanes(st: Any, m: Any, v: Any) -> Any:
    """Threads of `m` (None: all) in which definedness `v` is false."""
    np = st.np
    bad = ~_lanes(np, v, st.n)
    return bad if m is None else bad & m


def _report_sink(st: Any, m: Any, r: int, names: list) -> None:
    bad = undefined_lanes(st, m, st.defined[r])
    if not bad.any():
        return
    origin = st.undef_origin.get(r, names[r])
    raise DeviceFault(f"undefined value stored: {names[r]} holds a value computed from {origin}, which no "
                      "instruction wrote in this thread", int(st.np.argmax(bad)))


def check_branch(st: Any, m: Any, gid: int, names: list) -> None:
    """A branch decided by predicate `gid` in threads `m`: the predicate must be defined."""
    bad = undefined_lanes(st, m, st.defined[gid])
    if bad.any():
        origin = st.undef_origin.get(gid, names[gid])
        raise DeviceFault(f"branch on an undefined predicate: {names[gid]} is computed from {origin}, which no "
                          "instruction wrote in this thread", int(st.np.argmax(bad)))


def checked_code(prog: Any) -> list:
    """The program's steps with definedness tracking (built once per program)."""
    cached: Optional[list] = getattr(prog, "_checked_code", None)
    if cached is not None:
        return cached
    out = []
    for (kind, fn, gid, gneg, aux), flow in zip(prog.code, prog.flow):
        if fn is not None and flow is not None and (flow.srcs or flow.optional or flow.sinks or flow.pack):
            fn = tracked(fn, flow, prog.reg_names)
        out.append((kind, fn, gid, gneg, aux))
    prog._checked_code = out
    return out
