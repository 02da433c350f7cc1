"""Launcher of the fake compiler, with build_rules/launch.py's protocol:

    python fake_launch.py tileiras|tileir ARGS...
"""

from __future__ import annotations

import os
import sys

sys.path[0] = os.path.dirname(os.path.abspath(__file__))

import fake_tileir  # noqa: E402
import fake_tileiras  # noqa: E402

TOOLS = {"tileiras": fake_tileiras.main, "tileir": fake_tileir.main}

if __name__ == "__main__":
    sys.exit(TOOLS[sys.argv[1]](sys.argv[2:]))
