"""Token ordering and alias facts (transforms/token_order.py, transforms/alias.py).

A token orders one memory op after another; because a tile's elements live in
different threads, the lowering must make the earlier op's accesses visible to
the whole CTA first - unless the alias facts show no thread can see a
difference. These tests pin the decisions on small kernels and check what the
PTX then contains. Whether the remaining barriers are enough is checked by
running the corpus on the emulator with its race checker.
"""

from __future__ import annotations

import re

import pytest

from tileiras.frontend import load_module
from tileiras.lowering.pipeline import lower_module

_HEAD = """  global @g1 <f32: [0.0, 0.0]> : tile<2xf32>
  global @g2 <f32: [0.0, 0.0]> : tile<2xf32>
  entry @k(%a: tile<ptr<f32>>, %b: tile<ptr<f32>>, %n: tile<i32>, %s: tile<i32>) {
    %t0 = make_token : token
    %one = constant <i32: 1> : tile<i32>
    %c0 = constant <i32: 0> : tile<i32>
    %c1 = constant <i32: 1> : tile<i32>
    %ta = make_tensor_view %a, shape = [%n, %n], strides = [%s, %one] : tile<i32> -> tensor_view<?x?xf32, strides=[?,?]>
    %tb = make_tensor_view %b, shape = [%n, %n], strides = [%s, %one] : tile<i32> -> tensor_view<?x?xf32, strides=[?,?]>
    %pa = make_partition_view %ta : partition_view<tile=(1xW), tensor_view<?x?xf32, strides=[?,?]>>
    %pa2 = make_partition_view %ta : partition_view<tile=(1xW), tensor_view<?x?xf32, strides=[?,?]>>
    %pb = make_partition_view %tb : partition_view<tile=(1xW), tensor_view<?x?xf32, strides=[?,?]>>
    %x = constant <f32: 1.0> : tile<1xWxf32>
"""
_VIEW = "partition_view<tile=(1xW), tensor_view<?x?xf32, strides=[?,?]>>"


def _text(body: str, width: int) -> str:
    return (_HEAD + body + "    return\n  }\n").replace("VIEW", _VIEW).replace("W", str(width))


def _module(body: str, width: int = 128):
    return load_module(_text(body, width).encode(), "token_order.mlir")


def _waits(body: str, width: int = 128) -> dict[str, str]:
    """token name (as written in `body`) -> 'barrier' or 'unless' and its runtime tests, for every op that waits."""
    from tileiras.tileas.assign_layouts import LayoutAssignment
    from tileiras.lowering.pipeline import _token_order
    from tileiras.tileaa.passes import to_tileaa
    from tileiras.tileas.passes import run_passes

    lines = _text(body, width).splitlines()
    entry = next(op for op in _module(body, width).regions[0].block.operations if op.name == "cuda_tile.entry")
    to_tileaa(entry)
    run_passes(entry, LayoutAssignment(entry, 128))
    out = {}
    for op, wait in _token_order(entry).waits.items():
        token = lines[op.location.line - 1].split("=")[0].split(",")[-1].strip()
        out[token] = "barrier" if wait.barrier else "unless " + " ".join(test[0] for test in wait.unless)
    return out


def _store(result: str, view: str, row: str, token: str) -> str:
    return f"    {result} = store_view_tko weak %x, {view}[{row}, %c0] token = {token} : tile<1xWxf32>, VIEW, tile<i32> -> token\n"


def _load(result: str, view: str, row: str, token: str, ordering: str = "weak") -> str:
    scope = "" if ordering == "weak" else " device"
    return (f"    %v{result[1:]}, {result} = load_view_tko {ordering}{scope} {view}[{row}, %c0] token = {token}"
            f" : VIEW, tile<i32> -> tile<1xWxf32>, token\n")


def test_reads_after_reads_do_not_wait() -> None:
    assert _waits(_load("%r1", "%pa", "%c0", "%t0") + _load("%r2", "%pb", "%c0", "%r1")) == {}


def test_a_read_after_a_write_of_another_array_waits_if_their_memory_meets() -> None:
    # two kernel arguments may point at the same memory (an in-place update)
    assert _waits(_store("%w1", "%pb", "%c0", "%t0") + _load("%r2", "%pa", "%c0", "%w1")) \
        == {"%r2": "unless separate"}


def test_distinct_tiles_of_one_partition_wait_only_if_the_view_repeats_memory() -> None:
    # %pa and %pa2 are two partition views of one tensor view: the same tiling
    body = _store("%w1", "%pa", "%c0", "%t0") + _store("%w2", "%pa2", "%c1", "%w1")
    assert _waits(body) == {"%w2": "unless injective"}


def test_the_same_elements_in_the_same_threads_do_not_wait() -> None:
    body = _store("%w1", "%pa", "%c1", "%t0") + _load("%r2", "%pa2", "%c1", "%w1")
    assert _waits(body, width=128) == {}          # one element per thread, same layout
    assert _waits(body, width=64) == {"%r2": "barrier"}   # replicated: a copy's thread did not write


def test_join_tokens_carry_every_input() -> None:
    body = (_store("%w1", "%pb", "%c0", "%t0") + _load("%r1", "%pa", "%c0", "%t0")
            + "    %j = join_tokens %r1, %w1 : token\n" + _load("%r2", "%pa", "%c1", "%j"))
    assert _waits(body) == {"%r2": "unless separate"}


def test_a_barrier_fences_everything_before_it() -> None:
    body = (_store("%w1", "%pa", "%c1", "%t0") + _load("%r2", "%pa2", "%c1", "%w1")
            + _load("%r3", "%pb", "%c0", "%r2"))
    # replicated tiles: %r2 waits for %w1 with a barrier, which also covers %r3
    assert _waits(body, width=64) == {"%r2": "barrier"}
    # a runtime test may skip the barrier: it fences nothing
    assert _waits(body, width=128) == {"%r3": "unless separate"}


def test_acquire_and_release_always_wait() -> None:
    assert _waits(_load("%r1", "%pa", "%c0", "%t0", "acquire") + _load("%r2", "%pb", "%c0", "%r1")) \
        == {"%r2": "barrier"}
    body = _load("%r1", "%pa", "%c0", "%t0") + (
        "    %w2 = store_view_tko release device %x, %pb[%c0, %c0] token = %r1 : tile<1xWxf32>, VIEW, tile<i32> -> token\n")
    assert _waits(body) == {"%w2": "barrier"}


def test_distinct_globals_and_allocas_do_not_alias() -> None:
    body = """    %g1 = get_global @g1 : tile<ptr<f32>>
    %g2 = get_global @g2 : tile<ptr<f32>>
    %buf = alloca num_elem = 2, alignment = 16 : tile<ptr<f32>>
    %y = constant <f32: 2.0> : tile<f32>
    %w1 = store_ptr_tko weak %g1, %y token=%t0 : tile<ptr<f32>>, tile<f32> -> token
    %v2, %r2 = load_ptr_tko weak %g2 token=%w1 : tile<ptr<f32>> -> tile<f32>, token
    %w3 = store_ptr_tko weak %buf, %y token=%t0 : tile<ptr<f32>>, tile<f32> -> token
    %v4, %r4 = load_view_tko weak %pa[%c0, %c0] token = %w3 : VIEW, tile<i32> -> tile<1xWxf32>, token
    %v5, %r5 = load_ptr_tko weak %g1 token=%w1 : tile<ptr<f32>> -> tile<f32>, token
"""
    # %r5 reads the global %w1 wrote (a replicated 0-d tile: another thread wrote it)
    assert _waits(body) == {"%r5": "barrier"}


def test_a_loop_carries_its_accesses_into_the_next_iteration() -> None:
    body = """    %four = constant <i32: 4> : tile<i32>
    %tok = for %i in (%c0 to %four, step %one) : tile<i32> iter_values(%t = %t0) -> (token) {
      %v, %r = load_view_tko weak %pa[%i, %c0] token = %t : VIEW, tile<i32> -> tile<1xWxf32>, token
      %w = store_view_tko weak %v, %pb[%i, %c0] token = %r : tile<1xWxf32>, VIEW, tile<i32> -> token
      continue %w : token
    }
"""
    # the load of iteration i+1 follows the store of iteration i (another array: may alias); the
    # store follows this iteration's load and the store of tile i-1 (tile i differs while the loop runs)
    assert _waits(body) == {"%r": "unless separate", "%w": "unless separate injective"}


_NESTED = """    %four = constant <i32: 4> : tile<i32>
    %tok = for %j in (%c0 to %four, step %one) : tile<i32> iter_values(%u = %t0) -> (token) {
      %inner = for %i in (%c0 to %four, step %one) : tile<i32> iter_values(%t = %u) -> (token) {
        %w = store_view_tko weak %x, %pa[INDEX, %c0] token = %t : tile<1xWxf32>, VIEW, tile<i32> -> token
        continue %w : token
      }
      continue %inner : token
    }
"""


@pytest.mark.parametrize("index,wait", [
    ("%i", "barrier"),   # the next run of the inner loop starts at tile 0 again
    # the same tile (and thread) in every inner iteration; a later tile in each outer one
    ("%j", "unless injective"),
])
def test_an_induction_variable_differs_only_within_one_run_of_its_loop(index: str, wait: str) -> None:
    assert _waits(_NESTED.replace("INDEX", index)) == {"%w": wait}


def test_a_view_made_inside_a_loop_is_a_new_view_each_iteration() -> None:
    body = """    %four = constant <i32: 4> : tile<i32>
    %tok = for %i in (%c0 to %four, step %one) : tile<i32> iter_values(%t = %t0) -> (token) {
      %n2 = addi %n, %i : tile<i32>
      %tv = make_tensor_view %a, shape = [%n2, %n], strides = [%s, %one] : tile<i32> -> tensor_view<?x?xf32, strides=[?,?]>
      %pv = make_partition_view %tv : VIEW
      %w = store_view_tko weak %x, %pv[%c0, %c0] token = %t : tile<1xWxf32>, VIEW, tile<i32> -> token
      continue %w : token
    }
"""
    # the same SSA tile of a different view: neither the same elements nor a test of this view
    assert _waits(body) == {"%w": "barrier"}


def test_if_results_carry_both_branches() -> None:
    body = """    %cond = cmpi equal %n, %s, signed : tile<i32> -> tile<i1>
    %tok = if %cond -> (token) {
      %w = store_view_tko weak %x, %pb[%c0, %c0] token = %t0 : tile<1xWxf32>, VIEW, tile<i32> -> token
      yield %w : token
    } else {
      yield %t0 : token
    }
""" + _load("%r2", "%pa", "%c0", "%tok")
    assert _waits(body) == {"%r2": "unless separate"}


def _llvm(body: str, width: int = 128) -> str:
    return lower_module(_module(body, width), "sm_90")[0]


def test_the_lowering_tests_injectivity_once_per_wait() -> None:
    ir = _llvm(_store("%w1", "%pa", "%c0", "%t0") + _store("%w2", "%pa2", "%c1", "%w1"))
    assert ir.count("call void @llvm.nvvm.barrier0()") == 1
    sync = ir.index("call void @llvm.nvvm.barrier0()")
    assert "icmp sgt i64" in ir[:sync]   # the stride test guards the barrier


def test_the_lowering_tests_address_ranges() -> None:
    ir = _llvm(_store("%w1", "%pb", "%c0", "%t0") + _load("%r2", "%pa", "%c0", "%w1"))
    assert ir.count("call void @llvm.nvvm.barrier0()") == 1
    assert ir.count("ptrtoint ptr") == 2 and "icmp ule i64" in ir


def test_the_lowering_emits_no_barrier_without_a_wait() -> None:
    ir = _llvm(_load("%r1", "%pa", "%c0", "%t0") + _load("%r2", "%pb", "%c0", "%r1"))
    assert "barrier0" not in ir and "membar" not in ir


@pytest.mark.parametrize("flag", ["--print-ir-after-all"])
def test_the_waits_are_printed_after_the_pass(flag: str, tmp_path, capsys) -> None:
    from tileiras.lowering.pipeline import lower_module as lower

    lower(_module(_store("%w1", "%pb", "%c0", "%t0") + _load("%r2", "%pa", "%c0", "%w1")), "sm_90",
          print_ir_after_all=True)
    err = capsys.readouterr().err
    assert "IR Dump After token-order" in err
    assert re.search(r"load_view_tko %\w+: barrier unless separate %\w+, %\w+ \(after store_view_tko %\w+\)", err)

