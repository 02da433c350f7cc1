"""The text of a layout, read back: what `describe` prints (`#mma<warps=1x4x1, per_warp=1x2x16 blocks>`),
parsed into the layout it describes, so that nv_tileas' dumps, whose tile types carry their layouts
(`tile<128x128xf32, #mma>`, text/printer.py), can be read again (text/parser.py).

One grammar, one entry point (`parse_layout`); each layout's fields are named as `describe` names them,
and a field `describe` leaves out takes the value it leaves it out for.
"""

from __future__ import annotations

import re
from typing import Callable

from .encodings import (WARP, BlockedLayout, BroadcastSourceLayout, Layout, MmaLayout, MmaRowLayout, PairAccLayout,
                        RowWarpLayout, TmemAccLayout)

_HEAD = re.compile(r"#([a-z_]+)<")


class LayoutSyntaxError(ValueError):
    """Text that is not a layout `describe` prints; the message says where and what was expected."""


def parse_layout(text: str) -> Layout:
    """The layout `text` describes (`describe(parse_layout(t)) == t` for what `describe` prints)."""
    layout, end = read_layout(text)
    if end != len(text):
        raise LayoutSyntaxError(f"unexpected '{text[end:]}' after the layout '{text[:end]}'")
    return layout


def read_layout(text: str) -> tuple[Layout, int]:
    """The layout `text` starts with and where it ends (what follows it is the caller's: a type's `>`)."""
    return _parse(text, 0)


def _parse(text: str, pos: int) -> tuple[Layout, int]:
    head = _HEAD.match(text, pos)
    if head is None:
        raise LayoutSyntaxError(f"expected a layout ('#blocked<...>', '#mma<...>', ...) at '{text[pos:pos + 40]}'")
    kind, pos = head.group(1), head.end()
    build = _KINDS.get(kind)
    if build is None:
        raise LayoutSyntaxError(f"unknown layout '#{kind}' (known: {', '.join('#' + k for k in _KINDS)})")
    if kind in _NESTED:
        return build(text, pos)
    end = _closing(text, pos)
    return build(text[pos:end], 0), end + 1


def _closing(text: str, pos: int) -> int:
    """The index of the '>' that closes the '<' before `pos`."""
    depth = 1
    for i in range(pos, len(text)):
        depth += {"<": 1, ">": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise LayoutSyntaxError(f"unclosed '<' in '{text}'")


def _fields(body: str, kind: str) -> dict[str, str]:
    """`key=value` fields and bare words (`warpgroup rows`) of a flat layout's body."""
    fields: dict[str, str] = {}
    for part in (p.strip() for p in body.split(",")):
        key, eq, value = part.partition("=")
        if not part or (eq and not value):
            raise LayoutSyntaxError(f"empty field in '#{kind}<{body}>'")
        fields[key.strip() if eq else part] = value.strip() if eq else ""
    return fields


def _int(fields: dict[str, str], key: str, kind: str, default: int = -1) -> int:
    value = fields.pop(key, None)
    if value is None:
        if default < 0:
            raise LayoutSyntaxError(f"'#{kind}<...>' needs '{key}='")
        return default
    if not value.isdigit() or int(value) == 0:
        raise LayoutSyntaxError(f"'{key}={value}' in '#{kind}<...>' is not a positive integer")
    return int(value)


def _dims(value: str, what: str) -> tuple[int, ...]:
    parts = value.split("x")
    if not all(p.isdigit() and int(p) > 0 for p in parts):
        raise LayoutSyntaxError(f"{what} '{value}' is not positive extents joined by 'x'")
    return tuple(int(p) for p in parts)


def _done(fields: dict[str, str], kind: str) -> None:
    if fields:
        raise LayoutSyntaxError(f"unknown field '{next(iter(fields))}' in '#{kind}<...>'")


def _blocked(body: str, _pos: int) -> BlockedLayout:
    fields = _fields(body, "blocked")
    layout = BlockedLayout(_int(fields, "threads", "blocked"), _int(fields, "vec", "blocked", 1))
    _done(fields, "blocked")
    return layout


def _row_warp(body: str, _pos: int) -> RowWarpLayout:
    kind = "row_warp"
    fields = _fields(body, kind)
    cols, warps = _int(fields, "cols", kind), _int(fields, "warps", kind)
    layout = RowWarpLayout(warps * WARP, cols, _int(fields, "warps_per_row", kind, 1), _int(fields, "runs", kind, 0),
                           _int(fields, "rows_per_warp", kind, 1))
    _done(fields, kind)
    return layout


def _mma_of(cls: type) -> Callable[[str, int], MmaLayout]:
    kind = {MmaLayout: "mma", TmemAccLayout: "tmem_acc", PairAccLayout: "tmem_pair_acc"}[cls]

    def build(body: str, _pos: int) -> MmaLayout:
        fields = _fields(body, kind)
        warps = _dims(fields.pop("warps", ""), "warps")
        blocks = fields.pop("per_warp", "")
        if not blocks.endswith(" blocks"):
            raise LayoutSyntaxError(f"'per_warp={blocks}' in '#{kind}<...>' does not end in ' blocks'")
        repeats = _dims(blocks[:-len(" blocks")], "per_warp")
        if len(warps) != 3 or len(repeats) != 3:
            raise LayoutSyntaxError(f"'#{kind}<...>' needs 3 warp counts and 3 block counts")
        interleaved = fields.pop("warpgroup rows", None) is not None
        threads = _int(fields, "threads", kind, warps[0] * warps[1] * warps[2] * WARP)
        _done(fields, kind)
        shape = (warps[0] * repeats[0], warps[1] * repeats[1] * 16, warps[2] * repeats[2] * 8)
        return cls(threads, shape, warps, interleaved)  # type: ignore[no-any-return]

    return build


def _mma_rows(text: str, pos: int) -> tuple[MmaRowLayout, int]:
    parent, pos = _parse(text, pos)
    if not isinstance(parent, MmaLayout):
        raise LayoutSyntaxError(f"'#mma_rows<...>' holds an mma layout, not {parent.describe()}")
    return MmaRowLayout(parent), _expect(text, pos, ">")


def _broadcast_source(text: str, pos: int) -> tuple[BroadcastSourceLayout, int]:
    shapes = re.compile(r"([0-9x]+) to ([0-9x]+) of ").match(text, pos)
    if shapes is None:
        raise LayoutSyntaxError(f"expected 'SRC to DST of LAYOUT' in '#broadcast_source<' at '{text[pos:pos + 40]}'")
    parent, end = _parse(text, shapes.end())
    layout = BroadcastSourceLayout(parent, _dims(shapes.group(2), "to"), _dims(shapes.group(1), "source"))
    return layout, _expect(text, end, ">")


def _expect(text: str, pos: int, what: str) -> int:
    if not text.startswith(what, pos):
        raise LayoutSyntaxError(f"expected '{what}' at '{text[pos:pos + 40]}'")
    return pos + len(what)


_KINDS: dict[str, Callable] = {
    "blocked": _blocked,
    "row_warp": _row_warp,
    "mma": _mma_of(MmaLayout),
    "tmem_acc": _mma_of(TmemAccLayout),
    "tmem_pair_acc": _mma_of(PairAccLayout),
    "mma_rows": _mma_rows,
    "broadcast_source": _broadcast_source,
}
_NESTED = frozenset({"mma_rows", "broadcast_source"})   # they hold another layout: parsed by position
