"""The compile cache keeps a compile's remarks beside the PTX and cubin they describe."""

from __future__ import annotations

from typing import Any, Optional

from ..remarks import Remark, dumps, loads


def remarks_key(key: Any, memo_dir: str) -> Any:
    """The cache key of a compile's remarks, made from its PTX or cubin key (a str or a lazy cache Key)
    and our code: a cubin's remarks are ptxas's report as our code reads it, which the cubin's key
    (ptxas and the PTX only) does not name."""
    from .keys import Key, make_key

    def make(of: str) -> str:
        from .versions import compiler_fingerprint

        return make_key(stage="remarks", of=of, compiler=compiler_fingerprint(memo_dir))

    return Key(make, key)


def cached(cache: Any, key: Any) -> Optional[list[Remark]]:
    blob = cache.get_blob(remarks_key(key, cache.root))
    return None if blob is None else loads(blob.decode("utf-8"))


def keep(cache: Any, key: Any, remarks: list[Remark]) -> None:
    cache.put_blob(remarks_key(key, cache.root), dumps(remarks).encode("utf-8"))
