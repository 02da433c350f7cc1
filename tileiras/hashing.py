"""The digest of cache keys, entries and stamps: BLAKE2b-256, from CPython's own module.

SHA-256 costs a cache more than it should on this path: `import hashlib` loads
OpenSSL (about 10 M instructions, more than all the hashing a compile does),
and CPython 3.11's own SHA-256 takes about 55 instructions a byte, so hashing a
PTX and a cubin (tens of kilobytes each) for their entries and the cubin's key
cost a miss several million instructions and a hit as many again. BLAKE2b, as
strong a hash, takes about 14 a byte in `_blake2`, which loads as cheaply as
`_sha256`. Tool identities stay SHA-256: they come from the installers' RECORDs.

A PTX is hashed once per process (`text_digest`): its cubin's key names the
digest of its text, and its own cache entry (store.py puts the PTX first in it)
continues that same hash over the rest of the entry.
"""

from __future__ import annotations

try:  # the C module directly: hashlib would load OpenSSL for nothing
    from _blake2 import blake2b as _blake2b
except ImportError:  # a Python built without it: hashlib's (the same digests)
    from hashlib import blake2b as _blake2b

DIGEST_SIZE = 32  # bytes: 64 hex digits, as a key's name


def digest(data: bytes = b"") -> object:
    """A BLAKE2b-256 object (update, digest, hexdigest) holding `data`."""
    return _blake2b(data, digest_size=DIGEST_SIZE)


_TEXTS = 8  # PTX texts remembered (one per target of a compile), so a cache server's worker keeps few
_texts: dict[int, tuple[str, object]] = {}  # id(text) -> (text, the BLAKE2b state of its UTF-8 bytes)


def text_digest(text: str) -> object:
    """A BLAKE2b-256 object holding `text` in UTF-8 (a copy: update it freely); the state is kept
    for the last few texts, so hashing one text for two purposes costs one pass over it."""
    known = _texts.get(id(text))
    if known is None or known[0] is not text:
        if len(_texts) >= _TEXTS:
            del _texts[next(iter(_texts))]
        known = _texts[id(text)] = (text, digest(text.encode("utf-8")))
    return known[1].copy()  # type: ignore[attr-defined]
