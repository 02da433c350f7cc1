"""TileGym's generator modules for tests that export TileGym kernels at other sizes.

tests/realistic has modules named `configs` and `generate` too, and whichever a pytest process
imports first would shadow the other: `tilegym()` loads TileGym's while the others are out of
the way and puts them back afterwards (generate.py imports configs when it runs, so exports
happen inside the `with`)."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

TILEGYM = Path(__file__).resolve().parent / "tilegym"
_NAMES = ("configs", "generate")


@contextlib.contextmanager
def tilegym() -> Iterator[tuple[ModuleType, ModuleType]]:
    """(configs, generate) of tests/tilegym, with the working folder there (the generator names
    kernel sources relative to it)."""
    saved = {name: sys.modules.pop(name, None) for name in _NAMES}
    sys.path.insert(0, str(TILEGYM))
    here = os.getcwd()
    os.chdir(TILEGYM)
    try:
        import configs
        import generate
        yield configs, generate
    finally:
        os.chdir(here)
        sys.path.remove(str(TILEGYM))
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
