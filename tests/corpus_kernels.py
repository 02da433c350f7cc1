"""The corpus's cuTile kernel files (tests/corpus/kernels/<family>.py) as modules, for tests that
export one of its kernels with other constraints or sizes."""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType

CORPUS = Path(__file__).resolve().parent / "corpus"


@lru_cache(maxsize=None)
def load(family: str) -> ModuleType:
    if str(CORPUS) not in sys.path:
        sys.path.insert(0, str(CORPUS))   # the kernel files import corpus_spec
    spec = importlib.util.spec_from_file_location(f"corpus_kernels_{family}", CORPUS / "kernels" / f"{family}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module
