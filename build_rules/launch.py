"""Run a tileiras command from the package root this file sits in.

    python /path/to/build_rules/launch.py tileiras|tileir|build_rules [ARGS...]

The root (a source checkout, or the site-packages the wheel went into) goes
first on sys.path in place of this script's own directory, so the compiler
runs from where the build system found it, whatever the environment's
PYTHONPATH or working directory, and no module in build_rules/ can shadow a
top-level one.
"""

from __future__ import annotations

import os
import runpy
import sys

MODULES: dict[str, str] = {
    "tileiras": "tileiras.driver.tileiras_main",
    "tileir": "tileiras.driver.tileir_main",
    "build_rules": "build_rules",
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in MODULES:
        sys.stderr.write(f"usage: launch.py {{{','.join(MODULES)}}} [ARGS...]\n")
        sys.exit(2)
    name = sys.argv[1]
    # Build steps start the compiler hundreds of times: keep the byte-compiled modules of a
    # source checkout even where PYTHONDONTWRITEBYTECODE is set (an installed wheel has them).
    sys.dont_write_bytecode = False
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.argv = [name, *sys.argv[2:]]
    runpy.run_module(MODULES[name], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
