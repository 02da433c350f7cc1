"""Op name -> lowering function, assembled from the per-family tables."""

from __future__ import annotations

from typing import Callable

from . import (clusters, ops_arith, ops_control, ops_debug, ops_globals, ops_layout, ops_math, ops_memory,
               ops_reduce, ops_shape)

LOWERINGS: dict[str, Callable] = {}
for _table in (ops_arith.LOWERINGS, ops_math.LOWERINGS, ops_memory.LOWERINGS, ops_shape.LOWERINGS,
               ops_control.LOWERINGS, ops_reduce.LOWERINGS, ops_globals.LOWERINGS, ops_debug.LOWERINGS,
               ops_layout.LOWERINGS, clusters.LOWERINGS):
    LOWERINGS.update(_table)
