"""Content digests of TileIR bytecode for the compile cache.

Source locations live only in the debug section (ops refer to them by
index), so a digest that leaves that section out is unchanged when only
line or column numbers move: such a compile is a cache hit whenever line
info is off. The producer section names the frontend and never affects code.
"""

from __future__ import annotations

from ..cache.hashing import digest as new_digest
from .encoding import SEC_DEBUG, SEC_PRODUCER

_IGNORED_WITHOUT_LINE_INFO = (SEC_DEBUG, SEC_PRODUCER)


def content_digest(data: bytes, keep_locations: bool) -> str:
    """The digest (cache.hashing) of the bytecode's code-relevant content (all of it when `keep_locations`)."""
    if keep_locations:
        return new_digest(data).hexdigest()
    from .sections import _read_header, _sections  # validates the framing; no IR is built

    _read_header(data)
    digest = new_digest(data[:12])
    for sid, (start, end) in sorted(_sections(data).items()):
        if sid in _IGNORED_WITHOUT_LINE_INFO:
            continue
        digest.update(sid.to_bytes(1, "little") + (end - start).to_bytes(8, "little"))
        digest.update(data[start:end])
    return digest.hexdigest()
