"""codegen/nv_host.py: the `.nv.host` object that fills TMA descriptors at launch.

Our object and NVIDIA's are linked into shared libraries (`cc -shared`) and called through ctypes
the way the driver calls them: `__CUDA_TILEIR_ON_PRE_LOAD` hands out the callback table, each
kernel's entry names it and points to its ON_ARGUMENTS_CHANGE, which reads the user's arguments
from the parameter buffer and writes the hidden tensor maps. With NVIDIA's tileiras installed
(the `nvidia-cuda-tileiras` wheel), NVIDIA's object comes from the `.nv.host` section of the cubin
it makes of the corpus bytecode, and both must leave identical buffers, with the descriptors
`tma_params.hidden_params` computes.
"""

from __future__ import annotations

import ctypes
import functools
import os
import random
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tileiras.codegen import nv_host
from tileiras.codegen.cubin import read_cubin
from tileiras.codegen.tma_params import Field, TmaParam, hidden_params

sys.path.insert(0, str(Path(__file__).resolve().parent / "realistic"))
import compilers  # noqa: E402

BYTECODE = Path(__file__).resolve().parent / "realistic" / "bytecode"
_PRE_LOAD = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                             ctypes.POINTER(ctypes.c_void_p))
_ON_ARGS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def _link(obj: bytes, where: Path) -> ctypes.CDLL:
    """The object linked into a shared library and loaded (g++/cc is installed by scripts/bootstrap.sh)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("c++")
    assert cc, "no C compiler to link the .nv.host object with (scripts/bootstrap.sh installs g++)"
    where.mkdir(parents=True, exist_ok=True)
    (where / "host.o").write_bytes(obj)
    subprocess.run([cc, "-shared", "-o", str(where / "host.so"), str(where / "host.o")], check=True)
    return ctypes.CDLL(str(where / "host.so"))


def _callbacks(lib: ctypes.CDLL) -> tuple[list[int], dict[str, _ON_ARGS]]:
    """The table ON_PRE_LOAD gives the driver, and each kernel's ON_ARGUMENTS_CHANGE by name."""
    pre = _PRE_LOAD(("__CUDA_TILEIR_ON_PRE_LOAD", lib))
    out = ctypes.c_void_p()
    assert pre(None, None, 2, ctypes.byref(out)) == 0
    table = list((ctypes.c_uint64 * 9).from_address(out.value))
    funcs = {}
    for i in range(table[6]):
        entry = (ctypes.c_uint64 * 8).from_address(table[5] + table[4] * i)
        assert entry[1:5] == [0, 0, 0, 0] and entry[6:] == [0, 0]
        funcs[ctypes.string_at(entry[0]).decode()] = _ON_ARGS(entry[5])
    return table, funcs


def _call(fn: _ON_ARGS, buf: bytearray) -> None:
    cbuf = (ctypes.c_ubyte * len(buf)).from_buffer(buf)
    assert fn(None, None, None, ctypes.addressof(cbuf)) == 0


def _buffer(types: list[str], values: list, hidden: int, sm: int, fill: bytes) -> tuple[bytearray, list[int]]:
    user, maps = nv_host.param_offsets(types, hidden, sm)
    buf = bytearray(fill[:(maps[-1] + 128 if maps else user[-1] + 8) + 64])
    for off, t, v in zip(user, types, values):
        size = nv_host.slot(t).size
        buf[off:off + size] = struct.pack("<f", v) if t == "f32" else int(v).to_bytes(size, "little")
    return buf, maps


# --- NVIDIA's kernels: user parameters and hidden tensor maps -----------------------------------
# cuTile passes an array of rank r as its address (u64), shape (r x u32) and strides (r x u32, in
# elements, outermost first). NVIDIA's maps list the two innermost dims first, then the outer ones
# outermost first; the last stride is the constant 1. Boxes and swizzles (map order) read off its
# copies (`cp.async.bulk.tensor` boxes) and its callbacks' outputs.

def _view(base: int, rank: int, dtype: str, box: tuple[int, ...], swizzle: str) -> TmaParam:
    order = [rank - 1, rank - 2, *range(rank - 2)] if rank > 1 else [0]
    return TmaParam(base, dtype, tuple(Field(base + 1 + d) for d in order),
                    (Field(const=1),) + tuple(Field(base + 1 + rank + d) for d in order[1:]), box, swizzle)


def _kernel(arrays: list[tuple[int, str, tuple[int, ...], str]], scalars: tuple[str, ...] = ()
            ) -> tuple[list[str], list[TmaParam], list[int]]:
    """(user parameter types, hidden tensor maps, array ranks) of a kernel taking `arrays` (rank,
    dtype, box, swizzle; each copied through one map) and then `scalars`."""
    types, specs, ranks = [], [], []
    for rank, dtype, box, swizzle in arrays:
        specs.append(_view(len(types), rank, dtype, box, swizzle))
        types += ["u64"] + ["u32"] * (2 * rank)
        ranks.append(rank)
    return types + list(scalars), specs, ranks


def _same_rank(rank: int, arrays: list[tuple[str, tuple[int, ...], str]], scalars: tuple[str, ...] = ()) -> tuple:
    return _kernel([(rank, *a) for a in arrays], scalars)


B, S = "128B", "128B_atom_32B"
KERNELS = {   # (bytecode, target) -> (user parameter types, hidden tensor maps, array ranks)
    ("mm_f16_128x128x64", "sm_90"): _same_rank(2, [("f16", (64, 128), B), ("f16", (64, 64), B), ("f16", (64, 64), B)]),
    ("mm_f16_128x128x64", "sm_100"): _same_rank(2, [("f16", (64, 128), B), ("f16", (64, 64), B),
                                                    ("f16", (64, 128), B)]),
    ("mm_bf16_128x128x32", "sm_90"): _same_rank(2, [("bf16", (32, 128), "64B"), ("bf16", (64, 32), B),
                                                 ("bf16", (64, 64), B)]),
    ("mm_f16_256x128x64", "sm_90"): _same_rank(2, [("f16", (64, 256), B), ("f16", (64, 64), B), ("f16", (64, 64), B)]),
    ("mm_tf32_128x128x32", "sm_90"): _same_rank(2, [("tf32", (32, 128), B), ("tf32", (32, 32), B),
                                                 ("f32", (32, 64), B)]),
    ("mm_tf32_128x128x64", "sm_100"): _same_rank(2, [("tf32", (32, 128), B), ("tf32", (32, 64), S),
                                                  ("f32", (32, 128), B)]),
    ("mm_e4m3_64x64x32", "sm_90"): _same_rank(2, [("u8", (32, 64), "32B"), ("u8", (64, 32), "64B"),
                                                  ("f16", (64, 64), B)]),
    ("mm_e4m3_128x128x64", "sm_100"): _same_rank(2, [("u8", (64, 128), "64B"), ("u8", (128, 64), B),
                                                  ("f16", (64, 128), B)]),
    ("mm_i8_128x128x32", "sm_90"): _same_rank(2, [("u8", (32, 128), "32B"), ("u8", (128, 32), B),
                                                  ("u32", (32, 64), B)]),
    ("mm_i8_256x128x64", "sm_100"): _same_rank(2, [("u8", (64, 128), "64B"), ("u8", (128, 64), B),
                                                ("u32", (32, 128), B)]),
    ("bmm_bf16_128x128x32", "sm_90"): _same_rank(3, [("bf16", (32, 128, 1), "64B"), ("bf16", (64, 32, 1), B),
                                                  ("bf16", (64, 64, 1), B)]),
    ("bmm_f16_64x64x32", "sm_100"): _same_rank(3, [("f16", (32, 64, 1), "64B"), ("f16", (64, 32, 1), B),
                                                ("f16", (64, 64, 1), B)]),
    ("fa_f16_q128k128d128", "sm_90"): _same_rank(3, [("f16", (64, 128, 1), B), ("f16", (64, 128, 1), B),
                                                  ("f16", (64, 128, 1), B), ("f16", (64, 64, 1), B)], ("f32",)),
    ("fa_bf16_q128k64d128_causal", "sm_100"): _same_rank(3, [("bf16", (64, 128, 1), B), ("bf16", (64, 64, 1), B),
                                                          ("bf16", (64, 64, 1), B), ("bf16", (64, 128, 1), B)],
                                                      ("f32",)),
}
KERNELS[("layernorm_f16_n4096", "sm_90")] = _kernel(
    [(2, "f16", (256, 1), "none"), (1, "f16", (256,), "none"), (1, "f16", (256,), "none"),
     (2, "f16", (256, 1), "none")], ("f32",))
KERNELS[("rmsnorm_bf16_n16384", "sm_100")] = _kernel(
    [(2, "bf16", (256, 1), "none"), (1, "bf16", (256,), "none"), (2, "bf16", (256, 1), "none")], ("f32",))
# block-scaled fp8 (test_blockscale_lowering.py's sample: A, A's scales, B, B's scales, C): A, B and B's
# (K / 32, N) scales by TMA (NVIDIA's CTA pair halves the tile: 64 rows of A, 64 columns of B and of B's
# scales, which are one unswizzled box, as ours), A's scales (4-byte rows) by cp.async: no map
KERNELS[("mxfp8_128x128x128", "sm_100")] = (
    (["u64"] + ["u32"] * 4) * 5,
    [_view(0, 2, "u8", (128, 64), B), _view(10, 2, "u8", (64, 128), "64B"), _view(15, 2, "u8", (64, 4), "none"),
     _view(20, 2, "f32", (32, 128), B)], [2] * 5)
SYMBOLS = {"mxfp8_128x128x128": "block_scaled_matmul"}     # kernels not named as their bytecode
SAMPLE = [("bmm_bf16_128x128x32", "sm_90"),      # 3-D, 64B and 128B swizzles
          ("mxfp8_128x128x128", "sm_100")]       # u8 maps without swizzle; the rest: -m sweep


def _bytecode(name: str) -> bytes:
    if name.startswith("mxfp8_"):    # made by the sample's exporter (test_blockscale_lowering.py)
        from test_blockscale_lowering import _kernel

        return _kernel(*(int(x) for x in name.split("_")[1].split("x")))
    if name.startswith("tg_"):
        return (BYTECODE.parent.parent / "tilegym" / "bytecode" / f"{name}.tileirbc").read_bytes()
    return (BYTECODE / f"{name}.tileirbc").read_bytes()


def _arguments(types: list[str], ranks: list[int], rng: random.Random) -> list:
    """Realistic launches: 16-byte aligned bases, tile-multiple shapes from 64 to 8192 (batches up
    to 16), rows padded or not, batch strides of whole or larger-than-needed matrices; spans both
    below and above 128 KiB."""
    values: list = []
    for rank in ranks:
        shape = [rng.choice([1, 2, 4, 16]) for _ in range(rank - 2)] + \
            [rng.choice([64, 128, 192, 1024, 4096, 8192]) for _ in range(min(rank, 2))]
        strides = [shape[-1] + rng.choice([0, 0, 16, 64]), 1][-rank:]     # rows padded or not
        for d in range(rank - 3, -1, -1):                                 # batches: whole matrices or more
            strides.insert(0, strides[0] * shape[d + 1] + rng.choice([0, 256]))
        values += [rng.randrange(1 << 28, 1 << 43) * 16, *shape, *strides]
    values += [rng.uniform(0.01, 1.0) for _ in types[len(values):]]
    return values


@functools.lru_cache(maxsize=None)
def _nvidia_object(name: str, gpu: str) -> bytes:
    """The .nv.host section of the cubin NVIDIA's tileiras makes of the corpus kernel (once per session)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"{name}.tileirbc"
        src.write_bytes(_bytecode(name))
        result = compilers.compile_nvidia(src, gpu, Path(tmp) / f"{name}.{gpu}.cubin")
        return _nv_host_section(result, name, gpu)


def _nv_host_section(result: compilers.Compiled, name: str, gpu: str) -> bytes:
    assert result.ok, result.message
    sections = read_cubin(result.cubin.read_bytes()).sections
    assert ".nv.host" in sections, f"NVIDIA's cubin of {name} for {gpu} has no .nv.host"
    return sections[".nv.host"]


def _differential(name: str, gpu: str, tmp_path: Path, launches: int) -> None:
    types, specs, ranks = KERNELS[(name, gpu)]
    sm = int(gpu[3:])
    symbol = SYMBOLS.get(name, name)
    theirs = _callbacks(_link(_nvidia_object(name, gpu), tmp_path / "nvidia"))[1][symbol]
    ours = _callbacks(_link(nv_host.host_object([(symbol, types, specs)], sm), tmp_path / "ours"))[1][symbol]
    rng = random.Random(f"{name}.{gpu}")
    large = 0
    for _ in range(launches):
        values = _arguments(types, ranks, rng)
        fill = bytes(rng.randrange(256) for _ in range(2048))
        (a, maps), (b, _) = (_buffer(types, values, len(specs), sm, fill) for _ in range(2))
        _call(theirs, a)
        _call(ours, b)
        assert a == b, f"{name} {gpu}: the callbacks write different bytes for {values}"
        want = hidden_params(specs, values)
        for off, raw in zip(maps, want):
            assert a[off:off + 64] == raw[:64]
            large += a[off + 10] >> 5 & 1
    assert 0 < large < launches * len(specs), "the launches should span both sides of 128 KiB"


needs_nvidia = pytest.mark.skipif(compilers.nvidia_tileiras() is None, reason="NVIDIA's tileiras is not installed")


@needs_nvidia
@pytest.mark.parametrize("name,gpu", SAMPLE)
def test_our_callbacks_write_what_nvidias_write(name: str, gpu: str, tmp_path: Path) -> None:
    _differential(name, gpu, tmp_path, 40)


@needs_nvidia
@pytest.mark.sweep
@pytest.mark.parametrize("name,gpu", sorted(KERNELS))
def test_our_callbacks_write_what_nvidias_write_sweep(name: str, gpu: str, tmp_path: Path) -> None:
    _differential(name, gpu, tmp_path, 300)


# --- the object itself ------------------------------------------------------------------------

def _elf(obj: bytes, where: Path) -> tuple[set, set, set]:
    """(allocated sections, symbols as (name, type, bind, section), (section, relocation type))."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / "x.o"
    path.write_bytes(obj)
    text = lambda *a: subprocess.run(["readelf", "-W", *a, str(path)], capture_output=True, text=True,  # noqa: E731
                                     check=True).stdout
    sections = {}
    for line in text("-S").splitlines():
        parts = line.replace("[ ", "[").split()
        if parts and parts[0].startswith("[") and parts[0] != "[Nr]" and len(parts) > 2:
            sections[parts[0].strip("[]")] = (parts[1], "A" in parts[7] if len(parts) > 7 else False)
    alloc = {name for name, is_alloc in sections.values() if is_alloc}
    symbols = set()
    for line in text("-s").splitlines():
        parts = line.split()
        if len(parts) == 8 and parts[0].endswith(":") and parts[7].startswith("__CUDA_TILEIR"):
            symbols.add((parts[7], parts[3], parts[4], sections.get(parts[6], (parts[6],))[0]))
    relocs, current = set(), ""
    for line in text("-r").splitlines():
        if line.startswith("Relocation section"):
            current = line.split("'")[1]
        elif "R_X86_64" in line:
            relocs.add((current, line.split()[2]))
    return alloc, symbols, relocs


TWO = [("first", ["u64", "u32", "u32", "u32", "u32"], [_view(0, 2, "f16", (64, 128), B)]),
       ("second", ["u64", "u32", "align 8 b8[16]"], [])]


def test_the_object_has_nvidias_symbols_sections_and_relocations(tmp_path: Path) -> None:
    alloc, symbols, relocs = _elf(nv_host.host_object(TWO, 90), tmp_path)
    assert alloc == {".text", ".ltext", ".lrodata", ".lbss", ".data.rel.ro", ".eh_frame"}
    want = {("__CUDA_TILEIR_CALLBACKS", "OBJECT", "GLOBAL", ".data.rel.ro"),
            ("__CUDA_TILEIR_ON_PRE_LOAD", "FUNC", "GLOBAL", ".ltext"),
            ("__CUDA_TILEIR_FUNC_CALLBACKS", "OBJECT", "LOCAL", ".data.rel.ro"),
            ("__CUDA_TILEIR_CALLBACKS_ON_PRE_LOAD", "OBJECT", "LOCAL", ".lbss")}
    for i in range(2):
        want |= {(f"__CUDA_TILEIR_FUNC_NAME_{i}", "OBJECT", "LOCAL", ".lrodata"),
                 (f"__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_{i}", "FUNC", "LOCAL", ".ltext")}
    assert symbols == want
    assert relocs == {(".rela.ltext", "R_X86_64_GOTPC64"), (".rela.ltext", "R_X86_64_GOT64"),
                      (".rela.ltext", "R_X86_64_GOTOFF64"), (".rela.data.rel.ro", "R_X86_64_64"),
                      (".rela.eh_frame", "R_X86_64_PC64")}


@needs_nvidia
def test_nvidias_object_has_the_same_symbols_sections_and_relocations(tmp_path: Path) -> None:
    name, gpu = SAMPLE[0]
    types, specs, _ = KERNELS[(name, gpu)]
    theirs = _elf(_nvidia_object(name, gpu), tmp_path / "nvidia")
    assert theirs == _elf(nv_host.host_object([(name, types, specs)], 90), tmp_path / "ours")


@pytest.mark.parametrize("sm", [90, 100])
def test_the_callbacks_fill_the_hidden_parameters_and_nothing_else(sm: int, tmp_path: Path) -> None:
    lib = _link(nv_host.host_object(TWO, sm), tmp_path)
    table, funcs = _callbacks(lib)
    assert table[:5] + table[6:8] == [2, 0, 0, 0, 64, 2, 2] and list(funcs) == ["first", "second"]
    rng = random.Random(sm)
    for _ in range(20):
        rows, cols = rng.choice([64, 512, 4096]), rng.choice([64, 256, 8192])
        values = [rng.randrange(1 << 28, 1 << 43) * 16, rows, cols, cols + rng.choice([0, 64]), 1]
        fill = bytes(rng.randrange(256) for _ in range(1024))
        buf, maps = _buffer(TWO[0][1], values, 1, sm, fill)
        before = bytes(buf)
        _call(funcs["first"], buf)
        (raw,) = hidden_params(TWO[0][2], values)
        # 64-aligned in the constant bank: 24 bytes of user parameters end at 0x228 on sm_90 (base 0x210)
        assert maps == [0x30 if sm == 90 else 0x40]
        assert buf[maps[0]:maps[0] + 64] == raw[:64]
        assert buf[:maps[0]] + buf[maps[0] + 64:] == before[:maps[0]] + before[maps[0] + 64:]
        other, _ = _buffer(TWO[1][1], [values[0], 7, 0], 0, sm, fill)
        untouched = bytes(other)
        _call(funcs["second"], other)
        assert other == untouched


def test_pre_load_modes(tmp_path: Path) -> None:
    lib = _link(nv_host.host_object(TWO[:1], 100), tmp_path)
    pre = _PRE_LOAD(("__CUDA_TILEIR_ON_PRE_LOAD", lib))
    out = ctypes.c_void_p()
    assert pre(None, None, 0, ctypes.byref(out)) == 1 and out.value is None
    calls = []
    query = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)(
        lambda handle, what, scratch: calls.append((handle, what)) or 0)
    api = (ctypes.c_void_p * 8)()
    api[6] = ctypes.cast(query, ctypes.c_void_p)
    assert pre(ctypes.addressof(api), 1234, 1, ctypes.byref(out)) == 0
    assert calls == [(1234, 16)]
    table = list((ctypes.c_uint64 * 9).from_address(out.value))
    assert table[2] == 0 and table[6] == 1
    assert table[8] == ctypes.cast(pre, ctypes.c_void_p).value


def _pre_load(lib: ctypes.CDLL, mode: int, sms: int) -> list[int]:
    """The table ON_PRE_LOAD hands the driver in `mode`, the driver answering `sms` to its query."""
    pre = _PRE_LOAD(("__CUDA_TILEIR_ON_PRE_LOAD", lib))

    def answer(handle: int, what: int, scratch: int) -> int:
        ctypes.c_int.from_address(scratch).value = sms if what == 16 else -1
        return 0

    query = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)(answer)
    api = (ctypes.c_void_p * 8)()
    api[6] = ctypes.cast(query, ctypes.c_void_p)
    out = ctypes.c_void_p()
    assert pre(ctypes.addressof(api), 1, mode, ctypes.byref(out)) == 0
    return list((ctypes.c_uint64 * 9).from_address(out.value))


GROUPED = ("tg_group_gemm_f16_128x128x128", "sm_90", ["u64", "u32"] * 3)   # three lists of arrays


@needs_nvidia
def test_a_workspace_kernel_gets_what_nvidias_gets(tmp_path: Path) -> None:
    """A kernel that makes its tensor maps itself (NVIDIA's grouped GEMM, ours: lowering/kernel_maps.py):
    in mode 1 the table asks a workspace of SMs x the bytes per SM, none in mode 2, the static table
    one for STATIC_SMS SMs; the callback writes the address the driver gives (its second argument + 8)
    into the last hidden parameter, a u64 after the user's, and nothing else."""
    name, gpu, types = GROUPED
    theirs = _link(_nvidia_object(name, gpu), tmp_path / "nvidia")
    per_sm = _pre_load(theirs, 1, 1)[2]
    assert per_sm and per_sm % 8192 == 0
    ours = _link(nv_host.host_object([nv_host.HostKernel(name, tuple(types), (), per_sm)], 90), tmp_path / "ours")
    for lib in (theirs, ours):
        for sms in (132, 7):
            assert _pre_load(lib, 1, sms)[2] == sms * per_sm
        assert _pre_load(lib, 2, 132)[2] == 0
        static = (ctypes.c_uint64 * 9).in_dll(lib, "__CUDA_TILEIR_CALLBACKS")
        assert static[2] == nv_host.STATIC_SMS * per_sm
    _, maps = nv_host.param_offsets(types, 0, 90, workspace=True)
    rng = random.Random(6)
    for _ in range(5):
        launch = (ctypes.c_uint64 * 4)(*(rng.randrange(1 << 40) for _ in range(4)))
        fill = bytes(rng.randrange(256) for _ in range(256))
        bufs = []
        for lib in (theirs, ours):
            fn = _callbacks(lib)[1][name]
            buf = bytearray(fill)
            cbuf = (ctypes.c_ubyte * len(buf)).from_buffer(buf)
            assert fn(None, ctypes.addressof(launch), None, ctypes.addressof(cbuf)) == 0
            bufs.append(bytes(buf))
        assert bufs[0] == bufs[1]
        assert bufs[0][maps[-1]:maps[-1] + 8] == launch[1].to_bytes(8, "little")
        assert bufs[0][:maps[-1]] + bufs[0][maps[-1] + 8:] == fill[:maps[-1]] + fill[maps[-1] + 8:]


HIDDEN_PTX = """
.version 8.8
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1, .param .u32 k_param_2, .param .u32 k_param_3,
                  .param .u32 k_param_4, .hidden .param .align 64 .b8 k_param_5[128])
{
    .reg .b64 %rd<3>;
    mov.b64 %rd1, k_param_5;
    cvta.param.u64 %rd2, %rd1;
    prefetch.tensormap [%rd2];
    ret;
}
"""


@pytest.mark.parametrize("gpu", ["sm_90a", "sm_100a"])
def test_ptxas_puts_hidden_parameters_where_the_callback_writes(gpu: str, tmp_path: Path) -> None:
    """The constant bank's parameter block ends one tensor map after where param_offsets puts it:
    ptxas aligns hidden parameters to 64 bytes of the bank (parameters start at 0x210 on sm_90,
    0x380 on sm_100), which is what NVIDIA's callbacks assume."""
    from tileiras.codegen import ptxas

    ptx = HIDDEN_PTX.replace("sm_90a", gpu)
    (tmp_path / "k.cubin").write_bytes(ptxas.assemble(ptx, gpu))
    cuobjdump = ptxas.find_ptxas().with_name("cuobjdump")
    assert cuobjdump.exists(), "cuobjdump is missing beside ptxas (the nvidia-cuda-nvcc wheel has both)"
    listing = subprocess.run([str(cuobjdump), "-elf", str(tmp_path / "k.cubin")], capture_output=True, text=True,
                             check=True).stdout
    size = re.search(r"EIATTR_CBANK_PARAM_SIZE\s+Format:\s+\S+\s+Value:\s+(0x[0-9a-f]+)", listing)
    assert size, "no EIATTR_CBANK_PARAM_SIZE in the cubin"
    _, maps = nv_host.param_offsets(["u64", "u32", "u32", "u32", "u32"], 1, int(gpu[3:-1]))
    assert int(size.group(1), 16) == maps[0] + 128


def test_ptxas_embeds_the_object_and_the_cubin_key_names_its_maps() -> None:
    from tileiras.cache.keys import cubin_key
    from tileiras.codegen import ptxas

    spec = _view(0, 2, "f16", (64, 128), B)
    obj = nv_host.for_ptx(HIDDEN_PTX, {"k": [spec]}, 90)
    assert obj is not None and nv_host.for_ptx(HIDDEN_PTX, {"k": []}, 90) is None
    cubin = ptxas.assemble(HIDDEN_PTX, "sm_90a", nv_host=obj)
    assert read_cubin(cubin).sections[".nv.host"] == obj
    other = _view(0, 2, "f16", (64, 64), B)
    keys = {cubin_key(HIDDEN_PTX, "sm_90a", None), cubin_key(HIDDEN_PTX, "sm_90a", None, (), {"k": [spec]}),
            cubin_key(HIDDEN_PTX, "sm_90a", None, (), {"k": [other]})}
    assert len(keys) == 3
    with pytest.raises(Exception, match="last 2 parameters are not"):
        nv_host.for_ptx(HIDDEN_PTX, {"k": [spec, spec]}, 90)
    with pytest.raises(Exception, match="need sm_90 or later"):
        nv_host.host_object([("k", ["u64"], [])], 80)
    with pytest.raises(Exception, match="parameter 1 of type 'f32', not an integer"):
        nv_host.host_object([("k", ["u64", "f32"], [TmaParam(0, "f16", (Field(1),), (Field(const=1),), (64,))])], 90)


MISS_PROBE = """
import sys
from tileiras.driver.tileiras_main import _main
rc = _main(sys.argv[1:])
heavy = ("dataclasses", "inspect", "tempfile", "shutil", "tileiras.codegen.host_object", "tileiras.codegen.cabi")
print(rc, sorted(m for m in heavy if m in sys.modules))
"""


def test_a_tma_compile_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    """A TMA kernel's compile (ptxas and the .nv.host object included) imports neither dataclasses
    (inspect, ast, dis) nor tempfile/shutil nor the package launcher: ~30 ms of every compile."""
    argv = ["--no-cache", "--gpu-name", "sm_90", str(BYTECODE / "mm_f16_128x128x64.tileirbc"),
            "-o", str(tmp_path / "k.cubin")]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    done = subprocess.run([sys.executable, "-c", MISS_PROBE, *argv], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "0 []", done.stdout + done.stderr
    assert b".nv.host" in (tmp_path / "k.cubin").read_bytes()
