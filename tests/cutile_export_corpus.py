"""Run inside a cutile_env environment: cuTile's `export_kernel(..., output_format="cubin")` for
corpus kernels, through whichever `tileiras` cuTile picks. Prints one JSON document:

    {"compiler": path cuTile chose, "disassembler": ..., "results": [{"kernel", "gpu", "status",
     "message", "cubin", "remarks"}...]}

status: "ok", "refused" (cuTile's own TileUnsupportedFeatureError, before any compiler runs) or
"failed" (the compiler failed). `remarks` is the YAML text cuTile kept in its cache for the cubin.

usage: python cutile_export_corpus.py OUT_DIR GPU[,GPU...] [KERNEL...]
"""

from __future__ import annotations

import io
import json
import os
import sys
from contextlib import redirect_stderr
from pathlib import Path

HERE = Path(__file__).resolve().parent / "corpus"


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    gpus = sys.argv[2].split(",")
    wanted = set(sys.argv[3:])
    sys.path.insert(0, str(HERE))
    os.chdir(HERE)  # debug info names kernels/<file>.py, as in the committed corpus
    from generate import load_kernel_files, signatures

    import cuda.tile as ct
    from cuda.tile._compile import _find_compiler_bin, _find_tileirdisasm_bin
    from cuda.tile.compilation import export_kernel
    from cutile_cache._cache import cache_entries

    cache_dir = os.environ["CUDA_TILE_CACHE_DIR"]
    results = []
    for _, module in load_kernel_files():
        for kernel in module.KERNELS:
            if wanted and kernel.name not in wanted:
                continue
            for gpu in gpus:
                cubin = out / f"{kernel.name}.{gpu}.cubin"
                row = {"kernel": kernel.name, "gpu": gpu, "cubin": str(cubin), "remarks": None, "message": ""}
                log = io.StringIO()
                try:
                    with redirect_stderr(log):
                        export_kernel(kernel.function, signatures(kernel), str(cubin), output_format="cubin",
                                      gpu_code=gpu)
                    row["status"] = "ok"
                    newest = next(iter(cache_entries(cache_dir, max_count=1)), None)
                    row["remarks"] = newest.metadata.remarks if newest is not None else None
                except ct.TileUnsupportedFeatureError as exc:
                    row["status"], row["message"] = "refused", str(exc).strip().splitlines()[0]
                except Exception as exc:  # the compiler's failure, reported, not raised
                    row["status"], row["message"] = "failed", f"{type(exc).__name__}: {str(exc).strip()[:600]}"
                row["stderr"] = log.getvalue()[-2000:]
                results.append(row)
    print(json.dumps({"compiler": _find_compiler_bin().path, "disassembler": _find_tileirdisasm_bin(),
                      "results": results}))


if __name__ == "__main__":
    main()
