"""Op name -> lowering function, each family's module loaded at the first op it lowers.

`MODULES` is the one table of which module of this package lowers which op; a compile then imports
only the families its kernels use (a vector add loads neither the mma nor the debug ops' lowering).
tests/test_lowering_registry.py holds the table and the modules' own `LOWERINGS` to one set."""

from __future__ import annotations

from importlib import import_module

from ..dialects.elementwise import ARITHMETIC, MATH

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only: typing is not imported at run time
    from typing import Callable

MODULES: dict[str, str] = {
    **dict.fromkeys(ARITHMETIC, "ops_arith"),
    **dict.fromkeys(MATH, "ops_math"),
    **dict.fromkeys((
        "cuda_tile.alloca", "cuda_tile.assume", "cuda_tile.atomic_cas_tko", "cuda_tile.atomic_red_view_tko",
        "cuda_tile.atomic_rmw_tko", "cuda_tile.get_index_space_shape", "cuda_tile.get_num_tile_blocks",
        "cuda_tile.get_tensor_shape", "cuda_tile.get_tile_block_id", "cuda_tile.join_tokens",
        "cuda_tile.load_ptr_tko", "cuda_tile.load_view_tko", "cuda_tile.make_gather_scatter_view",
        "cuda_tile.make_partition_view", "cuda_tile.make_strided_view", "cuda_tile.make_tensor_view",
        "cuda_tile.make_token", "cuda_tile.offset", "cuda_tile.store_ptr_tko", "cuda_tile.store_view_tko",
    ), "ops_memory"),
    **dict.fromkeys((
        "cuda_tile.broadcast", "cuda_tile.cat", "cuda_tile.constant", "cuda_tile.extract", "cuda_tile.insert",
        "cuda_tile.iota", "cuda_tile.pack", "cuda_tile.permute", "cuda_tile.reshape", "cuda_tile.unpack",
    ), "ops_shape"),
    **dict.fromkeys((
        "cuda_tile.break", "cuda_tile.continue", "cuda_tile.for", "cuda_tile.if", "cuda_tile.loop",
        "cuda_tile.return", "cuda_tile.yield",
    ), "ops_control"),
    **dict.fromkeys((
        "cuda_tile.mmaf", "cuda_tile.mmaf_scaled", "cuda_tile.mmai", "cuda_tile.reduce", "cuda_tile.scan",
    ), "ops_reduce"),
    "cuda_tile.get_global": "ops_globals",
    **dict.fromkeys((
        "cuda_tile.assert", "cuda_tile.gdc_launch_dependents_tko", "cuda_tile.gdc_wait_tko",
        "cuda_tile.memory_fence_alias_tko", "cuda_tile.print", "cuda_tile.print_tko",
    ), "ops_debug"),
    "nv_tileas.convert_layout": "ops_layout",
    "nv_tileaa.cluster_ctarank": "clusters",
}


class _Lowerings(dict):
    """A dict filled a family at a time: a name not yet present loads the module `MODULES` names."""

    def __missing__(self, name: str) -> "Callable":
        module = MODULES.get(name)
        if module is None:
            raise KeyError(name)
        self.update(import_module(f"{__package__}.{module}").LOWERINGS)
        return dict.__getitem__(self, name)

    def get(self, name: str, default: "Callable | None" = None) -> "Callable | None":  # type: ignore[override]
        return self[name] if name in MODULES or dict.__contains__(self, name) else default


LOWERINGS: dict[str, "Callable"] = _Lowerings()
