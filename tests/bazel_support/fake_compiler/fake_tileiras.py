"""A stand-in `tileiras` for testing the Bazel rules apart from the real compiler.

It speaks the two command lines tileir_library() uses and writes outputs
that depend only on its inputs (so caching behaves as with the real tool):

    fake_tileiras --emit=ptx --gpu-name G -ON [...] SRC -o OUT.ptx --emit-metadata
    fake_tileiras --emit=cubin --gpu-name G -ON [...] IN.ptx -o OUT.cubin

The kernel is named after the source file's stem.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path


def _value(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def main(argv: list[str]) -> int:
    emit = next(a.split("=", 1)[1] for a in argv if a.startswith("--emit="))
    gpu = _value(argv, "--gpu-name")
    out = Path(_value(argv, "-o"))
    flags = [a for a in argv if a.startswith("-O") or a in ("--lineinfo", "-g")]
    positional = [a for i, a in enumerate(argv) if not a.startswith("-") and argv[i - 1] not in ("-o", "--gpu-name")]
    src = Path(positional[0])
    digest = hashlib.sha256(src.read_bytes() + " ".join([gpu] + flags).encode()).hexdigest()
    if emit == "ptx":
        stem = src.name.split(".")[0]
        out.write_text(f"// fake PTX\n.target {gpu}\n// kernel {stem} {digest}\n")
        meta = {"kernels": [{"name": stem}], "gpu": gpu}
        Path(str(out) + ".json").write_text(json.dumps(meta, sort_keys=True) + "\n")
    elif emit == "cubin":
        out.write_bytes(b"FAKECUBIN" + bytes.fromhex(digest))
    else:
        print(f"fake_tileiras: unsupported --emit={emit}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
