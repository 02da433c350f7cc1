"""Bounded cost: every kernel the driver accepts compiles in bounded time and memory, and one over
a compile limit (tileiras/tileaa/limits.py) is refused within seconds, naming the value and the
limit. The disassembler and assembler stay unlimited: their cost is linear in the input."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tileiras.tileaa import limits
from tileiras.errors import CompileError
from tileiras.frontend import load_module
from tileiras.text.parser import parse_module

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "bytecode"

ARGS = ("%arg0: tile<ptr<{e}>>, %arg1: tile<i32>, %arg2: tile<i32>, "
        "%arg3: tile<ptr<{e}>>, %arg4: tile<i32>, %arg5: tile<i32>")


# What keeps a kernel's tiles in registers whole (tileaa/tile_loops.py loops the others over chunks):
# an op after the loop would reorder, ordered after the store by its token.
ORDERED_AFTER = '  %p = print_tko "done\\n" token = {token} -> token'


def elementwise(n: int, element: str = "f32", adds: int = 1, whole: bool = True) -> str:
    """A kernel that loads a tile of `n` elements, adds to it `adds` times and stores it: the shape
    of kernel whose code grows with its tile where it is held in registers `whole` (a print ordered
    after the store), and does not where the tile is computed in a loop over chunks."""
    tile = f"tile<{n}x{element}>"
    view = f"partition_view<tile=({n}), tensor_view<?x{element}, strides=[?]>>"
    tensor = f"tensor_view<?x{element}, strides=[?]>"
    one = "1.000000e+00" if element.startswith("f") else "1"
    lines = [f"entry @k({ARGS.format(e=element)}) {{",
             "  %0 = make_token : token",
             f"  %t0 = make_tensor_view %arg0, shape = [%arg1], strides = [%arg2] : tile<i32> -> {tensor}",
             f"  %p0 = make_partition_view %t0 : {view}",
             f"  %t1 = make_tensor_view %arg3, shape = [%arg4], strides = [%arg5] : tile<i32> -> {tensor}",
             f"  %p1 = make_partition_view %t1 : {view}",
             "  %bx, %by, %bz = get_tile_block_id : tile<i32>",
             f"  %v0, %tok = load_view_tko weak %p0[%bx] token = %0 : {view}, tile<i32> -> {tile}, token",
             f"  %c = constant <{element}: {one}> : {tile}"]
    add = "addf" if element.startswith("f") else "addi"
    for i in range(adds):
        lines.append(f"  %v{i + 1} = {add} %v{i}, %c : {tile}")
    after = "%tok" if whole else "%0"   # a store ordered after a load of another array stays whole too
    lines += [f"  %s = store_view_tko weak %v{adds}, %p1[%bx] token = {after} : {tile}, {view}, tile<i32> -> token",
              *([ORDERED_AFTER.format(token="%s")] if whole else []), "  return", "}"]
    return "\n".join(lines) + "\n"


def copies(n: int, count: int, whole: bool = True) -> str:
    """`count` independent load/store pairs of `n` f32 elements each (held `whole`, as `elementwise`)."""
    view = f"partition_view<tile=({n}), tensor_view<?xf32, strides=[?]>>"
    tensor = "tensor_view<?xf32, strides=[?]>"
    lines = [f"entry @k({ARGS.format(e='f32')}) {{", "  %0 = make_token : token",
             f"  %t0 = make_tensor_view %arg0, shape = [%arg1], strides = [%arg2] : tile<i32> -> {tensor}",
             f"  %p0 = make_partition_view %t0 : {view}",
             f"  %t1 = make_tensor_view %arg3, shape = [%arg4], strides = [%arg5] : tile<i32> -> {tensor}",
             f"  %p1 = make_partition_view %t1 : {view}"]
    for i in range(count):
        lines += [f"  %i{i} = constant <i32: {i}> : tile<i32>",
                  f"  %v{i}, %tok{i} = load_view_tko weak %p0[%i{i}] token = %0 : {view}, tile<i32> -> tile<{n}xf32>, token",
                  f"  %s{i} = store_view_tko weak %v{i}, %p1[%i{i}] token = {f'%tok{i}' if whole else '%0'} : "
                  f"tile<{n}xf32>, {view}, tile<i32> "
                  "-> token"]
    stores = ", ".join(f"%s{i}" for i in range(count))
    lines += [f"  %all = join_tokens {stores} : token", ORDERED_AFTER.format(token="%all")] if whole else []
    return "\n".join(lines + ["  return", "}"]) + "\n"


def scatter_add(n: int) -> str:
    """A gather of `n` f32 elements added with atomics at `n` other addresses: each access's tiles (pointers,
    values, old values) are its `n` elements moved once."""
    ptrs = f"tile<{n}xptr<f32>>"
    return (f"entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<ptr<f32>>) {{\n  %0 = make_token : token\n"
            f"  %i = iota : tile<{n}xi32>\n"
            + "".join(f"  %r{a} = reshape %arg{a} : tile<ptr<f32>> -> tile<1xptr<f32>>\n"
                      f"  %b{a} = broadcast %r{a} : tile<1xptr<f32>> -> {ptrs}\n"
                      f"  %p{a} = offset %b{a}, %i : {ptrs}, tile<{n}xi32> -> {ptrs}\n" for a in (0, 1))
            + f"  %v, %t1 = load_ptr_tko weak %p1 token=%0 : {ptrs} -> tile<{n}xf32>, token\n"
            f"  %old, %t2 = atomic_rmw_tko relaxed device %p0, addf, %v token=%t1 : {ptrs}, tile<{n}xf32> -> "
            f"tile<{n}xf32>, token\n  return\n}}\n")


def alloca(count: int) -> str:
    return ("entry @k() {\n"
            f"  %0 = alloca num_elem = {count}, alignment = 16 : tile<ptr<f32>>\n"
            "  return\n}\n")


def _refusal(text: str) -> str:
    module = parse_module(text, "k.mlir")
    with pytest.raises(CompileError) as info:
        limits.check_module(module)
    assert int(info.value.code) == 5
    return info.value.message


@pytest.mark.parametrize("text,message", [
    (elementwise(1 << 19), "loc(\"k.mlir\":8:3): error: 'cuda_tile.load_view_tko' op result 'tile<524288xf32>' has 524288 "
                           "elements, over the compile limit of 262144 elements per tile value"),
    (elementwise(1 << 18, "f64"), "'cuda_tile.load_view_tko' op result 'tile<262144xf64>' takes 2097152 bytes, over "
                                  "the compile limit of 1048576 bytes per tile value"),
    (copies(1 << 17, 3), "'cuda_tile.entry' op kernel 'k' loads and stores 786432 tile elements, over the compile "
                         "limit of 524288 tile elements loaded or stored per kernel"),
    (elementwise(1 << 18, adds=15), "'cuda_tile.entry' op kernel 'k' computes 4456457 tile elements, over the "
                                    "compile limit of 4194304 tile elements computed per kernel"),
    (alloca(1 << 16), "'cuda_tile.entry' op kernel 'k' allocates 262144 bytes, over the compile limit of 232448 "
                      "bytes of alloca memory per kernel"),
    (alloca(1 << 62), "allocates 18446744073709551616 bytes"),
])
def test_over_a_limit_is_refused_naming_the_value_and_the_limit(text: str, message: str) -> None:
    refusal = _refusal(text)
    assert message in refusal
    assert refusal.endswith("; use smaller tiles")


@pytest.mark.parametrize("text", [elementwise(1 << 18), elementwise(1 << 17, "f64"), elementwise(1 << 18, adds=13),
                                  copies(1 << 16, 4), alloca(58112), scatter_add(1 << 17)])
def test_at_the_limits_is_accepted(text: str) -> None:
    """(The scatter-add of 2^17 elements was refused when each of its tiles counted: five of them, 655360 elements
    moved; it compiles in half a second.)"""
    limits.check_module(parse_module(text, "k.mlir"))


@pytest.mark.parametrize("text", [elementwise(1 << 24, whole=False), elementwise(1 << 23, "f64", adds=15, whole=False),
                                  copies(1 << 22, 4, whole=False)])
def test_tiles_computed_in_loops_over_chunks_are_not_limited(text: str) -> None:
    """A tile the middle level loops over chunks costs the code of one chunk, whatever its size (up
    to the dialect's 2^24 elements)."""
    limits.check_module(parse_module(text, "k.mlir"))


def test_every_corpus_kernel_is_within_the_limits() -> None:
    for path in sorted(CORPUS.glob("*/*.tileirbc")):
        limits.check_module(load_module(str(path)))


def test_the_readme_lists_the_limits() -> None:
    readme = (ROOT / "README.md").read_text()
    for name, (value, _) in limits.LIMITS.items():
        assert f"{value} {name}" in readme, name


def _driver(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", *args],
                          capture_output=True, text=True, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          timeout=300)


def _bytecode(text: str, path: Path) -> Path:
    (path.parent / "k.mlir").write_text("cuda_tile.module @m {\n" + text + "}\n")
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", "asm", str(path.parent / "k.mlir"),
                           "-o", str(path)], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return path


@pytest.mark.parametrize("log2", [20, 24])
def test_a_huge_tile_is_refused_within_seconds(tmp_path: Path, log2: int) -> None:
    """The verifier accepts tiles up to 2^24 elements; NVIDIA's tileiras runs past 300 s and 9.5 GB
    (2^20) or 23 GB (2^24) on them. The driver refuses them before lowering."""
    source = _bytecode(elementwise(1 << log2), tmp_path / "k.tileirbc")
    start = time.monotonic()
    result = _driver("--gpu-name=sm_90", "-o", "k.cubin", "k.tileirbc", cwd=tmp_path)
    seconds = time.monotonic() - start
    assert result.returncode == 5
    assert result.stderr.strip() == (
        f"error: 'cuda_tile.load_view_tko' op result 'tile<{1 << log2}xf32>' has {1 << log2} elements, over the "
        f"compile limit of 262144 elements per tile value ({limits.LIMITS['elements per tile value'][1]}); "
        "use smaller tiles\nerror: failed to compile Tile IR program 'k.tileirbc'")
    assert seconds < 10
    assert not (tmp_path / "k.cubin").exists()
    # reading, verifying and printing it stay unlimited, as in NVIDIA's tools
    disasm = subprocess.run([sys.executable, "-m", "tileiras.driver.disasm_main", str(source)], capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert disasm.returncode == 0 and f"tile<{1 << log2}xf32>" in disasm.stdout


@pytest.mark.slow
def test_the_largest_accepted_tile_compiles_in_bounded_time(tmp_path: Path) -> None:
    """2^18 elements, the limit: measured 15 s to a cubin on 2 busy cores (NVIDIA's tileiras takes
    40-120 s already at 2^16)."""
    _bytecode(elementwise(1 << 18), tmp_path / "k.tileirbc")
    start = time.monotonic()
    result = _driver("--gpu-name=sm_90", "-o", "k.cubin", "k.tileirbc", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - start < 120
    assert (tmp_path / "k.cubin").read_bytes().startswith(b"\x7fELF")
