"""TileIR bytecode writer (versions 13.1 to 13.5): the inverse of reader.py.

Ops are encoded from their `OpDef` exactly as the reader decodes them;
fields introduced after the target version must hold their default (or be
absent), otherwise writing fails with a `CompileError` naming the op.
"""

from __future__ import annotations


from ..errors import CompileError
from ..ir import attributes as A
from ..ir import types as T
from ..ir.core import Block, Location, Operation, Value
from ..dialects.registry import OPTIONAL, SINGLE, OpDef, version_key
from .encoding import (MAGIC, SEC_CONSTANT, SEC_DEBUG, SEC_END, SEC_FUNC, SEC_GLOBAL, SEC_PRODUCER, SEC_STRING,
                       SEC_TYPE, SUPPORTED_VERSIONS, pad_to, parse_version, put_le_list, put_svarint, put_varint)
from .sections import _vstr
from .reader import (ATTR_ARRAY, ATTR_BOOL, ATTR_BOUNDED, ATTR_DENSE, ATTR_DICT, ATTR_DIVBY, ATTR_FLOAT, ATTR_HINTS,
                     ATTR_INTEGER, ATTR_SAME_ELEMENTS, ATTR_STRING, ATTR_TYPE, DI_CALLSITE, DI_COMPILE_UNIT, DI_FILE,
                     DI_LEXICAL_BLOCK, DI_LOC, DI_SUBPROGRAM, FLAG_HAS_HINTS, FLAG_KERNEL, PADDING, PTR_ATTRS,
                     SCALAR_TAGS, TAG_FUNCTION, TAG_GATHER_SCATTER_VIEW, TAG_PARTITION_VIEW, TAG_POINTER,
                     TAG_STRIDED_VIEW, TAG_TENSOR_VIEW, TAG_TILE, TAG_TOKEN, flag_layout, flags_present)

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Any

_SCALAR_TAG = {name: (tag, since) for tag, (name, since) in SCALAR_TAGS.items()}
DEFAULT_VERSION = "13.4"


def _where(op: Operation) -> str:
    from ..ir.diagnostic_location import location_prefix

    return location_prefix(op.location)


def _fail(op: Operation, message: str) -> CompileError:
    return CompileError(f"{_where(op)}error: '{op.name}' op {message}")


class _Table:
    """An interned table: value -> index, with the encoded entries in order."""

    def __init__(self, start: int = 0) -> None:
        self.index: dict[Any, int] = {}
        self.entries: list[bytes] = []
        self.start = start

    def add(self, key: Any, encode) -> int:
        i = self.index.get(key)
        if i is None:
            data = encode()
            i = self.index.get(key)  # encoding may have interned the same key recursively
            if i is None:
                i = len(self.entries) + self.start
                self.index[key] = i
                self.entries.append(data)
        return i


class _Writer:
    def __init__(self, version: tuple[int, int]) -> None:
        self.version = version
        self.strings = _Table()
        self.types = _Table()
        self.consts = _Table()
        self.di_table = _Table(start=1)

    def avail(self, since: str) -> bool:
        return version_key(since) <= self.version

    # -- tables -----------------------------------------------------------------
    def string(self, s: str) -> int:
        return self.strings.add(s, lambda: s.encode("utf-8"))

    def type(self, t: T.Type) -> int:
        return self.types.add(t, lambda: self._encode_type(t))

    def _encode_type(self, t: T.Type) -> bytes:
        b = bytearray()
        v = self.version
        if isinstance(t, T.ScalarType):
            tag, since = _SCALAR_TAG.get(t.name, (None, None))
            if tag is None:
                raise CompileError(f"error: type '{t}' cannot be written to bytecode")
            if not self.avail(since):
                raise CompileError(f"error: type '{t}' requires bytecode version {since}, targeting {_vstr(v)}")
            put_varint(b, tag)
        elif isinstance(t, T.TokenType):
            put_varint(b, TAG_TOKEN)
        elif isinstance(t, T.TileType):
            put_varint(b, TAG_TILE)
            put_varint(b, self.type(t.element))
            put_le_list(b, t.shape, 8)
        elif isinstance(t, T.PointerType):
            attr = getattr(t, "ptr_attr", None)
            if attr is not None and v < (13, 4):
                raise CompileError(f"error: parameter 'ptrAttr' requires bytecode version 13.4+, but targeting {_vstr(v)}")
            put_varint(b, TAG_POINTER)
            if v >= (13, 4):
                put_varint(b, 1 if attr is not None else 0)
            put_varint(b, self.type(t.pointee))
            if attr is not None:
                put_varint(b, PTR_ATTRS.index(attr))
        elif isinstance(t, T.TensorViewType):
            attr = getattr(t, "ptr_attr", None)
            if attr is not None and v < (13, 4):
                raise CompileError(f"error: parameter 'ptrAttr' requires bytecode version 13.4+, but targeting {_vstr(v)}")
            put_varint(b, TAG_TENSOR_VIEW)
            if v >= (13, 4):
                put_varint(b, 1 if attr is not None else 0)
            put_varint(b, self.type(t.element))
            put_le_list(b, t.shape, 8)
            put_le_list(b, t.strides, 8)
            if attr is not None:
                put_varint(b, PTR_ATTRS.index(attr))
        elif isinstance(t, T.PartitionViewType):
            put_varint(b, TAG_PARTITION_VIEW)
            pad = t.padding_value
            if v >= (13, 3):
                put_varint(b, 1 if pad is not None else 0)
            put_le_list(b, t.tile_shape, 4)
            put_varint(b, self.type(t.tensor_view))
            put_le_list(b, t.dim_map, 4)
            if v < (13, 3):
                put_varint(b, 1 if pad is not None else 0)
            if pad is not None:
                put_varint(b, PADDING.index(pad.kind))
        elif isinstance(t, T.StridedViewType):
            self._need("13.3", "strided_view type")
            put_varint(b, TAG_STRIDED_VIEW)
            put_varint(b, 1 if t.padding_value is not None else 0)
            put_le_list(b, t.tile_shape, 4)
            put_le_list(b, t.traversal_strides, 4)
            put_varint(b, self.type(t.tensor_view))
            put_le_list(b, t.dim_map, 4)
            if t.padding_value is not None:
                put_varint(b, PADDING.index(t.padding_value.kind))
        elif isinstance(t, T.GatherScatterViewType):
            self._need("13.3", "gather_scatter_view type")
            put_varint(b, TAG_GATHER_SCATTER_VIEW)
            put_varint(b, 1 if t.padding_value is not None else 0)
            put_le_list(b, t.tile_shape, 4)
            put_varint(b, self.type(t.tensor_view))
            put_varint(b, t.sparse_dim)
            if t.padding_value is not None:
                put_varint(b, PADDING.index(t.padding_value.kind))
        elif isinstance(t, T.FunctionType):
            put_varint(b, TAG_FUNCTION)
            put_varint(b, len(t.inputs))
            for x in t.inputs:
                put_varint(b, self.type(x))
            put_varint(b, len(t.results))
            for x in t.results:
                put_varint(b, self.type(x))
        else:
            raise CompileError(f"error: type '{t}' cannot be written to bytecode")
        return bytes(b)

    def _need(self, since: str, what: str) -> None:
        if not self.avail(since):
            raise CompileError(f"error: {what} requires bytecode version {since}, targeting {_vstr(self.version)}")

    def const(self, d: A.DenseElements) -> int:
        def encode() -> bytes:
            b = bytearray()
            put_varint(b, len(d.raw))
            b += d.raw
            return bytes(b)
        return self.consts.add(d.raw, encode)

    # -- debug info ------------------------------------------------------------
    def di(self, v: Any) -> int:
        """The 1-based debug attribute index of a location or scope (0: unknown)."""
        if v is None or (isinstance(v, Location) and v.scope is None):
            return 0  # bytecode stores only locations with a debug scope
        return self.di_table.add(("di", v if not isinstance(v, Location) else (v.file, v.line, v.column, v.scope)),
                           lambda: self._encode_di(v))

    def _encode_di(self, v: Any) -> bytes:
        b = bytearray()
        if isinstance(v, A.DIFile):
            put_varint(b, DI_FILE)
            put_varint(b, self.string(v.name))
            put_varint(b, self.string(v.directory))
        elif isinstance(v, A.DICompileUnit):
            put_varint(b, DI_COMPILE_UNIT)
            put_varint(b, self.di(v.file))
        elif isinstance(v, A.DISubprogram):
            put_varint(b, DI_SUBPROGRAM)
            put_varint(b, self.di(v.file))
            put_varint(b, v.line)
            put_varint(b, self.string(v.name))
            put_varint(b, self.string(v.linkage_name))
            put_varint(b, self.di(v.compile_unit))
            put_varint(b, v.scope_line)
            if self.version >= (13, 5):
                put_varint(b, 0)
        elif isinstance(v, A.DILexicalBlock):
            put_varint(b, DI_LEXICAL_BLOCK)
            put_varint(b, self.di(v.scope))
            put_varint(b, self.di(v.file))
            put_varint(b, v.line)
            put_varint(b, v.column)
        elif isinstance(v, Location):
            if v.scope is None:
                raise CompileError(f"error: location {v} has no debug info scope; bytecode stores only "
                                   "locations inside a di_subprogram or di_lexical_block")
            put_varint(b, DI_LOC)
            put_varint(b, self.di(v.scope))
            put_varint(b, self.string(v.file))
            put_varint(b, v.line)
            put_varint(b, v.column)
        elif isinstance(v, A.CallSiteLoc):
            put_varint(b, DI_CALLSITE)
            put_varint(b, self.di(v.callee))
            put_varint(b, self.di(v.caller))
        else:
            raise CompileError(f"error: unsupported debug info attribute {v!r}")
        return bytes(b)

    # -- attributes -------------------------------------------------------------
    def tagged(self, b: bytearray, v: Any) -> None:
        if isinstance(v, bool):
            put_varint(b, ATTR_BOOL)
            b.append(1 if v else 0)
        elif isinstance(v, A.IntegerAttr):
            put_varint(b, ATTR_INTEGER)
            put_varint(b, self.type(v.type))
            width = v.type.bitwidth  # type: ignore[attr-defined]
            if width == 1:
                b.append(1 if v.value else 0)
            else:
                put_varint(b, v.value & ((1 << width) - 1))
        elif isinstance(v, int):
            self.tagged(b, A.IntegerAttr(v, T.I32))
        elif isinstance(v, A.FloatAttr):
            put_varint(b, ATTR_FLOAT)
            put_varint(b, self.type(v.type))
            if v.type.bitwidth <= 8:  # type: ignore[attr-defined]
                b.append(v.bits)
            else:
                put_svarint(b, v.bits)
        elif isinstance(v, T.Type):
            put_varint(b, ATTR_TYPE)
            put_varint(b, self.type(v))
        elif isinstance(v, str):
            put_varint(b, ATTR_STRING)
            put_varint(b, self.string(v))
        elif isinstance(v, tuple):
            put_varint(b, ATTR_ARRAY)
            put_varint(b, len(v))
            for x in v:
                self.tagged(b, x)
        elif isinstance(v, A.DenseElements):
            put_varint(b, ATTR_DENSE)
            put_varint(b, self.type(v.type))
            put_varint(b, self.const(v))
        elif isinstance(v, A.DivBy):
            put_varint(b, ATTR_DIVBY)
            put_varint(b, v.divisor)
            b.append((v.every is not None) | ((v.along is not None) << 1))
            if v.every is not None:
                put_svarint(b, v.every)
            if v.along is not None:
                put_svarint(b, v.along)
        elif isinstance(v, A.SameElements):
            put_varint(b, ATTR_SAME_ELEMENTS)
            put_le_list(b, v.values, 8)
        elif isinstance(v, A.Bounded):
            put_varint(b, ATTR_BOUNDED)
            b.append((v.lb is not None) | ((v.ub is not None) << 1))
            if v.lb is not None:
                put_svarint(b, v.lb)
            if v.ub is not None:
                put_svarint(b, v.ub)
        elif isinstance(v, A.DictAttr):
            put_varint(b, ATTR_DICT)
            self.dict_body(b, v.items)
        elif isinstance(v, A.OptimizationHints):
            put_varint(b, ATTR_HINTS)
            self.hints_body(b, v)
        else:
            raise CompileError(f"error: attribute {v!r} cannot be written to bytecode")

    def dict_body(self, b: bytearray, items) -> None:
        put_varint(b, len(items))
        for k, v in items:
            put_varint(b, self.string(k))
            self.tagged(b, v)

    def hints_body(self, b: bytearray, h: A.OptimizationHints) -> None:
        items = []
        for arch, entries in h.entries:
            inner = tuple((k, (A.IntegerAttr(v, T.I32) if isinstance(v, int) and not isinstance(v, bool) else v))
                          for k, v in entries)
            items.append((arch, A.DictAttr(inner)))
        self.dict_body(b, items)

    def op_attr(self, b: bytearray, op: Operation, a, v: Any) -> None:
        kind = a.kind
        if kind == "enum":
            kws = A.ENUM_INDEX[a.enum]
            if v not in kws:
                raise _fail(op, f"attribute '{a.name}' has invalid value '{v}'")
            since = A.ENUM_VALUE_SINCE.get((a.enum, v))
            if since and not self.avail(since):
                raise _fail(op, f"enum value for attribute '{a.name}' is not available in bytecode version "
                                f"{_vstr(self.version)}")
            put_varint(b, kws[v])
        elif kind == "int":
            # an i32 attribute is stored in 32 bits (NVIDIA's reader rejects a wider value), i64 in 64
            put_varint(b, int(v) & 0xFFFFFFFF if a.int_type == "i32" else int(v))
        elif kind == "bool":
            b.append(1 if v else 0)
        elif kind in ("str", "symref"):
            put_varint(b, self.string(v))
        elif kind == "type":
            put_varint(b, self.type(v))
        elif kind == "dense":
            if not isinstance(v, A.DenseElements):
                raise _fail(op, f"attribute '{a.name}' must be a dense constant")
            put_varint(b, self.const(v))
        elif kind == "i32array":
            put_le_list(b, v, 4)
        elif kind == "boolarray":
            put_le_list(b, [1 if x else 0 for x in v], 1)
        elif kind == "hints":
            self.hints_body(b, v)
        elif kind == "predicate":
            self.tagged(b, v)
        elif kind in ("array", "dictarray"):
            put_varint(b, len(v))
            for x in v:
                self.tagged(b, x)
        else:
            raise _fail(op, f"attribute kind '{kind}' cannot be written")

    # -- ops ----------------------------------------------------------------------
    def op(self, b: bytearray, op: Operation, values: dict[int, int], counter: list[int], locs: list[int]) -> None:
        defn: OpDef = op.definition
        if not self.avail(defn.since):
            raise _fail(op, f"is not available in bytecode version {_vstr(self.version)}")
        put_varint(b, defn.opcode)
        locs.append(self.di(op.location))
        # results
        results = list(op.results)
        written = []
        for i, r in enumerate(results):
            rdef = defn.results[min(i, len(defn.results) - 1)] if defn.results else None
            if rdef is not None and rdef.kind == SINGLE and not self.avail(rdef.since):
                if r.uses:
                    raise _fail(op, f"result '{rdef.name}' requires bytecode version {rdef.since} but is being used "
                                    f"and targeting {_vstr(self.version)}")
                continue
            written.append(r)
        if defn.is_variadic:
            put_varint(b, len(written))
        for r in written:
            put_varint(b, self.type(r.type))
        # flags
        bits = flag_layout(defn)
        attrs = op.attributes
        present: dict[str, bool] = {}
        for name, since in bits:
            g = next((g for g in defn.operands if g.name == name), None)
            is_set = bool(op.operand_group(name)) if g is not None else _attr_set(attrs.get(name))
            if is_set and not self.avail(since):
                raise _fail(op, f"'{name}' is provided but requires bytecode version {since}, targeting "
                                f"{_vstr(self.version)}")
            present[name] = is_set
        if bits and flags_present(defn, bits, self.version):
            flags = 0
            for i, (name, _) in enumerate(bits):
                if present[name]:
                    flags |= 1 << i
            put_varint(b, flags)
        # attributes
        for a in defn.attributes:
            if a.kind == "unit":
                continue
            v = attrs.get(a.name)
            if a.optional:
                if v is not None:
                    self.op_attr(b, op, a, v)
                continue
            if v is None:
                v = a.default
            if self.avail(a.since):
                if v is None:
                    raise _fail(op, f"requires attribute '{a.name}'")
                self.op_attr(b, op, a, v)
            elif v is not None and v != a.default and not (a.kind == "boolarray" and not any(v)):
                raise _fail(op, f"attribute '{a.name}' requires bytecode version {a.since}+, but targeting "
                                f"{_vstr(self.version)}")
        # operands
        def idx(v: Value) -> int:
            i = values.get(id(v))
            if i is None:
                raise _fail(op, "uses a value that is not defined before it")
            return i

        if defn.attr_sized_operands:
            for g in defn.operands:
                vals = op.operand_group(g.name)
                if g.kind == SINGLE:
                    put_varint(b, idx(vals[0]))
                elif g.kind == OPTIONAL:
                    if vals:
                        put_varint(b, idx(vals[0]))
                else:
                    put_varint(b, len(vals))
                    for v in vals:
                        put_varint(b, idx(v))
        else:
            if defn.needs_segment_sizes:
                put_varint(b, len(op.operands))
            for v in op.operands:
                put_varint(b, idx(v))
        # regions
        if defn.regions:
            put_varint(b, len(op.regions))
            for region in op.regions:
                put_varint(b, len(region.blocks))
                for block in region.blocks:
                    self.block(b, block, values, counter, locs)
        for r in written:
            values[id(r)] = counter[0]
            counter[0] += 1

    def block(self, b: bytearray, block: Block, values: dict[int, int], counter: list[int], locs: list[int]) -> None:
        mark = counter[0]
        added = []
        put_varint(b, len(block.arguments))
        for a in block.arguments:
            put_varint(b, self.type(a.type))
            values[id(a)] = counter[0]
            added.append(id(a))
            counter[0] += 1
        put_varint(b, len(block.operations))
        before = set(values)
        for op in block.operations:
            self.op(b, op, values, counter, locs)
        for k in list(values):
            if k not in before:
                del values[k]
        for k in added:
            values.pop(k, None)
        counter[0] = mark


def _attr_set(v: Any) -> bool:
    return v is not None and v is not False


def _section(out: bytearray, sid: int, payload: bytes, alignment: int) -> None:
    out.append(sid | (0x80 if alignment > 1 else 0))
    put_varint(out, len(payload))
    if alignment > 1:
        put_varint(out, alignment)
        pad_to(out, alignment)
    out += payload


def _table(payload: bytearray, entries: list[bytes], width: int, origin: int = 0) -> None:
    put_varint(payload, len(entries))
    if not entries:
        return
    pad_to(payload, width, origin)
    off = 0
    for e in entries:
        payload += off.to_bytes(width, "little")
        off += len(e)
    for e in entries:
        payload += e


def write_module(module: Operation, version: str = DEFAULT_VERSION) -> bytes:
    """Encode a `cuda_tile.module` as TileIR bytecode of the given version."""
    try:
        v = parse_version(version)
    except ValueError:
        raise CompileError(f"error: invalid bytecode version '{version}'") from None
    if v not in SUPPORTED_VERSIONS:
        lo, hi = SUPPORTED_VERSIONS[0], SUPPORTED_VERSIONS[-1]
        raise CompileError(f"error: unsupported bytecode version {version}; supported versions are "
                           f"{_vstr(lo)} - {_vstr(hi)}")
    w = _Writer(v)
    body = module.regions[0].blocks[0].operations if module.regions and module.regions[0].blocks else []
    globals_ = [op for op in body if op.name == "cuda_tile.global"]
    entries = [op for op in body if op.name == "cuda_tile.entry"]
    for op in body:
        if op.name not in ("cuda_tile.global", "cuda_tile.entry"):
            raise _fail(op, "cannot appear at module level in bytecode")

    # functions
    func = bytearray()
    put_varint(func, len(entries))
    debug_per_fn: list[list[int]] = []
    for i, e in enumerate(entries):
        ftype = e.attributes["function_type"]
        put_varint(func, w.string(e.attributes["sym_name"]))
        put_varint(func, w.type(ftype))
        hints = e.attributes.get("optimization_hints")
        has_hints = isinstance(hints, A.OptimizationHints) and bool(hints.entries)
        flag = FLAG_KERNEL | (FLAG_HAS_HINTS if has_hints and v < (13, 5) else 0)
        func.append(flag)
        put_varint(func, i + 1)
        if has_hints or v >= (13, 5):
            b = bytearray()
            w.tagged(b, hints if isinstance(hints, A.OptimizationHints) else A.OptimizationHints(()))
            func += b
        if v >= (13, 5):
            func += bytes([ATTR_ARRAY, 0])
        locs = [w.di(e.location)]
        fb = bytearray()
        block = e.regions[0].blocks[0]
        values: dict[int, int] = {}
        for n, a in enumerate(block.arguments):
            values[id(a)] = n
        counter = [len(block.arguments)]
        for op in block.operations:
            w.op(fb, op, values, counter, locs)
        put_varint(func, len(fb))
        func += fb
        debug_per_fn.append(locs)

    # globals
    glob = bytearray()
    if globals_:
        put_varint(glob, len(globals_))
        for g in globals_:
            a = g.attributes
            value = a["value"]
            vis = a.get("symbol_visibility", "public")
            const = bool(a.get("constant"))
            if v < (13, 3) and vis != "public":
                raise _fail(g, f"global `{a['sym_name']}` uses non-public symbol visibility, which cannot be encoded "
                               f"in bytecode version {version} (requires bytecode 13.3+)")
            if v < (13, 3) and const:
                raise _fail(g, f"constant global `{a['sym_name']}` cannot be encoded in bytecode version {version} "
                               "(the `constant` attribute requires bytecode 13.3+)")
            put_varint(glob, w.string(a["sym_name"]))
            put_varint(glob, w.type(value.type))
            put_varint(glob, w.const(value))
            put_varint(glob, int(a.get("alignment", 0)))
            if v >= (13, 3):
                put_varint(glob, A.ENUM_INDEX["SymbolVisibility"][vis])
                put_varint(glob, 1 if const else 0)

    producer = module.attributes.get("producer")
    prod = bytearray()
    if producer:
        if v < (13, 3):
            raise _fail(module, f"optional attribute 'producer' is provided but requires bytecode version 13.3, "
                                f"targeting {version}")
        put_varint(prod, w.string(producer))

    # debug info
    dbg = bytearray()
    put_varint(dbg, len(debug_per_fn))
    pad_to(dbg, 4)
    off = 0
    for locs in debug_per_fn:
        dbg += off.to_bytes(4, "little")
        off += len(locs)
    put_varint(dbg, off)
    pad_to(dbg, 8)
    for locs in debug_per_fn:
        for i in locs:
            dbg += i.to_bytes(8, "little")
    di_entries = w.di_table.entries or [bytes([0])]  # readers reject an empty table
    _table(dbg, di_entries, 4)

    consts = bytearray()
    _table(consts, w.consts.entries, 8)
    types = bytearray()
    _table(types, w.types.entries, 4)
    strings = bytearray()
    _table(strings, w.strings.entries, 4)

    out = bytearray(MAGIC)
    out += bytes([v[0], v[1], 0, 0])
    pad_to(func, 8)
    _section(out, SEC_FUNC, bytes(func), 8)
    if globals_:
        _section(out, SEC_GLOBAL, bytes(glob), 1)
    if producer:
        _section(out, SEC_PRODUCER, bytes(prod), 1)
    _section(out, SEC_CONSTANT, bytes(consts), 8)
    _section(out, SEC_DEBUG, bytes(dbg), 8)
    _section(out, SEC_TYPE, bytes(types), 4)
    _section(out, SEC_STRING, bytes(strings), 4)
    out.append(SEC_END)
    return bytes(out)
