"""The lowering's op table (lowering/registry.py): one op name -> module table, each module loaded at
the first op of its family, and a small kernel's compile imports only the lowering it uses."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

from tileiras.lowering import registry

ROOT = Path(__file__).resolve().parents[1]


def test_the_table_names_each_module_s_ops_exactly() -> None:
    for module in sorted(set(registry.MODULES.values())):
        table = importlib.import_module(f"tileiras.lowering.{module}").LOWERINGS
        assert set(table) == {name for name, m in registry.MODULES.items() if m == module}, module


def test_lookups_load_the_family_and_unknown_names_stay_missing() -> None:
    assert registry.LOWERINGS.get("cuda_tile.addf") is not None
    assert registry.LOWERINGS["cuda_tile.reduce"] is registry.LOWERINGS.get("cuda_tile.reduce")
    assert registry.LOWERINGS.get("cuda_tile.no_such_op") is None
    try:
        registry.LOWERINGS["cuda_tile.no_such_op"]
    except KeyError:
        pass
    else:
        raise AssertionError("an unknown op has no lowering")


PROBE = """
import os, sys
real_exit = os._exit
main_pid = os.getpid()   # not the LLVM worker's fork
def report(code=0):
    if os.getpid() == main_pid:
        print("modules:", " ".join(sorted(m for m in sys.modules if m.startswith("tileiras."))), flush=True)
    real_exit(code)
os._exit = report
from tileiras.driver.tileiras_main import main
try:
    main(sys.argv[1:])
finally:
    report()
"""

VIEW = "partition_view<tile=(1024), tensor_view<?xf32, strides=[1]>>"
VECTOR_ADD = "\n".join([
    "cuda_tile.module @m {",
    "entry @vector_add(%a: tile<ptr<f32>>, %b: tile<ptr<f32>>, %c: tile<ptr<f32>>, %n: tile<i32>) {",
    "  %tok = make_token : token",
    *(f"  %t{x} = make_tensor_view %{x}, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>"
      for x in "abc"),
    *(f"  %p{x} = make_partition_view %t{x} : {VIEW}" for x in "abc"),
    "  %bx, %by, %bz = get_tile_block_id : tile<i32>",
    f"  %x, %t1 = load_view_tko weak %pa[%bx] token = %tok : {VIEW}, tile<i32> -> tile<1024xf32>, token",
    f"  %y, %t2 = load_view_tko weak %pb[%bx] token = %tok : {VIEW}, tile<i32> -> tile<1024xf32>, token",
    "  %s = addf %x, %y : tile<1024xf32>",
    f"  %t3 = store_view_tko weak %s, %pc[%bx] token = %tok : tile<1024xf32>, {VIEW}, tile<i32> -> token",
    "  return", "}", "}"]) + "\n"

# the tensor cores', TMA's, tensor memory's, warp specialization's and the scheduler's modules
HEAVY = ("tileiras.lowering.ops_mma", "tileiras.lowering.ops_wgmma", "tileiras.lowering.ops_tcgen05",
         "tileiras.lowering.ops_blockscale", "tileiras.lowering.kmajor_copy", "tileiras.lowering.pipelined_loop",
         "tileiras.lowering.tma_copy", "tileiras.lowering.tmem_epilogue", "tileiras.lowering.warp_specialize_tcgen05",
         "tileiras.lowering.cta_pair", "tileiras.lowering.multicast", "tileiras.lowering.ops_debug",
         "tileiras.lowering.ops_reduce", "tileiras.schedule.pipeline", "tileiras.schedule.modulo")


def test_a_vector_add_imports_no_tensor_core_or_tma_lowering(tmp_path: Path) -> None:
    kernel = tmp_path / "vector_add.mlir"
    kernel.write_text(VECTOR_ADD)
    argv = ["--no-cache", "--gpu-name", "sm_90", str(kernel), "-o", str(tmp_path / "k.cubin")]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], env=env, capture_output=True, text=True)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("modules:")]
    assert lines and (tmp_path / "k.cubin").exists(), done.stdout + done.stderr
    loaded = set(lines[0].split()[1:])
    assert "tileiras.lowering.ops_arith" in loaded
    assert [m for m in HEAVY if m in loaded] == []
