"""Decode a parsed PTX kernel once into a flat list of executable steps.

Every function body reachable from the kernel is laid out in one code list
(the kernel first); labels become indices. Each instruction becomes a tuple
`(kind, fn, guard_reg, guard_negated, aux)`: `fn(state, mask)` acts on all
threads of a CTA at once, with `mask` None (every thread) or a bool vector.
Registers hold raw bits (uint8/16/32/64 or bool for predicates); readers
reinterpret them in the instruction's type, writers extend/truncate to the
register's declared width, as PTX's operand-size rules say.

Decoding raises `EmulatorError` for anything it does not know: an unknown
opcode or modifier is an error naming it, never a silent no-op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .definedness import mark as _mark
from .errors import EmulatorError
from .parser import FImm, Function, Imm, Instr, Module, Not, Reg, Sink, Sym, VarDecl
from .ptxtypes import np_dtype, ptx_type, sint_dtype, uint_dtype

# instruction kinds (what the scheduler does besides calling fn)
K_OP, K_BRA, K_BRX, K_EXIT, K_RET, K_CALL, K_BAR, K_COLL, K_WAIT = range(9)
WARPGROUP = "warpgroup"      # the aux of a K_COLL step collective over whole warpgroups (wgmma), not warps

# special registers: name -> (bits, dynamic)
SPECIAL_BITS: dict[str, int] = {}
for _axis in "xyz":
    for _base in ("tid", "ntid", "ctaid", "nctaid", "cluster_ctaid", "cluster_nctaid", "clusterid", "nclusterid"):
        SPECIAL_BITS[f"%{_base}.{_axis}"] = 32
for _name in ("laneid", "warpid", "nwarpid", "smid", "nsmid", "lanemask_eq", "lanemask_lt", "lanemask_le",
              "lanemask_gt", "lanemask_ge", "clock", "clock_hi", "dynamic_smem_size", "total_smem_size",
              "aggr_smem_size", "cluster_ctarank", "cluster_nctarank", "globaltimer_lo", "globaltimer_hi",
              "reserved_smem_offset_begin", "reserved_smem_offset_end", "reserved_smem_offset_cap",
              "perctamemorysize"):
    SPECIAL_BITS[f"%{_name}"] = 32
for _name in ("clock64", "globaltimer", "gridid", "perctamemoryoffset"):
    SPECIAL_BITS[f"%{_name}"] = 64
for _k in range(32):
    SPECIAL_BITS[f"%envreg{_k}"] = 32
for _k in range(8):
    SPECIAL_BITS[f"%pm{_k}"] = 32
    SPECIAL_BITS[f"%pm{_k}_64"] = 64
SPECIAL_BITS["%is_explicit_cluster"] = 1
DYNAMIC_SPECIALS = frozenset({"%clock", "%clock_hi", "%clock64", "%globaltimer", "%globaltimer_lo",
                              "%globaltimer_hi"})


@dataclass(frozen=True)
class LabelRef:
    """A branch target, resolved to a pc once the function is decoded."""

    name: str


@dataclass(frozen=True)
class CallRef:
    """A callee's entry, resolved to a pc once every function is decoded."""

    name: str


@dataclass
class SymInfo:
    space: str          # 'kparam', 'cparam', 'shared', 'local', 'global', 'func', 'label', 'targets'
    value: Any          # offset, slot index, pc, function name, list of pcs
    decl: Optional[VarDecl] = None


@dataclass
class ParamSlot:
    name: str
    type: str
    offset: int
    size: int
    is_array: bool


@dataclass
class Program:
    """A decoded kernel, reusable across launches (addresses of globals are per launch)."""

    kernel: Function
    code: list = field(default_factory=list)
    info: list = field(default_factory=list)            # Instr of each step (for messages)
    reg_bits: list = field(default_factory=list)        # declared width of each register (1 = pred)
    reg_names: list = field(default_factory=list)
    specials: dict = field(default_factory=dict)        # special register name -> register index
    params: list = field(default_factory=list)          # ParamSlot of each kernel parameter
    kparam_size: int = 0
    cparam_size: int = 0
    local_size: int = 0
    static_smem: int = 0
    dyn_smem_align: int = 16
    globals: list = field(default_factory=list)         # (slot, VarDecl) to allocate per launch
    entry_pc: int = 0
    reqntid: Optional[tuple[int, int, int]] = None
    min_per_cta_memory: int = 0     # .minperctamemory: the CTA's own global bytes (%perctamemoryoffset)
    maxntid: Optional[tuple[int, int, int]] = None
    reqnctapercluster: Optional[tuple[int, int, int]] = None   # the cluster shape the kernel requires
    blocks_are_clusters: bool = False   # .blocksareclusters: the launch grid counts clusters, not CTAs
    max_call_depth: int = 0
    uses_dynamic_smem: bool = False
    # registers an asynchronous instruction (wgmma, tcgen05.ld) writes behind the threads' back,
    # and the instructions (by identity) allowed to touch them while pending (see async_regs.py)
    async_regs: set = field(default_factory=set)
    async_exempt: set = field(default_factory=set)
    flow: list = field(default_factory=list)            # definedness.Flow of each step (registers read/written)


class Mods:
    """The modifiers of one instruction; every one must be consumed or it is an error."""

    def __init__(self, ins: Instr) -> None:
        self.ins = ins
        self.rest = list(ins.mods)

    def flag(self, *names: str) -> bool:
        found = False
        for n in names:
            while n in self.rest:
                self.rest.remove(n)
                found = True
        return found

    def one(self, options: Any, default: Optional[str] = None) -> Optional[str]:
        hits = [m for m in self.rest if m in options]
        if len(hits) > 1:
            raise bad(self.ins, f"conflicting modifiers .{hits[0]} and .{hits[1]}")
        if hits:
            self.rest.remove(hits[0])
            return hits[0]
        return default

    def need(self, options: Any, what: str) -> str:
        got = self.one(options)
        if got is None:
            raise bad(self.ins, f"missing {what}")
        return got

    def types(self) -> list[str]:
        from .ptxtypes import TYPE_NAMES

        found = [m for m in self.rest if m in TYPE_NAMES]
        for m in found:
            self.rest.remove(m)
        return found

    def type1(self) -> str:
        ts = self.types()
        if len(ts) != 1:
            raise bad(self.ins, "expected exactly one type modifier")
        return ts[0]

    def ignore(self, names: Any) -> None:
        self.rest = [m for m in self.rest if m not in names]

    def done(self) -> None:
        if self.rest:
            raise bad(self.ins, f"unsupported modifier .{self.rest[0]}")


def bad(ins: Instr, why: str) -> EmulatorError:
    return EmulatorError(f"line {ins.line}: unsupported PTX instruction '{ins.text}': {why}")


# memory-ordering / cache qualifiers with no observable effect in a sequential emulator
CACHE_QUALIFIERS = frozenset({
    "weak", "volatile", "relaxed", "acquire", "release", "acq_rel", "sc", "mmio", "cta", "gpu", "sys", "cluster",
    "ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "unified",
    "L1::evict_normal", "L1::evict_unchanged", "L1::evict_first", "L1::evict_last", "L1::no_allocate",
    "L2::evict_normal", "L2::evict_first", "L2::evict_last", "L2::cache_hint", "L2::64B", "L2::128B", "L2::256B",
    "L2::evict_unchanged",
})


class Writer:
    """Stores a value into one register, converting to its width; masked lanes keep their value."""

    __slots__ = ("idx", "conv", "np")

    def __init__(self, idx: int, conv: Optional[Callable[[Any], Any]]) -> None:
        import numpy as np

        self.idx = idx
        self.conv = conv
        self.np = np

    def put(self, st: Any, m: Any, v: Any) -> None:
        if self.conv is not None:
            v = self.conv(v)
        if st.defined is not None:
            _mark(st, self.idx, m)
        if m is None:
            if v.ndim == 0:
                v = self.np.full(st.n, v)
            st.R[self.idx] = v
        else:
            st.R[self.idx] = self.np.where(m, v, st.R[self.idx])

    def put_lanes(self, st: Any, lanes: Any, v: Any) -> None:
        """`v` holds one value per lane of `lanes` (None: every thread)."""
        if self.conv is not None:
            v = self.conv(v)
        if st.defined is not None:
            _mark(st, self.idx, None, lanes)
        if lanes is None:
            if v.ndim == 0:
                v = self.np.full(st.n, v)
            st.R[self.idx] = v
        else:
            r = st.R[self.idx].copy()
            r[lanes] = v
            st.R[self.idx] = r


class SinkWriter(Writer):
    def __init__(self) -> None:
        super().__init__(-1, None)

    def put(self, st: Any, m: Any, v: Any) -> None:
        return None

    def put_lanes(self, st: Any, lanes: Any, v: Any) -> None:
        return None


def store_conv(value_dtype: Any, reg_bits: int) -> Optional[Callable[[Any], Any]]:
    """Conversion of a computed value (of `value_dtype`) to the raw storage of a `reg_bits` register."""
    import numpy as np

    if reg_bits == 1:
        if value_dtype == np.bool_:
            return None
        return lambda v: v != 0
    target = uint_dtype(reg_bits)
    vbits = value_dtype.itemsize * 8
    if value_dtype == np.bool_:
        return lambda v: np.asarray(v).astype(target)
    if value_dtype == target:
        return None
    if vbits == reg_bits:
        return lambda v: v.view(target)
    if vbits < reg_bits:
        if value_dtype.kind == "i":
            wide = sint_dtype(reg_bits)
            return lambda v: v.astype(wide).view(target)
        narrow = uint_dtype(vbits)
        if value_dtype == narrow:
            return lambda v: v.astype(target)
        return lambda v: v.view(narrow).astype(target)
    narrow = uint_dtype(vbits)
    return lambda v: v.view(narrow).astype(target)


def load_conv(reg_bits: int, ty: str) -> Optional[Callable[[Any], Any]]:
    """Conversion of a register's raw bits to the values of type `ty`."""
    t = ptx_type(ty)
    dt = np_dtype(ty)
    if reg_bits == 1 or ty == "pred":
        if reg_bits == 1 and ty == "pred":
            return None
        if reg_bits == 1:
            return lambda v: v.astype(dt)
        return lambda v: v != 0
    storage = uint_dtype(reg_bits)
    if t.bits == reg_bits:
        if dt == storage:
            return None
        return lambda v: v.view(dt)
    if t.bits < reg_bits:
        narrow = uint_dtype(t.bits)
        if dt == narrow:
            return lambda v: v.astype(narrow)
        return lambda v: v.astype(narrow).view(dt)
    # a register narrower than the type: extend by the type's signedness
    if t.kind == "s":
        return lambda v: v.view(sint_dtype(reg_bits)).astype(dt)
    wide = uint_dtype(t.bits)
    if dt == wide:
        return lambda v: v.astype(wide)
    return lambda v: v.astype(wide).view(dt)


def imm_value(op: Any, ty: str, ins: Instr) -> Any:
    """A numpy scalar of type `ty` for an immediate operand."""
    import numpy as np

    t = ptx_type(ty)
    dt = np_dtype(ty)
    if ty == "pred":
        if isinstance(op, Imm):
            return np.bool_(op.value != 0)
        raise bad(ins, "a float literal used as a predicate")
    if isinstance(op, Imm):
        if t.kind == "f":
            return dt.type(op.value)
        bits = t.bits
        v = op.value & ((1 << bits) - 1)
        return np.array(v, dtype=uint_dtype(bits)).view(dt)[()]
    assert isinstance(op, FImm)
    if t.kind == "f":
        if op.bits is not None and op.width == t.bits and ty in ("f32", "f64", "tf32"):
            return np.array(op.bits, dtype=uint_dtype(t.bits)).view(dt)[()]
        return np.array(op.value, dtype=np.float64).astype(dt)[()]
    # a float literal in a bit-typed instruction: its bit pattern
    if op.bits is not None and op.width == t.bits:
        return np.array(op.bits, dtype=uint_dtype(t.bits)).view(dt)[()]
    ft = {16: np.float16, 32: np.float32, 64: np.float64}.get(t.bits)
    if ft is None:
        raise bad(ins, f"a float literal cannot be a .{ty} operand")
    return np.array(op.value, dtype=np.float64).astype(ft).view(uint_dtype(t.bits)).view(dt)[()]


class Decoder:
    """Decodes the kernel and the functions it calls into a `Program`."""

    def __init__(self, module: Module, kernel: Function) -> None:
        self.module = module
        self.prog = Program(kernel)
        self.reg_index: dict[str, int] = {}
        self.scopes: list[dict[str, int]] = []
        self.syms: dict[str, SymInfo] = {}          # module-level symbols
        self.local_syms: list[dict[str, SymInfo]] = []
        self.func_entry: dict[str, int] = {}
        self.current: Optional[Function] = None
        self.ret_param: dict[str, list[ParamSlot]] = {}
        self.formal_params: dict[str, list[ParamSlot]] = {}
        self.call_graph: dict[str, set[str]] = {}
        self.regs_used: list[frozenset] = []        # per code step: registers its instruction names
        self._srcs: set = set()                     # registers the instruction being decoded reads ...
        self._dsts: set = set()                     # ... and writes (readers and writers it made)
        self._optional: tuple = ((), None)
        from .isa_forms import parse_target

        self.target = parse_target(module.target)     # (sm, suffix) the instructions are checked against

    # -- layout helpers -----------------------------------------------------
    def new_reg(self, name: str, bits: int) -> int:
        idx = len(self.prog.reg_bits)
        self.prog.reg_bits.append(bits)
        self.prog.reg_names.append(name)
        return idx

    def special(self, name: str) -> int:
        idx = self.prog.specials.get(name)
        if idx is None:
            idx = self.prog.specials[name] = self.new_reg(name, SPECIAL_BITS[name])
        return idx

    def lookup_reg(self, name: str) -> Optional[int]:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in SPECIAL_BITS:
            return self.special(name)
        return None

    def lookup_sym(self, name: str) -> Optional[SymInfo]:
        for scope in reversed(self.local_syms):
            if name in scope:
                return scope[name]
        return self.syms.get(name)

    def _align(self, value: int, align: int) -> int:
        return (value + align - 1) // align * align

    def alloc_cparam(self, decl: VarDecl) -> ParamSlot:
        size = max(decl.nbytes, ptx_type(decl.type).nbytes)
        align = max(decl.align or 0, min(ptx_type(decl.type).nbytes, 8), 1)
        off = self._align(self.prog.cparam_size, max(align, 8))
        self.prog.cparam_size = off + self._align(size, 8)
        return ParamSlot(decl.name, decl.type, off, size, decl.is_array)

    def alloc_shared(self, decl: VarDecl) -> SymInfo:
        if decl.count is None:
            self.prog.dyn_smem_align = max(self.prog.dyn_smem_align, decl.align or 16)
            self.prog.uses_dynamic_smem = True
            return SymInfo("shared", None, decl)     # resolved after all static shared data is placed
        align = max(decl.align or ptx_type(decl.type).nbytes, 1)
        off = self._align(self.prog.static_smem, align)
        self.prog.static_smem = off + decl.nbytes
        return SymInfo("shared", off, decl)

    def alloc_local(self, decl: VarDecl) -> SymInfo:
        align = max(decl.align or ptx_type(decl.type).nbytes, 1)
        off = self._align(self.prog.local_size, align)
        self.prog.local_size = off + decl.nbytes
        return SymInfo("local", off, decl)

    # -- operands -----------------------------------------------------------
    def reg_of(self, op: Any, ins: Instr) -> Optional[int]:
        if isinstance(op, Reg):
            idx = self.lookup_reg(op.name)
            if idx is None:
                raise bad(ins, f"undeclared register {op.name}")
            return idx
        if isinstance(op, Sym) and op.offset == 0:
            return self.lookup_reg(op.name)
        return None

    def reader(self, op: Any, ty: str, ins: Instr) -> Callable[[Any], Any]:
        """A function state -> values (array over threads, or a numpy scalar) of type `ty`."""
        import numpy as np

        idx = self.reg_of(op, ins)
        if idx is not None:
            self._srcs.add(idx)
            name = self.prog.reg_names[idx]
            if name in DYNAMIC_SPECIALS:
                return self._dynamic_special(name, ty)
            conv = load_conv(self.prog.reg_bits[idx], ty)
            if conv is None:
                return lambda st: st.R[idx]
            return lambda st: conv(st.R[idx])
        if isinstance(op, (Imm, FImm)):
            # a 0-d array: numpy 2 mixes those with arrays faster than numpy scalars
            c = np.array(imm_value(op, ty, ins))
            return lambda st: c
        if isinstance(op, Sym):
            return self.sym_value(op, ty, ins)
        if isinstance(op, Not):
            inner = self.reader(op.inner, "pred", ins)
            return lambda st: ~inner(st)
        raise bad(ins, f"unexpected operand {op}")

    def _dynamic_special(self, name: str, ty: str) -> Callable[[Any], Any]:
        import numpy as np

        dt = np_dtype(ty)

        def clock(st: Any) -> Any:
            value = st.clock_value()
            if name in ("%clock", "%globaltimer_lo"):
                value &= 0xFFFFFFFF
            elif name in ("%clock_hi", "%globaltimer_hi"):
                value >>= 32
            return np.array(value, dtype=np.uint64).astype(uint_dtype(dt.itemsize * 8)).view(dt)[()]

        return clock

    def sym_value(self, op: Sym, ty: str, ins: Instr) -> Callable[[Any], Any]:
        """The address of a symbol as a value (mov %rd, sym)."""
        info = self.lookup_sym(op.name)
        if info is None:
            raise bad(ins, f"unknown symbol '{op.name}'")
        dt = np_dtype(ty)
        offset = op.offset
        if info.space == "shared":      # the CTA's offset, plus its rank's bits in a cluster
            if info.value is None:
                def dynamic_address(st: Any) -> Any:
                    c = dt.type(st.dyn_smem_base + offset)
                    return c if st.rank_bits is None else (st.rank_bits + c).astype(dt)

                return dynamic_address
            c = dt.type(info.value + offset)
            return lambda st: c if st.rank_bits is None else (st.rank_bits + c).astype(dt)
        if info.space in ("local", "kparam"):
            c = dt.type(info.value + offset)
            return lambda st: c
        if info.space == "global":
            slot = info.value
            return lambda st: dt.type(st.symv[slot] + offset)
        raise bad(ins, f"the address of '{op.name}' ({info.space}) cannot be taken")

    def writer(self, op: Any, value_dtype: Any, ins: Instr) -> Writer:
        if isinstance(op, Sink):
            return SinkWriter()
        idx = self.reg_of(op, ins)
        if idx is None:
            raise bad(ins, f"destination {op} is not a register")
        if self.prog.reg_names[idx] in SPECIAL_BITS:
            raise bad(ins, f"special register {self.prog.reg_names[idx]} is read-only")
        self._dsts.add(idx)
        return Writer(idx, store_conv(value_dtype, self.prog.reg_bits[idx]))

    def read_only_when(self, regs: Any, when: Any) -> None:
        """Registers `regs` are read by the instruction being decoded only when the predicate reader `when`
        holds (wgmma's accumulators and scale-d): for definedness."""
        self._optional = (tuple(regs), when)

    def writer_t(self, op: Any, ty: str, ins: Instr) -> Writer:
        return self.writer(op, np_dtype(ty), ins)

    # -- decoding -----------------------------------------------------------
    def decode(self) -> Program:
        from .ops import HANDLERS

        self.handlers = HANDLERS
        mod = self.module
        slot = 0
        for decl in mod.variables:
            if decl.space in ("global", "const"):
                self.syms[decl.name] = SymInfo("global", slot, decl)
                self.prog.globals.append((slot, decl))
                slot += 1
            elif decl.space == "shared":
                self.syms[decl.name] = self.alloc_shared(decl)
            elif decl.space == "local":
                self.syms[decl.name] = self.alloc_local(decl)
            else:
                raise EmulatorError(f"line {decl.line}: unsupported module-level .{decl.space} variable '{decl.name}'")
        for fn in mod.functions.values():
            self.syms.setdefault(fn.name, SymInfo("func", fn.name))
        kernel = self.prog.kernel
        self._layout_kernel_params(kernel)
        order = [kernel.name]
        seen = {kernel.name}
        i = 0
        while i < len(order):
            fn = mod.functions[order[i]]
            self._decode_function(fn)
            for callee in sorted(self.call_graph.get(fn.name, ())):
                if callee not in seen:
                    seen.add(callee)
                    order.append(callee)
            i += 1
        self._check_recursion()
        code = self.prog.code
        for pc, (kind, f, gid, gneg, aux) in enumerate(code):
            if isinstance(aux, CallRef):
                code[pc] = (kind, f, gid, gneg, self.func_entry[aux.name])
        self.prog.kparam_size = self.prog.kparam_size
        self.prog.local_size = self._align(self.prog.local_size, 16)
        self.prog.cparam_size = self._align(self.prog.cparam_size, 16)
        self.prog.max_call_depth = len(order)
        if self.prog.async_regs:
            from .async_regs import guard_async_registers

            guard_async_registers(self.prog, self.regs_used)
        return self.prog

    def _layout_kernel_params(self, kernel: Function) -> None:
        off = 0
        for decl in kernel.params:
            t = ptx_type(decl.type)
            size = decl.nbytes if decl.is_array else t.nbytes * decl.vector
            align = max(decl.align if decl.is_array and decl.align else t.nbytes, 1)
            if not decl.is_array:
                align = max(t.nbytes * decl.vector, 1)
            off = self._align(off, align)
            slot = ParamSlot(decl.name, decl.type, off, size, decl.is_array)
            self.prog.params.append(slot)
            self.syms[decl.name] = SymInfo("kparam", off, decl)
            off += size
        self.prog.kparam_size = self._align(off, 16)
        d = kernel.directives
        self.prog.blocks_are_clusters = "blocksareclusters" in d
        if d.get("minperctamemory"):
            self.prog.min_per_cta_memory = int(d["minperctamemory"].strip(), 0)
        for key in ("reqntid", "maxntid", "reqnctapercluster"):
            if key in d and d[key]:
                dims = [int(x, 0) for x in d[key].replace(" ", "").split(",") if x]
                dims += [1] * (3 - len(dims))
                setattr(self.prog, key, tuple(dims[:3]))

    def _decode_function(self, fn: Function) -> None:
        if fn.body is None:
            raise EmulatorError(f"function '{fn.name}' is called but has no body in this PTX "
                                "(an external function: link it before emulating)")
        self.current = fn
        self.scopes = [{}]
        self.local_syms = [{}]
        if fn.kind == "func":
            formals, results = self.signature(fn.name)
            for s in formals + results:
                self.local_syms[0][s.name] = SymInfo("cparam", s.offset)
        first = len(self.prog.code)
        self.func_entry[fn.name] = first
        if fn.kind == "entry":
            self.prog.entry_pc = first
        labels: dict[str, int] = {}
        self.branch_targets = {item[1]: item[2] for item in fn.body if item[0] == "targets"}
        for item in fn.body:
            tag = item[0]
            if tag == "reg":
                decl = item[1]
                bits = ptx_type(decl.type).bits
                for name in decl.names:
                    self.scopes[-1][name] = self.new_reg(name, bits)
            elif tag == "var":
                self._declare_local_var(item[1])
            elif tag == "open":
                self.scopes.append({})
                self.local_syms.append({})
            elif tag == "close":
                self.scopes.pop()
                self.local_syms.pop()
            elif tag == "label":
                labels[item[1]] = len(self.prog.code)
            elif tag == "instr":
                self._decode_instr(item[1])
        # falling off the end of a body returns
        self._decode_instr(Instr("ret", (), [], None, fn.line, "ret (end of function)"))
        # resolve this function's labels
        code, info = self.prog.code, self.prog.info
        for pc in range(first, len(code)):
            kind, f, gid, gneg, aux = code[pc]
            if isinstance(aux, LabelRef):
                code[pc] = (kind, f, gid, gneg, self._resolve(labels, aux.name, info[pc]))
            elif isinstance(aux, list) and aux and isinstance(aux[0], LabelRef):
                code[pc] = (kind, f, gid, gneg, [self._resolve(labels, a.name, info[pc]) for a in aux])

    def signature(self, name: str) -> tuple[list[ParamSlot], list[ParamSlot]]:
        """The per-thread parameter slots of a function's formals and results (allocated once)."""
        if name not in self.formal_params:
            fn = self.module.functions[name]
            self.formal_params[name] = [self.alloc_cparam(p) for p in fn.params]
            self.ret_param[name] = [self.alloc_cparam(p) for p in fn.rets]
        return self.formal_params[name], self.ret_param[name]

    def _resolve(self, labels: dict[str, int], name: str, ins: Instr) -> int:
        if name not in labels:
            raise bad(ins, f"unknown label '{name}'")
        return labels[name]

    def _declare_local_var(self, decl: VarDecl) -> None:
        if decl.space == "param":
            slot = self.alloc_cparam(decl)
            self.local_syms[-1][decl.name] = SymInfo("cparam", slot.offset, decl)
        elif decl.space == "shared":
            self.local_syms[-1][decl.name] = self.alloc_shared(decl)
        elif decl.space == "local":
            self.local_syms[-1][decl.name] = self.alloc_local(decl)
        elif decl.space in ("global", "const"):
            slot = len(self.prog.globals)
            self.prog.globals.append((slot, decl))
            self.local_syms[-1][decl.name] = SymInfo("global", slot, decl)
        else:
            raise EmulatorError(f"line {decl.line}: unsupported .{decl.space} variable '{decl.name}' in a function")

    def _decode_instr(self, ins: Instr) -> None:
        handler = self.handlers.get(ins.opcode)
        if handler is None:
            raise EmulatorError(f"line {ins.line}: unsupported PTX instruction '{ins.opcode}' in '{ins.text}'")
        from .isa_forms import check_order, check_target

        check_order(ins)
        check_target(ins, self.target)
        gid, gneg = -1, False
        if ins.guard is not None:
            g = self.lookup_reg(ins.guard[0])
            if g is None or self.prog.reg_bits[g] != 1:
                raise bad(ins, f"guard {ins.guard[0]} is not a predicate register")
            gid, gneg = g, ins.guard[1]
        self._srcs, self._dsts, self._optional = set(), set(), ((), None)
        steps = handler(self, ins)
        if isinstance(steps, tuple):
            steps = [steps]
        used = self.registers_named(ins)
        flow = self._flow(ins)
        for kind, fn, aux in steps:
            self.prog.code.append((kind, fn, gid, gneg, aux))
            self.prog.info.append(ins)
            self.regs_used.append(used)
            self.prog.flow.append(flow)

    def _flow(self, ins: Instr) -> Any:
        from .definedness import Flow, byte_flow, sinks_of

        optional, when = self._optional
        optional = tuple(sorted(set(optional) - {None}))
        srcs = tuple(sorted(self._srcs - set(optional)))
        parts = byte_flow(ins, lambda op: self.reg_of(op, ins) if isinstance(op, (Reg, Sym)) else None,
                          lambda r: self.prog.reg_bits[r])
        return Flow(srcs, tuple(sorted(self._dsts)), sinks_of(ins, self._regs_in), optional, when, **parts)

    def _regs_in(self, op: Any) -> frozenset:
        return self.registers_named(_OperandsOf(op))  # type: ignore[arg-type]

    def registers_named(self, ins: Instr) -> frozenset:
        """Indices of the registers an instruction names (operands, addresses, guard)."""
        from .parser import Addr, Paren, Pipe, TensorAddr, Vec

        out: set[int] = set()
        todo = list(ins.operands)
        if ins.guard is not None:
            todo.append(Reg(ins.guard[0]))
        while todo:
            op = todo.pop()
            if isinstance(op, (Reg, Sym)):
                idx = self.lookup_reg(op.name) if not isinstance(op, Sym) or op.offset == 0 else None
                if idx is not None:
                    out.add(idx)
            elif isinstance(op, (Vec, Paren)):
                todo.extend(op.items)
            elif isinstance(op, Addr):
                todo.append(op.base)
            elif isinstance(op, TensorAddr):
                todo.extend((op.base, op.coords))
            elif isinstance(op, Pipe):
                todo.extend((op.first, op.second))
            elif isinstance(op, Not):
                todo.append(op.inner)
        return frozenset(out)

    def _check_recursion(self) -> None:
        state: dict[str, int] = {}

        def visit(name: str, path: list[str]) -> None:
            if state.get(name) == 1:
                raise EmulatorError(f"recursive calls are not supported: {' -> '.join(path + [name])}")
            if state.get(name) == 2:
                return
            state[name] = 1
            for callee in self.call_graph.get(name, ()):
                visit(callee, path + [name])
            state[name] = 2

        visit(self.prog.kernel.name, [])


class _OperandsOf:
    """One operand seen as an instruction without a guard (for `registers_named`)."""

    guard = None

    def __init__(self, op: Any) -> None:
        self.operands = [op]


def decode(module: Module, kernel_name: str) -> Program:
    fn = module.functions.get(kernel_name)
    if fn is None or fn.kind != "entry":
        entries = sorted(f.name for f in module.functions.values() if f.kind == "entry")
        raise EmulatorError(f"no kernel '{kernel_name}' in the PTX (kernels: {', '.join(entries) or 'none'})")
    if fn.body is None:
        raise EmulatorError(f"kernel '{kernel_name}' is only declared in the PTX")
    return Decoder(module, fn).decode()
