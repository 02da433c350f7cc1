"""Character-level scanner for the TileIR text form (MLIR syntax subset).

The parser asks for what it expects next (`keyword`, `punct`, `value_ref`,
`integer`, `string`, ...) instead of consuming a pre-built token stream:
MLIR's grammar is context dependent (`8x16xf32`, `->`, `x`), and asking is
the simplest faithful way to scan it. Errors carry line and column.
"""

from __future__ import annotations

import re

from ..errors import CompileError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Optional

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*")
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_SUFFIX_ID = re.compile(r"[A-Za-z0-9_$.\-]+")
_INT = re.compile(r"-?(0x[0-9A-Fa-f]+|[0-9]+)")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)")
_WS = re.compile(r"(?:\s+|//[^\n]*)+")


class ParseError(CompileError):
    """A syntax error; `ssa` marks value-resolution errors (never attributed to a custom op)."""

    def __init__(self, message: str, ssa: bool = False) -> None:
        super().__init__(message)
        self.ssa = ssa


class Lexer:
    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.pos = 0
        self.filename = filename
        self._line_starts: Optional[list[int]] = None

    # -- positions and errors ---------------------------------------------------
    def line_col(self, pos: Optional[int] = None) -> tuple[int, int]:
        import bisect

        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        p = self.pos if pos is None else pos
        i = bisect.bisect_right(self._line_starts, p) - 1
        return i + 1, p - self._line_starts[i] + 1

    def error(self, message: str, pos: Optional[int] = None, ssa: bool = False) -> ParseError:
        line, col = self.line_col(pos)
        return ParseError(f"{self.filename}:{line}:{col}: error: {message}", ssa=ssa)

    # -- scanning -----------------------------------------------------------------
    def skip(self) -> None:
        m = _WS.match(self.text, self.pos)
        if m:
            self.pos = m.end()

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def peek(self, n: int = 1) -> str:
        self.skip()
        return self.text[self.pos:self.pos + n]

    def startswith(self, s: str) -> bool:
        self.skip()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        """Consume punctuation `s` if it comes next."""
        self.skip()
        if self.text.startswith(s, self.pos):
            if s == "-" and self.text.startswith("->", self.pos):
                return False
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: Optional[str] = None) -> None:
        if not self.accept(s):
            raise self.error(f"expected '{s}'" + (f" {what}" if what else ""))

    def peek_keyword(self) -> Optional[str]:
        self.skip()
        m = _BARE.match(self.text, self.pos)
        return m.group(0) if m else None

    def accept_keyword(self, kw: str) -> bool:
        if self.peek_keyword() == kw:
            self.pos += len(kw)
            return True
        return False

    def expect_keyword(self, kw: str) -> None:
        if not self.accept_keyword(kw):
            raise self.error(f"expected '{kw}'")

    def keyword(self, what: str = "keyword") -> str:
        kw = self.peek_keyword()
        if kw is None:
            raise self.error(f"expected {what}")
        self.pos += len(kw)
        return kw

    def prefixed(self, sigil: str) -> Optional[str]:
        """`%name`, `@name`, `#name`, `^name` (with quoted forms for @)."""
        self.skip()
        if not self.text.startswith(sigil, self.pos):
            return None
        p = self.pos + 1
        if sigil == "@" and self.text.startswith('"', p):
            self.pos = p
            return self.string()
        m = _SUFFIX_ID.match(self.text, p)
        if not m:
            raise self.error(f"expected identifier after '{sigil}'")
        self.pos = m.end()
        return m.group(0)

    def integer(self, what: str = "integer") -> int:
        self.skip()
        m = _INT.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}")
        self.pos = m.end()
        s = m.group(0)
        neg = s.startswith("-")
        body = s[1:] if neg else s
        if len(body) > 64:
            raise self.error("integer literal is too large", m.start())
        v = int(body, 16) if body.startswith(("0x", "0X")) else int(body)
        return -v if neg else v

    def peek_number(self) -> bool:
        self.skip()
        return bool(_INT.match(self.text, self.pos))

    def number_token(self) -> str:
        """An integer or float literal, as text (hex kept as written)."""
        self.skip()
        m = _FLOAT.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            return m.group(0)
        m = _INT.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            return m.group(0)
        raise self.error("expected a number")

    def string(self) -> str:
        self.skip()
        if not self.text.startswith('"', self.pos):
            raise self.error("expected string literal")
        p = self.pos + 1
        out = bytearray()
        text = self.text
        while True:
            if p >= len(text) or text[p] == "\n":
                raise self.error("unterminated string literal")
            c = text[p]
            if c == '"':
                p += 1
                break
            if c == "\\":
                nxt = text[p + 1:p + 2]
                if nxt in ('"', "\\"):
                    out += nxt.encode()
                    p += 2
                elif nxt == "n":
                    out += b"\n"
                    p += 2
                elif nxt == "t":
                    out += b"\t"
                    p += 2
                elif re.match(r"[0-9A-Fa-f]{2}", text[p + 1:p + 3]):
                    out.append(int(text[p + 1:p + 3], 16))
                    p += 3
                else:
                    raise self.error("unknown escape in string literal", p)
                continue
            out += c.encode("utf-8")
            p += 1
        self.pos = p
        return out.decode("utf-8", "replace")
