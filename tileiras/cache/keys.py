"""Cache keys: BLAKE2b-256 (hashing.py) of a canonical encoding of everything that can change an output.

`make_key(**parts)` hashes sorted-key JSON of the parts plus the key format and
our own version; bytes are replaced by their digest. The JSON text is made by
`canonical_json`, byte for byte what `json.dumps(sort_keys=True, separators=(",", ":"),
ensure_ascii=True)` writes, without importing json (and re): a miss makes its
keys while it waits, but its CPU time is not free on a busy machine. The two keys the driver
uses split along the pipeline, so a change that only affects ptxas (its
options, another ptxas) reuses the cached PTX:

  PTX key   = module content, target, options that change lowering or LLVM, LLVM, compiler
  cubin key = PTX text, target, options that change ptxas's output, ptxas

"compiler" is the fingerprint of our own files (versions.compiler_fingerprint),
so an edited checkout never reuses PTX or host objects made by other code;
"llvm" and "ptxas" are the digests of those tools' files (versions.py).

The driver hands the cache a `Key` (the function and its arguments) instead of
the key itself: a cache that holds nothing never needs the key for a lookup,
and a miss needs it only to store the result, which the driver does while it
waits for LLVM or ptxas, or after the output is written (store.py).
"""

from __future__ import annotations

import os

from tileiras import __version__

from .store import default_cache_dir

# hashing.py and versions.py are imported where used: a lookup in an empty cache makes no key, so a miss
# imports them while it waits for LLVM (as it makes its keys), not before its compile starts.

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only: a cache hit does not import typing
    from typing import Any, Callable

KEY_FORMAT = 4  # 4: BLAKE2b-256 (hashing.py; 3: SHA-256); 3: an object key holds its metadata as a document


class Key:
    """A value made when first needed: `Key(cubin_key, ptx, gpu, opts)`."""

    __slots__ = ("_make", "_args", "_value")

    def __init__(self, make: Callable[..., str], *args: Any) -> None:
        self._make, self._args = make, args
        self._value: str | None = None

    @property
    def value(self) -> str:
        """The key; arguments that are Keys themselves (a digest of the input) are made first."""
        if self._value is None:
            self._value = self._make(*(arg.value if isinstance(arg, Key) else arg for arg in self._args))
        return self._value

    @property
    def made(self) -> bool:
        return self._value is not None

    @property
    def names_our_code(self) -> bool:
        """Whether what is stored under this key may depend on our code: every key but that of a
        cubin ptxas alone makes from its PTX (cubin_key then does not name the compiler); a cubin
        with tensor maps (cubin_key's fifth argument) embeds the `.nv.host` object our code made."""
        return self._make is not cubin_key or (len(self._args) > 4 and self._args[4] is not None)


def _canonical(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        from ..hashing import digest

        return {"blake2b": digest(bytes(value)).hexdigest()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot put a {type(value).__name__} into a cache key")


# JSON's escapes of the characters a string cannot hold as they are (ensure_ascii spelling).
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(text: str) -> str:
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'  # the common case: nothing to escape
    out = []
    for char in text:
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:  # a surrogate pair, as JSON spells characters beyond the BMP
            code -= 0x10000
            out.append(f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}")
    return '"' + "".join(out) + '"'


def canonical_json(value: Any) -> str:
    """Compact, sorted-key, ASCII JSON of str, int, float, bool, None, lists, tuples and dicts with
    str keys: identical to json.dumps(value, sort_keys=True, separators=(",", ":"))."""
    kind = type(value)  # the exact types of a launch-metadata document first: a miss writes one
    if kind is dict:
        return "{" + ",".join([_string(k) + ":" + canonical_json(value[k]) for k in sorted(value)]) + "}"
    if kind is list:
        return "[" + ",".join([canonical_json(v) for v in value]) + "]"
    if kind is str:
        return _string(value)
    if kind is int:
        return int.__repr__(value)
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(k)}:{canonical_json(value[k])}" for k in sorted(value)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    raise TypeError(f"cannot put a {type(value).__name__} into a cache key")


def make_key(**parts: Any) -> str:
    from ..hashing import digest

    document = {"key_format": KEY_FORMAT, "tileiras": __version__, **_canonical(parts)}
    return digest(canonical_json(document).encode("ascii")).hexdigest()


def _text_digest(text: str) -> dict[str, str]:
    """What _canonical makes of `text` in UTF-8, from hashing.text_digest: the PTX's cache entry
    continues that hash rather than hashing the PTX again (store._pack_ptx)."""
    from ..hashing import text_digest

    return {"blake2b": text_digest(text).hexdigest()}  # type: ignore[attr-defined]


def _memo_dir(opts: Any) -> str:
    return os.fspath(getattr(opts, "cache_dir", None) or default_cache_dir())


def _file_digest(path: str) -> str:
    from ..hashing import digest

    try:
        with open(path, "rb") as handle:
            return digest(handle.read()).hexdigest()
    except OSError:
        return "unreadable"


def module_key(source_digest: str, gpu: str, opts: Any) -> str:
    """Key of the PTX (and launch metadata) compiled from one module for one target."""
    from ..host_platform import host_tag
    from .versions import compiler_fingerprint, llvm_identity

    return make_key(
        stage="ptx",
        source=source_digest,
        gpu=gpu,
        host=host_tag(),  # TMA (hidden tensor maps) only where the .nv.host callback can be made
        opt_level=getattr(opts, "opt_level", 3),
        lineinfo=bool(getattr(opts, "lineinfo", False)),
        debug=bool(getattr(opts, "device_debug", False)),
        preview=getattr(opts, "preview", None),
        sanitize=getattr(opts, "sanitize", None),
        libraries=[_file_digest(path) for path in getattr(opts, "libraries", [])],
        llvm=llvm_identity(_memo_dir(opts)),
        compiler=compiler_fingerprint(_memo_dir(opts)),
    )


def cubin_key(ptx: str, gpu: str, opts: Any, extra: tuple[str, ...] = (), tensor_maps: Any = None) -> str:
    """Key of the cubin ptxas makes from `ptx` for `gpu`. With `tensor_maps` (kernel -> its hidden
    TmaParams), the cubin embeds the `.nv.host` object made from them by our code and LLVM, which
    the key names instead of the object, so a hit never builds it; named only when there is one,
    so the keys of cubins without one do not change."""
    from .versions import compiler_fingerprint, llvm_identity, ptxas_identity

    parts = {} if tensor_maps is None else {"nv_host": {
        "maps": {name: [t.to_json() for t in specs] for name, specs in tensor_maps.items()},
        "compiler": compiler_fingerprint(_memo_dir(opts)), "llvm": llvm_identity(_memo_dir(opts))}}
    return make_key(
        **parts,
        stage="cubin",
        ptx=_text_digest(ptx),
        gpu=gpu,
        opt_level=getattr(opts, "opt_level", 3),
        lineinfo=bool(getattr(opts, "lineinfo", False)),
        debug=bool(getattr(opts, "device_debug", False)),
        ptxas_options=list(extra),
        ptxas=ptxas_identity(_memo_dir(opts)),
    )


def object_key(fatbin: bytes, metas: Any, host_arch: str, host_os: str,
               memo_dir: str | os.PathLike[str] | None = None) -> str:
    """Key of the host object (launchers + embedded fatbin) packaged from `fatbin`."""
    from .versions import compiler_fingerprint, llvm_identity

    items = metas if isinstance(metas, (list, tuple)) else [metas]
    return make_key(
        stage="object",
        fatbin=fatbin,
        metadata=[m.to_document() for m in items],
        host=f"{host_arch}-{host_os}",
        llvm=llvm_identity(memo_dir),
        compiler=compiler_fingerprint(memo_dir),
    )
