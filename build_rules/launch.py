"""Run a tileiras command from the package root this file sits in.

    python /path/to/build_rules/launch.py tileiras|tileir|build_rules|cache-server [ARGS...]

The root (a source checkout, or the site-packages the wheel went into) goes
first on sys.path in place of this script's own directory, so the compiler
runs from where the build system found it, whatever the environment's
PYTHONPATH or working directory, and no module in build_rules/ can shadow a
top-level one.

When the build ran the action through the cache client (build_rules/client.c)
and no cache server answered it, the client sets TILEIRAS_SERVER_SOCKET: then
a server is started there for the actions that follow (tileiras/cache/server.py).
"""

from __future__ import annotations

import os
import runpy
import sys

MODULES: dict[str, str] = {
    "tileiras": "tileiras.driver.tileiras_main",
    "tileir": "tileiras.driver.tileir_main",
    "build_rules": "build_rules",
    "cache-server": "tileiras.cache.server",
}
SERVED_TOOLS: tuple[str, ...] = ("tileiras", "tileir")


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in MODULES:
        sys.stderr.write(f"usage: launch.py {{{','.join(MODULES)}}} [ARGS...]\n")
        sys.exit(2)
    name = sys.argv[1]
    # Build steps start the compiler hundreds of times: keep the byte-compiled modules of a
    # source checkout even where PYTHONDONTWRITEBYTECODE is set (an installed wheel has them).
    sys.dont_write_bytecode = False
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    socket_path = os.environ.pop("TILEIRAS_SERVER_SOCKET", "")
    # Only for `PROGRAM launch.py TOOL ...` as the client runs it: the server answers that prefix.
    if socket_path and name in SERVED_TOOLS and sys.orig_argv[1:2] == [sys.argv[0]]:
        from tileiras.cache.server_start import start_in_background

        start_in_background(socket_path, sys.orig_argv[0], sys.orig_argv[1])
    sys.argv = [name, *sys.argv[2:]]
    runpy.run_module(MODULES[name], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
