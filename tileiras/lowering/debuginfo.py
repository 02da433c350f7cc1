"""Line information: LLVM debug metadata built from the module's own locations.

`--lineinfo` uses `emissionKind: DebugDirectivesOnly` (`.loc`/`.file` lines
only: ptxas keeps optimizing), `-g` uses `FullDebug` (ptxas then needs -O0,
which the driver enforces). Each kernel gets a DISubprogram; a location in
another file than its kernel's is scoped by a DILexicalBlockFile.
"""

from __future__ import annotations

import os
from typing import Any, Optional


class DebugInfo:
    def __init__(self, full: bool, producer: str = "tileiras") -> None:
        self.full = full
        self.producer = producer
        self.nodes: list[str] = []          # "!N = ..." lines, in id order
        self._files: dict[str, int] = {}
        self._locs: dict[tuple[int, int, int], int] = {}
        self._block_files: dict[tuple[int, int], int] = {}
        self.cu: Optional[int] = None
        self._flags: list[int] = []

    def _node(self, text: str) -> int:
        self.nodes.append(text)
        return len(self.nodes) - 1

    def file(self, path: str) -> int:
        if path not in self._files:
            directory, name = os.path.split(path)
            self._files[path] = self._node(f'!DIFile(filename: "{_escape(name)}", directory: "{_escape(directory)}")')
        return self._files[path]

    def compile_unit(self, path: str) -> int:
        if self.cu is None:
            kind = "FullDebug" if self.full else "DebugDirectivesOnly"
            f = self.file(path)
            self.cu = self._node(f'distinct !DICompileUnit(language: DW_LANG_C99, file: !{f}, producer: '
                                 f'"{self.producer}", isOptimized: {"false" if self.full else "true"}, '
                                 f'runtimeVersion: 0, emissionKind: {kind})')
        return self.cu

    def subprogram(self, name: str, location: Any) -> int:
        path = getattr(location, "file", "") or "<unknown>"
        line = int(getattr(location, "line", 0) or 0)
        cu = self.compile_unit(path)
        f = self.file(path)
        t = self._node("!DISubroutineType(types: !{})")
        flags = "DISPFlagDefinition" + ("" if self.full else " | DISPFlagOptimized")
        return self._node(f'distinct !DISubprogram(name: "{_escape(name)}", scope: !{f}, file: !{f}, line: {line}, '
                          f'type: !{t}, scopeLine: {line}, spFlags: {flags}, unit: !{cu})')

    def location(self, location: Any, subprogram: int, sub_file: str) -> Optional[int]:
        """The DILocation id of an op's location (None when it has none)."""
        if location is None or not getattr(location, "line", 0):
            return None
        path = getattr(location, "file", "") or sub_file
        scope = subprogram
        if path != sub_file:
            key = (subprogram, self.file(path))
            if key not in self._block_files:
                self._block_files[key] = self._node(
                    f"!DILexicalBlockFile(scope: !{subprogram}, file: !{key[1]}, discriminator: 0)")
            scope = self._block_files[key]
        key3 = (int(location.line), int(getattr(location, "column", 0) or 0), scope)
        if key3 not in self._locs:
            self._locs[key3] = self._node(f"!DILocation(line: {key3[0]}, column: {key3[1]}, scope: !{scope})")
        return self._locs[key3]

    def module_lines(self) -> list[str]:
        if self.cu is None:
            return []
        version = self._node('!{i32 2, !"Debug Info Version", i32 3}')
        dwarf = self._node('!{i32 2, !"Dwarf Version", i32 2}')
        lines = [f"!llvm.dbg.cu = !{{!{self.cu}}}", f"!llvm.module.flags = !{{!{version}, !{dwarf}}}"]
        return lines + [f"!{i} = {text}" for i, text in enumerate(self.nodes)]


def entry_location(entry: Any) -> Any:
    """The location of an entry op, or of its first located op."""
    if getattr(entry, "location", None) is not None and getattr(entry.location, "line", 0):
        return entry.location
    for op in entry.walk():
        if getattr(op, "location", None) is not None and getattr(op.location, "line", 0):
            return op.location
    return None


def _escape(text: str) -> str:
    return "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else f"\\{ord(c):02X}" for c in text)
