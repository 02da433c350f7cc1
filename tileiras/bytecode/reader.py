"""TileIR bytecode reader (versions 13.1 to 13.5).

File layout: magic, version (major u8, minor u8, tag u16), then sections
(id byte with an alignment flag in bit 7, varint length, optional varint
alignment and 0xCB padding, payload) up to the end marker. The string,
type, constant, global, producer and debug sections are tables; the
function section holds one entry op per function whose body is a stream
of ops, each decoded from its `OpDef` (tileiras.dialects.registry).

Every length and index is checked against the data before use, so bad
input ends in a `BytecodeError` naming the offset, never in an exception
from Python or an allocation sized by the input's claims.
"""

from __future__ import annotations


from ..errors import BytecodeError
from ..ir import attributes as A
from ..ir import types as T
from ..ir.core import Block, Location, Operation, Region, Value
from ..dialects.registry import OPTIONAL, SINGLE, OpDef, by_opcode, version_key
from .encoding import SEC_CONSTANT, SEC_DEBUG, SEC_FUNC, SEC_GLOBAL, SEC_PRODUCER, SEC_STRING, SEC_TYPE, Cursor
from .sections import _read_header, _sections, _vstr

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Any, Optional

# Type tags -> scalar element names (tag: (name, since)).
SCALAR_TAGS: dict[int, tuple[str, str]] = {
    0: ("i1", "13.1"), 1: ("i8", "13.1"), 2: ("i16", "13.1"), 3: ("i32", "13.1"), 4: ("i64", "13.1"),
    5: ("f16", "13.1"), 6: ("bf16", "13.1"), 7: ("f32", "13.1"), 8: ("tf32", "13.1"), 9: ("f64", "13.1"),
    10: ("f8E4M3FN", "13.1"), 11: ("f8E5M2", "13.1"), 18: ("f8E8M0FNU", "13.2"), 19: ("f4E2M1FN", "13.3"),
    22: ("i4", "13.3"), 130: ("fnv8E5M3FNU", "13.4"),
}
TAG_POINTER, TAG_TILE, TAG_TENSOR_VIEW, TAG_PARTITION_VIEW, TAG_FUNCTION, TAG_TOKEN = 12, 13, 14, 15, 16, 17
TAG_GATHER_SCATTER_VIEW, TAG_STRIDED_VIEW = 20, 21
PADDING = A.ENUMS["PaddingValue"]
# Pointer attribute (13.4+) by its bytecode value, as NVIDIA's tileirdisasm 13.5 names them.
PTR_ATTRS = ("none", "unicast", "multicast")

# Attribute tags of self-contained attributes.
ATTR_INTEGER, ATTR_FLOAT, ATTR_BOOL, ATTR_TYPE, ATTR_STRING, ATTR_ARRAY, ATTR_DENSE = 1, 2, 3, 4, 5, 6, 7
ATTR_DIVBY, ATTR_SAME_ELEMENTS, ATTR_DICT, ATTR_HINTS, ATTR_BOUNDED = 8, 9, 10, 11, 12

# Debug info tags.
DI_COMPILE_UNIT, DI_FILE, DI_LEXICAL_BLOCK, DI_LOC, DI_SUBPROGRAM, DI_CALLSITE = 1, 2, 3, 4, 5, 6

FLAG_KERNEL, FLAG_HAS_HINTS = 0x02, 0x04

_UNKNOWN = object()  # the unknown location (distinct from "no entry")


class _Tables:
    """The decoded string/type/constant/debug tables of one file (lazy, cached)."""

    def __init__(self, data: bytes, version: tuple[int, int]) -> None:
        self.data = data
        self.version = version
        self.vkey = version
        self.str_offsets: list[int] = []
        self.str_start = 0
        self.str_end = 0
        self.strings: dict[int, str] = {}
        self.type_offsets: list[int] = []
        self.type_start = 0
        self.type_end = 0
        self.types: dict[int, T.Type] = {}
        self.types_busy: set[int] = set()
        self.const_spans: list[tuple[int, int]] = []
        self.consts: dict[tuple[int, T.Type], A.DenseElements] = {}
        self.di_index_offsets: list[int] = []
        self.di_indices: list[int] = []
        self.di_offsets: list[int] = []
        self.di_start = 0
        self.di_end = 0
        self.di_cache: dict[int, Any] = {}
        self.di_busy: set[int] = set()

    # -- strings -------------------------------------------------------------
    def string(self, index: int, cur: Optional[Cursor] = None) -> str:
        s = self.strings.get(index)
        if s is not None:
            return s
        offs = self.str_offsets
        if index >= len(offs):
            raise BytecodeError(f"error: string index {index} out of bounds")
        start = self.str_start + offs[index]
        end = self.str_start + offs[index + 1] if index + 1 < len(offs) else self.str_end
        if not (self.str_start <= start <= end <= self.str_end):
            raise BytecodeError(f"error: string index {index} has an invalid offset")
        s = self.data[start:end].decode("utf-8", "replace")
        self.strings[index] = s
        return s

    # -- types ---------------------------------------------------------------
    def type(self, index: int) -> T.Type:
        t = self.types.get(index)
        if t is not None:
            return t
        offs = self.type_offsets
        if index >= len(offs):
            raise BytecodeError(f"error: type index {index} out of bounds")
        if index in self.types_busy:
            raise BytecodeError(f"error: type index {index} refers to itself")
        start = self.type_start + offs[index]
        end = self.type_start + offs[index + 1] if index + 1 < len(offs) else self.type_end
        if not (self.type_start <= start <= end <= self.type_end):
            raise BytecodeError(f"error: type {index} has an invalid offset")
        self.types_busy.add(index)
        try:
            cur = Cursor(self.data, start, end, start)
            t = self._parse_type(cur)
        finally:
            self.types_busy.discard(index)
        if not isinstance(t, T.ScalarType):
            from ..dialects.verify_rules import check_type

            err = check_type(t)
            if err:
                raise BytecodeError(f"error: error at offset {start}: {err}")
        self.types[index] = t
        return t

    def _since(self, since: str, what: str, cur: Cursor) -> None:
        if version_key(since) > self.version:
            raise cur.error(f"{what} requires bytecode version {since} but the file is version {_vstr(self.version)}")

    def _padding(self, cur: Cursor) -> Optional[T.PaddingValue]:
        v = cur.varint("padding value")
        if v >= len(PADDING):
            raise cur.error(f"invalid integer value for enum type: {v}")
        return T.PaddingValue(PADDING[v])

    def _parse_type(self, cur: Cursor) -> T.Type:
        tag = cur.varint("type tag")
        scalar = SCALAR_TAGS.get(tag)
        if scalar is not None:
            self._since(scalar[1], f"type '{scalar[0]}'", cur)
            return T.ScalarType(scalar[0])
        v = self.version
        if tag == TAG_TILE:
            elem = self.type(cur.varint("element type"))
            shape = tuple(cur.le_list(8, "tile shape"))
            return T.TileType(shape, elem)
        if tag == TAG_TOKEN:
            return T.TOKEN
        if tag == TAG_POINTER:
            flags = cur.varint("flags") if v >= (13, 4) else 0
            pointee = self.type(cur.varint("pointee type"))
            attr = self._ptr_attr(cur) if flags & 1 else None
            return T.PointerType(pointee, attr) if attr else T.PointerType(pointee)
        if tag == TAG_TENSOR_VIEW:
            flags = cur.varint("flags") if v >= (13, 4) else 0
            elem = self.type(cur.varint("element type"))
            shape = tuple(cur.le_list(8, "tensor_view shape"))
            strides = tuple(cur.le_list(8, "tensor_view strides"))
            attr = self._ptr_attr(cur) if flags & 1 else None
            if attr:
                return T.TensorViewType(elem, shape, strides, attr)
            return T.TensorViewType(elem, shape, strides)
        if tag == TAG_PARTITION_VIEW:
            unified = v >= (13, 3)
            flags = cur.varint("flags") if unified else 0
            tile_shape = tuple(cur.le_list(4, "tile shape"))
            tv = self._tensor_view(cur)
            dim_map = tuple(cur.le_list(4, "dim map"))
            if not unified:
                flags = cur.varint("padding flag")
            padding = self._padding(cur) if flags & 1 else None
            return T.PartitionViewType(tile_shape, tv, dim_map, padding)
        if tag == TAG_STRIDED_VIEW:
            self._since("13.3", "strided_view type", cur)
            flags = cur.varint("flags")
            tile_shape = tuple(cur.le_list(4, "tile shape"))
            strides = tuple(cur.le_list(4, "traversal strides"))
            tv = self._tensor_view(cur)
            dim_map = tuple(cur.le_list(4, "dim map"))
            padding = self._padding(cur) if flags & 1 else None
            return T.StridedViewType(tile_shape, strides, tv, dim_map, padding)
        if tag == TAG_GATHER_SCATTER_VIEW:
            self._since("13.3", "gather_scatter_view type", cur)
            flags = cur.varint("flags")
            tile_shape = tuple(cur.le_list(4, "tile shape"))
            tv = self._tensor_view(cur)
            sparse_dim = cur.varint("sparse dim")
            padding = self._padding(cur) if flags & 1 else None
            return T.GatherScatterViewType(tile_shape, tv, sparse_dim, padding)
        if tag == TAG_FUNCTION:
            n = cur.varint("number of parameters")
            if n > cur.remaining():
                raise cur.error("failed to read number of parameters")
            ins = tuple(self.type(cur.varint("parameter type")) for _ in range(n))
            n = cur.varint("number of results")
            if n > cur.remaining():
                raise cur.error("failed to read number of results")
            outs = tuple(self.type(cur.varint("result type")) for _ in range(n))
            return T.FunctionType(ins, outs)
        raise cur.error(f"unknown type tag {tag}")

    def _ptr_attr(self, cur: Cursor) -> str:
        v = cur.varint("pointer attribute")
        if v >= len(PTR_ATTRS):
            raise cur.error(f"invalid integer value for enum type: {v}")
        return PTR_ATTRS[v]

    def _tensor_view(self, cur: Cursor) -> T.TensorViewType:
        tv = self.type(cur.varint("tensor view type"))
        if not isinstance(tv, T.TensorViewType):
            raise cur.error(f"expected a tensor_view type, got '{tv}'")
        return tv

    # -- constants -----------------------------------------------------------
    def dense(self, index: int, type: T.Type, cur: Cursor) -> A.DenseElements:
        key = (index, type)
        d = self.consts.get(key)
        if d is not None:
            return d
        if index >= len(self.const_spans):
            raise cur.error(f"constant index {index} out of bounds")
        if not isinstance(type, T.TileType) or not isinstance(type.element, T.ScalarType):
            raise cur.error(f"expect Cuda Tile integer or float type but got: {type}")
        start, end = self.const_spans[index]
        c = Cursor(self.data, start, end, start)
        size = c.varint("size of the data buffer")
        raw = c.take(size)
        if not dense_size_ok(type, len(raw)):
            raise cur.error("failed to validate buffer size and format")
        d = A.DenseElements(type, raw)
        self.consts[key] = d
        return d

    # -- debug info ------------------------------------------------------------
    def locations(self, fn_loc_index: int) -> "_LocIter":
        return _LocIter(self, fn_loc_index)

    def di(self, index: int) -> Any:
        """Debug attribute `index` (1-based; 0 is the unknown location)."""
        if index == 0:
            return _UNKNOWN
        i = index - 1
        if i in self.di_cache:
            return self.di_cache[i]
        offs = self.di_offsets
        if i >= len(offs):
            raise BytecodeError(f"error: debug info index {index} out of bounds")
        if i in self.di_busy:
            raise BytecodeError(f"error: debug info attribute {index} refers to itself")
        start = self.di_start + offs[i]
        end = self.di_start + offs[i + 1] if i + 1 < len(offs) else self.di_end
        if not (self.di_start <= start <= end <= self.di_end):
            raise BytecodeError(f"error: debug info attribute {index} has an invalid offset")
        self.di_busy.add(i)
        try:
            value = self._parse_di(Cursor(self.data, start, end, start))
        finally:
            self.di_busy.discard(i)
        self.di_cache[i] = value
        return value

    def _di_of(self, cur: Cursor, kinds: tuple, what: str) -> Any:
        v = self.di(cur.varint(what))
        if not isinstance(v, kinds):
            raise cur.error(f"failed to read {what}")
        return v

    def _parse_di(self, cur: Cursor) -> Any:
        tag = cur.varint("debug info tag")
        if tag == DI_FILE:
            return A.DIFile(self.string(cur.varint("file name")), self.string(cur.varint("directory")))
        if tag == DI_COMPILE_UNIT:
            return A.DICompileUnit(self._di_of(cur, (A.DIFile,), "file attribute"))
        if tag == DI_SUBPROGRAM:
            file = self._di_of(cur, (A.DIFile,), "file attribute")
            line = cur.varint("line number")
            name = self.string(cur.varint("name"))
            linkage = self.string(cur.varint("linkage name"))
            cu = self._di_of(cur, (A.DICompileUnit,), "compile unit attribute")
            scope_line = cur.varint("scope line number")
            return A.DISubprogram(file, line, name, linkage, cu, scope_line)
        if tag == DI_LEXICAL_BLOCK:
            scope = self._di_of(cur, (A.DISubprogram, A.DILexicalBlock), "scope attribute")
            file = self._di_of(cur, (A.DIFile,), "file attribute")
            line = cur.varint("line number")
            column = cur.varint("column number")
            return A.DILexicalBlock(scope, file, line, column)
        if tag == DI_LOC:
            scope = self._di_of(cur, (A.DISubprogram, A.DILexicalBlock), "scope attribute")
            filename = self.string(cur.varint("file name"))
            line = cur.varint("line number")
            column = cur.varint("column number")
            return Location(filename, line, column, scope)
        if tag == DI_CALLSITE:
            callee = self.di(cur.varint("callee"))
            caller = self.di(cur.varint("caller"))
            if not _is_loc(callee) or not _is_loc(caller):
                raise cur.error("failed to read callee attribute when parsing CallSiteLoc")
            return A.CallSiteLoc(_loc_value(callee), _loc_value(caller))
        return _UNKNOWN


def _is_loc(v: Any) -> bool:
    return v is _UNKNOWN or isinstance(v, (Location, A.CallSiteLoc))


def _loc_value(v: Any) -> Any:
    return None if v is _UNKNOWN else v


class _LocIter:
    """Hands out the locations of one function's ops in pre-order."""

    __slots__ = ("t", "unknown", "base", "k")

    def __init__(self, tables: _Tables, fn_loc_index: int) -> None:
        self.t = tables
        self.unknown = fn_loc_index == 0
        self.base = -1
        self.k = 0
        if not self.unknown:
            i = fn_loc_index - 1
            if i < len(tables.di_index_offsets):
                self.base = tables.di_index_offsets[i]

    def next(self) -> Any:
        if self.unknown:
            return None
        t = self.t
        pos = self.base + self.k
        if self.base < 0 or pos >= len(t.di_indices):
            raise BytecodeError("error: failed to read operation location.")
        self.k += 1
        v = t.di(t.di_indices[pos])
        if not _is_loc(v):
            raise BytecodeError("error: failed to read operation location.")
        return _loc_value(v)


def dense_size_ok(type: T.TileType, nbytes: int) -> bool:
    from ..ir.dense import raw_size_ok

    return raw_size_ok(type, nbytes)


# -- ops -------------------------------------------------------------------------
class _OpReader:
    def __init__(self, tables: _Tables, version: tuple[int, int]) -> None:
        self.t = tables
        self.version = version

    def _avail(self, since: str) -> bool:
        return version_key(since) <= self.version

    def read_block(self, cur: Cursor, block: Block, values: list[Value], locs: _LocIter) -> None:
        nargs = cur.varint("block argument count")
        if nargs > cur.remaining():
            raise cur.error("failed to read block argument count.")
        mark = len(values)
        for _ in range(nargs):
            values.append(block.add_argument(self.t.type(cur.varint("block argument type"))))
        nops = cur.varint("block operation count")
        if nops > cur.remaining():
            raise cur.error("failed to read block operation count.")
        for i in range(nops):
            self.read_op(cur, block, values, locs)
        last = block.operations[-1] if block.operations else None
        if last is None:
            raise cur.error("invalid block structure: block is expected to have a terminator operation, "
                            "but it is empty")
        if not last.definition.has_trait("Terminator"):
            raise cur.error("invalid block structure: block is expected to have a terminator operation, "
                            f"but the last operation '{last.name}' is not a terminator.")
        del values[mark:]

    def read_op(self, cur: Cursor, block: Block, values: list[Value], locs: _LocIter) -> Operation:
        t = self.t
        opcode = cur.varint("operation opcode")
        defn = by_opcode(opcode)
        if defn is None or not self._avail(defn.since):
            raise cur.error(f"unsupported opcode {opcode} for bytecode version {_vstr(self.version)}")
        loc = locs.next()
        # results
        if defn.is_variadic:
            n = cur.varint("result count")
            if n > cur.remaining():
                raise cur.error("failed to read result count")
            result_types = [t.type(cur.varint("result type")) for _ in range(n)]
            n_serialized = n
        else:
            result_types = [t.type(cur.varint("result type")) for r in defn.results if self._avail(r.since)]
        n_serialized = len(result_types)
        for r in defn.results[len(result_types):]:
            if not self._avail(r.since) and r.constraint == "token":
                result_types.append(T.TOKEN)  # e.g. print_tko before 13.2 had no token result
        # flags
        bits = flag_layout(defn)
        flags = 0
        if bits and flags_present(defn, bits, self.version):
            flags = cur.varint("flags")
        present = {name: bool(flags >> i & 1) for i, (name, since) in enumerate(bits)}
        # attributes
        attrs: dict[str, Any] = {}
        for a in defn.attributes:
            if a.kind == "unit":
                if present.get(a.name):
                    attrs[a.name] = True
                continue
            if a.optional:
                if present.get(a.name):
                    attrs[a.name] = self.read_attr(cur, a.kind, a.enum, result_types, a.int_type)
                continue
            if self._avail(a.since):
                attrs[a.name] = self.read_attr(cur, a.kind, a.enum, result_types, a.int_type)
            elif a.default is not None:
                attrs[a.name] = a.default
        # operands
        operands: list[Value] = []
        sizes: Optional[list[int]] = None
        nvals = len(values)
        if defn.attr_sized_operands:
            sizes = []
            for g in defn.operands:
                if g.kind == SINGLE:
                    idxs = [cur.varint("operand index")]
                elif g.kind == OPTIONAL:
                    idxs = [cur.varint("operand index")] if present.get(g.name) else []
                else:
                    n = cur.varint("operand count")
                    if n > cur.remaining():
                        raise cur.error("failed to read operand count")
                    idxs = [cur.varint("operand index") for _ in range(n)]
                for i in idxs:
                    if i >= nvals:
                        raise cur.error(f"operand index {i} out of bounds (size={nvals})")
                    operands.append(values[i])
                sizes.append(len(idxs))
        else:
            groups = defn.operands
            if defn.needs_segment_sizes:  # some operand group is variadic or optional
                n = cur.varint("operand count")
                if n > cur.remaining():
                    raise cur.error("failed to read operand count")
            else:
                n = len(groups)
            for k in range(n):
                i = cur.varint("operand index")
                if i >= nvals:
                    raise cur.error(f"operand index {i} out of bounds (size={nvals}) for operand {k}")
                operands.append(values[i])
            if defn.needs_segment_sizes:
                sizes = _segments_from_count(defn, n, cur)
        for a in defn.attributes:
            if a.kind == "boolarray" and not self._avail(a.since) and sizes is not None:
                # older files cannot say "inbounds": one false flag per index operand
                n_index = next((n for g, n in zip(defn.operands, sizes) if g.name == "index"), 0)
                attrs[a.name] = (False,) * n_index
        op = Operation(defn.name, operands, result_types, attrs, location=loc,
                       segment_sizes=tuple(sizes) if sizes is not None else None)
        # regions
        if defn.regions:
            nregions = cur.varint("region count")
            if nregions != len(defn.regions):
                raise cur.error(f"'{defn.name}' expects {len(defn.regions)} regions, got {nregions}")
            for _ in range(nregions):
                region = op.add_region(Region())
                nblocks = cur.varint("region block count")
                if nblocks > 1:
                    raise cur.error(f"'{defn.name}' regions hold at most one block, got {nblocks}")
                for _ in range(nblocks):
                    self.read_block(cur, region.add_block(Block()), values, locs)
        block.append(op)
        values.extend(op.results[:n_serialized])  # synthesized (newer) results get no index
        return op

    # -- op attributes -----------------------------------------------------------
    def read_attr(self, cur: Cursor, kind: str, enum: Optional[str], result_types: list[T.Type],
                  int_type: str = "i64") -> Any:
        t = self.t
        if kind == "enum":
            v = cur.varint("enum attribute")
            kws = A.ENUMS[enum]  # type: ignore[index]
            if v >= len(kws):
                raise cur.error(f"invalid integer value for enum type: {v}")
            kw = kws[v]
            since = A.ENUM_VALUE_SINCE.get((enum, kw))  # type: ignore[arg-type]
            if since and not self._avail(since):
                raise cur.error(f"enum value '{kw}' requires bytecode version {since}")
            return kw
        if kind == "int":
            v = cur.varint("integer attribute")
            if int_type == "i32" and v < 1 << 32:  # stored in 32 bits: sign-extend
                return v - (1 << 32) if v >= 1 << 31 else v
            return v - (1 << 64) if v >= 1 << 63 else v
        if kind == "bool":
            return cur.byte() != 0
        if kind in ("str", "symref"):
            s = t.string(cur.varint("string index"))
            if kind == "symref" and not s:
                raise cur.error("empty symbol reference is invalid")
            return s
        if kind == "type":
            return t.type(cur.varint("type index"))
        if kind == "dense":
            rtype = result_types[0] if result_types else None
            return t.dense(cur.varint("constant index"), rtype, cur)  # type: ignore[arg-type]
        if kind == "i32array":
            return tuple(cur.le_list(4, "DenseI32ArrayAttr"))
        if kind == "boolarray":
            return tuple(bool(b) for b in cur.le_list(1, "DenseBoolArrayAttr"))
        if kind == "hints":
            return self.hints_from_dict(self.read_dict_body(cur), cur)
        if kind == "predicate":
            p = self.read_tagged(cur)
            if not isinstance(p, (A.DivBy, A.SameElements, A.Bounded)):
                raise cur.error("failed to cast parsed attribute to AssumePredicateAttrInterface")
            return p
        if kind == "array":
            n = cur.varint("ArrayAttr size")
            if n > cur.remaining():
                raise cur.error("failed to read size for ArrayAttr.")
            return tuple(self.read_tagged(cur) for _ in range(n))
        if kind == "dictarray":
            n = cur.varint("ArrayAttr size")
            if n > cur.remaining():
                raise cur.error("failed to read size for ArrayAttr.")
            return tuple(self.read_tagged(cur) for _ in range(n))
        raise cur.error(f"attribute kind '{kind}' cannot be read")

    def read_dict_body(self, cur: Cursor) -> A.DictAttr:
        n = cur.varint("DictionaryAttr size")
        if n > cur.remaining():
            raise cur.error("failed to read size for DictionaryAttr")
        items = []
        seen = set()
        for i in range(n):
            key = self.t.string(cur.varint("dictionary key"))
            if not key:
                raise cur.error(f"invalid empty attribute name for DictionaryAttr element {i}")
            if key in seen:
                raise cur.error(f"failed to parse DictionaryAttr, duplicate key found: {key}")
            seen.add(key)
            items.append((key, self.read_tagged(cur)))
        items.sort(key=lambda kv: kv[0])  # MLIR dictionaries are sorted by name
        return A.DictAttr(tuple(items))

    def hints_from_dict(self, d: A.DictAttr, cur: Cursor) -> A.OptimizationHints:
        entries = []
        for arch, value in d.items:
            if not isinstance(value, A.DictAttr):
                raise cur.error("failed to parse OptimizationHintsAttr")
            items = []
            for k, v in value.items:
                if isinstance(v, A.IntegerAttr):
                    v = v.value
                items.append((k, v))
            entries.append((arch, tuple(items)))
        return A.OptimizationHints(tuple(entries))

    def read_tagged(self, cur: Cursor) -> Any:
        t = self.t
        tag = cur.varint("attribute tag")
        if tag == ATTR_INTEGER:
            ty = t.type(cur.varint("integer type"))
            if not isinstance(ty, T.ScalarType) or not ty.is_int:
                raise cur.error("failed to read valid IntegerType for IntegerAttr")
            width = ty.bitwidth
            if width == 1:
                return cur.byte() != 0
            v = cur.varint("integer value")
            if v >> width:
                raise cur.error(f"value {v} does not fit in {width} bits")
            if v >> (width - 1):
                v -= 1 << width
            return A.IntegerAttr(v, ty)
        if tag == ATTR_FLOAT:
            ty = t.type(cur.varint("float type"))
            if not isinstance(ty, T.ScalarType) or ty.is_int:
                raise cur.error("failed to read valid FloatType for FloatAttr")
            width = ty.bitwidth
            if width <= 8:
                bits = cur.byte()
            else:
                bits = cur.svarint("float bits") & ((1 << 64) - 1)
            if bits >> width:
                raise cur.error(f"value {bits} does not fit in {width} bits")
            from ..ir.floats import bits_to_float

            return A.FloatAttr(bits_to_float(bits, ty.name), ty, bits)
        if tag == ATTR_BOOL:
            return cur.byte() != 0
        if tag == ATTR_TYPE:
            return t.type(cur.varint("type index"))
        if tag == ATTR_STRING:
            return t.string(cur.varint("string index"))
        if tag == ATTR_ARRAY:
            n = cur.varint("ArrayAttr size")
            if n > cur.remaining():
                raise cur.error("failed to read size for ArrayAttr.")
            return tuple(self.read_tagged(cur) for _ in range(n))
        if tag == ATTR_DENSE:
            ty = t.type(cur.varint("dense type"))
            return t.dense(cur.varint("constant index"), ty, cur)
        if tag == ATTR_DIVBY:
            divisor = cur.varint("divisor")
            flags = cur.byte()
            every = cur.svarint("every") if flags & 1 else None
            along = cur.svarint("along") if flags & 2 else None
            return A.DivBy(divisor, every, along)
        if tag == ATTR_SAME_ELEMENTS:
            return A.SameElements(tuple(cur.le_list(8, "DenseI64ArrayAttr")))
        if tag == ATTR_DICT:
            return self.read_dict_body(cur)
        if tag == ATTR_HINTS:
            return self.hints_from_dict(self.read_dict_body(cur), cur)
        if tag == ATTR_BOUNDED:
            flags = cur.byte()
            lb = cur.svarint("lower bound") if flags & 1 else None
            ub = cur.svarint("upper bound") if flags & 2 else None
            return A.Bounded(lb, ub)
        raise cur.error(f"unsupported AttributeTag {tag} for self-contained attribute")


def flag_layout(defn: OpDef) -> tuple[tuple[str, str], ...]:
    """The (name, since) of each flags bit: version order, attributes before operands."""
    cached = _FLAG_CACHE.get(defn.name)
    if cached is not None:
        return cached
    fields: list[tuple[tuple[int, ...], int, int, str, str]] = []
    for i, a in enumerate(defn.attributes):
        if a.optional or a.kind == "unit":
            fields.append((version_key(a.since), 0, i, a.name, a.since))
    if defn.attr_sized_operands:
        for i, g in enumerate(defn.operands):
            if g.kind == OPTIONAL:
                fields.append((version_key(g.since), 1, i, g.name, g.since))
    fields.sort()
    layout = tuple((f[3], f[4]) for f in fields)
    _FLAG_CACHE[defn.name] = layout
    return layout


_FLAG_CACHE: dict[str, tuple[tuple[str, str], ...]] = {}


def flags_present(defn: OpDef, bits: tuple[tuple[str, str], ...], version: tuple[int, int]) -> bool:
    first = min(version_key(s) for _, s in bits)
    return first <= version_key(defn.since) or first <= version


def _segments_from_count(defn: OpDef, n: int, cur: Cursor) -> list[int]:
    """Split a flat operand count among groups (at most one variable-length group)."""
    fixed = sum(1 for g in defn.operands if g.kind == SINGLE)
    var = [g for g in defn.operands if g.kind != SINGLE]
    extra = n - fixed
    if extra < 0 or (len(var) == 1 and var[0].kind == OPTIONAL and extra > 1):
        raise cur.error(f"'{defn.name}' has an invalid operand count {n}")
    if len(var) != 1:
        raise cur.error(f"'{defn.name}' operand groups cannot be recovered from a flat list")
    return [1 if g.kind == SINGLE else extra for g in defn.operands]


# -- sections ------------------------------------------------------------------
def _table_offsets(cur: Cursor, count: int, width: int, what: str) -> list[int]:
    if count > cur.remaining() // width:
        raise cur.error(f"number of {what} ({count}) exceeds the maximum of {cur.remaining() // width} "
                        f"that can fit in the remaining payload of {cur.remaining()} bytes.")
    data = cur.data
    pos = cur.pos
    out = [int.from_bytes(data[pos + i * width:pos + (i + 1) * width], "little") for i in range(count)]
    cur.pos = pos + count * width
    return out


def read_version(data: bytes) -> tuple[int, int]:
    """The (major, minor) bytecode version of `data` (validates magic and version)."""
    return _read_header(data)


def read_module(data: bytes, filename: str = "<bytecode>") -> Operation:
    """Decode TileIR bytecode into a `cuda_tile.module` operation."""
    try:
        return _read_module(bytes(data), filename)
    except BytecodeError as exc:
        msg = _err(exc.message)
        if not msg.endswith("failed to read provided Tile IR bytecode"):
            msg += "\nerror: failed to read provided Tile IR bytecode"
        raise BytecodeError(msg) from None
    except RecursionError:
        raise BytecodeError("error: bytecode nesting is too deep\n"
                            "error: failed to read provided Tile IR bytecode") from None


def _read_module(data: bytes, filename: str) -> Operation:
    version = _read_header(data)
    sections = _sections(data)
    t = _Tables(data, version)

    if SEC_STRING not in sections:
        raise BytecodeError("error: string section is mandatory")
    s, e = sections[SEC_STRING]
    cur = Cursor(data, s, e, s)
    n = cur.varint("number of strings")
    if n:
        cur.align(4, s)
        t.str_offsets = _table_offsets(cur, n, 4, "strings")
    t.str_start, t.str_end = cur.pos, e

    producer = None
    if SEC_PRODUCER in sections:
        s, e = sections[SEC_PRODUCER]
        producer = t.string(Cursor(data, s, e, s).varint("producer string index"))

    if SEC_TYPE in sections:
        s, e = sections[SEC_TYPE]
        cur = Cursor(data, s, e, s)
        n = cur.varint("number of types")
        if n:
            cur.align(4, s)
            t.type_offsets = _table_offsets(cur, n, 4, "types")
        t.type_start, t.type_end = cur.pos, e

    if SEC_CONSTANT in sections:
        s, e = sections[SEC_CONSTANT]
        cur = Cursor(data, s, e, s)
        n = cur.varint("number of constants")
        if n:
            cur.align(8, s)
            if cur.remaining() // 8 < n:
                raise cur.error("insufficient data for constant indices")
            offs = _table_offsets(cur, n, 8, "constants")
            base, size = cur.pos, e - cur.pos
            for i, o in enumerate(offs):
                end = offs[i + 1] if i + 1 < n else size
                if end < o:
                    raise cur.error(f"invalid constant start indices: end ({end}) is less than start ({o}) "
                                    f"for constant {i}")
                if end > size:
                    raise cur.error(f"constant {i} extends beyond available data: size={end - o}, start={o}, "
                                    f"total data size={size}")
                t.const_spans.append((base + o, base + end))

    globals_info = []
    if SEC_GLOBAL in sections:
        s, e = sections[SEC_GLOBAL]
        cur = Cursor(data, s, e, s)
        n = cur.varint("number of globals")
        per = 6 if version >= (13, 3) else 4
        if n > cur.remaining() // per:
            raise cur.error(f"number of globals ({n}) exceeds the maximum of {cur.remaining() // per} that can "
                            f"fit in the remaining payload of {cur.remaining()} bytes.")
        for _ in range(n):
            name, tidx, cidx, align = (cur.varint("global field") for _ in range(4))
            vis, const = (cur.varint("global field"), cur.varint("global field")) if per == 6 else (0, 0)
            globals_info.append((name, tidx, cidx, align, vis, const, cur))

    if SEC_FUNC not in sections:
        raise BytecodeError("error: function section is mandatory")

    if SEC_DEBUG in sections:
        s, e = sections[SEC_DEBUG]
        cur = Cursor(data, s, e, s)
        n = cur.varint("number of operations with debug info")
        cur.align(4, s)
        t.di_index_offsets = _table_offsets(cur, n, 4, "debug info index offsets")
        n = cur.varint("number of debug info indices")
        cur.align(8, s)
        t.di_indices = _table_offsets(cur, n, 8, "debug info indices")
        n = cur.varint("number of debug info attributes")
        if n > cur.remaining() // 4:
            raise cur.error(f"number of debug info attributes ({n}) exceeds the maximum of "
                            f"{cur.remaining() // 4} that can fit in the remaining payload of "
                            f"{cur.remaining()} bytes.")
        cur.align(4, s)
        t.di_offsets = _table_offsets(cur, n, 4, "debug info offsets")
        t.di_start, t.di_end = cur.pos, e

    module = Operation("cuda_tile.module", attributes={"sym_name": "kernels"}, regions=[Region([Block()])])
    if producer is not None:
        module.attributes["producer"] = producer
    body = module.regions[0].blocks[0]
    ops = _OpReader(t, version)

    for name, tidx, cidx, align, vis, const, gcur in globals_info:
        if cidx >= len(t.const_spans):
            raise BytecodeError("error: global value constant index out of bounds")
        sym = t.string(name)
        if not sym:
            raise BytecodeError(f"error: global symbol name at index {name} is empty")
        value = t.dense(cidx, t.type(tidx), gcur)
        if vis >= 2:
            raise BytecodeError(f"error: invalid symbol visibility value: {vis}")
        attrs: dict[str, Any] = {"sym_name": sym, "value": value, "alignment": align,
                                 "symbol_visibility": A.ENUMS["SymbolVisibility"][vis]}
        if const:
            attrs["constant"] = True
        body.append(Operation("cuda_tile.global", attributes=attrs))

    s, e = sections[SEC_FUNC]
    cur = Cursor(data, s, e, s)
    nfuncs = cur.varint("number of functions")
    if nfuncs > e - s:
        raise cur.error(f"number of functions ({nfuncs}) exceeds payload size ({e - s})")
    for _ in range(nfuncs):
        name_idx = cur.varint("function name index")
        sig_idx = cur.varint("function signature index")
        flags = cur.byte()
        loc_idx = cur.varint("function location index")
        is_entry = bool(flags & FLAG_KERNEL)
        hints = None
        if is_entry and (flags & FLAG_HAS_HINTS or version >= (13, 5)):
            h = ops.read_tagged(cur)
            if not isinstance(h, A.OptimizationHints):
                raise cur.error("invalid optimization hints attribute")
            hints = h
        if version >= (13, 5):
            ops.read_tagged(cur)  # argument attributes (an array; none are defined yet)
        length = cur.varint("function body length")
        if length > cur.remaining():
            raise cur.error(f"function body length {length} exceeds remaining bytecode data "
                            f"({cur.remaining()} bytes)")
        body_start = cur.pos
        cur.pos += length
        fname = t.string(name_idx)
        if not fname:
            raise BytecodeError(f"error: function name at index {name_idx} is empty")
        if sig_idx >= len(t.type_offsets):
            raise BytecodeError(f"error: function signature index {sig_idx} out of bounds for function '{fname}'")
        ftype = t.type(sig_idx)
        if not isinstance(ftype, T.FunctionType):
            raise BytecodeError(f"error: function signature index {sig_idx} does not refer to a function type "
                                f"for function '{fname}', got type: {ftype}")
        if not is_entry:
            raise BytecodeError(f"error: un-expected non-entry function '{fname}'")
        locs = t.locations(loc_idx)
        floc = locs.next()
        eattrs: dict[str, Any] = {"sym_name": fname, "function_type": ftype,
                                  "optimization_hints": hints or A.OptimizationHints(())}
        entry = Operation("cuda_tile.entry", attributes=eattrs, location=floc)
        block = Block(list(ftype.inputs))
        entry.add_region(Region([block]))
        values: list[Value] = list(block.arguments)
        bcur = Cursor(data, body_start, body_start + length, body_start)
        try:
            while not bcur.at_end():
                ops.read_op(bcur, block, values, locs)
        except BytecodeError as exc:
            raise BytecodeError(f"{_err(exc.message)}\nerror: failed to parse function body for function "
                                f"'{fname}'\nerror: failed to create function from bytecode") from None
        body.append(entry)
    return module


def _err(message: str) -> str:
    return message if message.startswith("error:") else f"error: {message}"
