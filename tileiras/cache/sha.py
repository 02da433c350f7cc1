"""SHA-256 for cache keys and entries, without loading OpenSSL for a few kilobytes.

`import hashlib` initialises OpenSSL (~2 ms of every compile that touches the
cache); CPython's own SHA-256 loads in ~0.2 ms and hashes the tens of
kilobytes of a key or an entry in well under a millisecond. OpenSSL is five
times faster per byte, so it still hashes anything larger than LARGE. Both
give the same digest.
"""

from __future__ import annotations

import sys

LARGE = 1 << 20

try:  # the module of this CPython first: a failed import costs as much as a successful one
    if sys.version_info >= (3, 12):
        from _sha2 import sha256 as _own
    else:
        from _sha256 import sha256 as _own
except ImportError:  # another Python: hashlib is its only SHA-256
    _own = None


def sha256(data: bytes = b"") -> object:
    """A SHA-256 object (update, digest, hexdigest) holding `data`."""
    if _own is None or len(data) > LARGE:
        import hashlib

        return hashlib.sha256(data)
    return _own(data)
