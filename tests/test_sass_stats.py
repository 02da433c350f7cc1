"""benchmarks/sass_stats.py on real cuobjdump output.

Two kinds of input: listings captured from cuobjdump 13.5 on NVIDIA's tileiras 13.5 cubins
(tests/realistic/sass_samples/, gzip: the exact figures below were counted independently with
grep on those files), and live cuobjdump runs on cubins compiled during the test.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "tests" / "realistic" / "sass_samples"
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "realistic"))
import compilers  # noqa: E402
import sass_stats  # noqa: E402


def captured(name: str, kind: str) -> str:
    return gzip.decompress((SAMPLES / f"{name}.{kind}.gz").read_bytes()).decode()


def captured_stats(name: str, kernel: str) -> sass_stats.KernelStats:
    funcs = sass_stats.parse_sass(captured(name, "sass"))
    res = sass_stats.parse_res_usage(captured(name, "res-usage"))
    info = sass_stats.parse_elf_info(captured(name, "elf"))
    assert set(funcs) == set(res) == set(info) == {kernel}
    return sass_stats.function_stats(funcs[kernel], res[kernel], info[kernel])


def test_sm80_mma_sync_kernel() -> None:
    """NVIDIA's 64x64x32 f16 matmul on sm_80: cp.async + ldmatrix + mma.sync, one K loop."""
    s = captured_stats("mm_f16_64x64x32.sm_80", "mm_f16_64x64x32")
    assert s.arch == "sm_80"
    assert (s.registers, s.stack, s.shared_static, s.threads) == (108, 0, 69632, 128)
    assert s.tensor_core == {"HMMA": 128}
    assert s.tensor_shapes == {"HMMA.16816.F32": 128}
    assert (s.ldmatrix, s.ldgsts, s.mbarrier, s.spills) == (64, 32, 0, 0)
    assert s.ldgsts_widths == {128: 32}
    assert s.global_loads == {} and s.global_stores == {128: 4}
    assert s.widest_global_access == 128
    # the only backward branch: @P5 BRA 0x31e0 at 0x3910, (0x3910 - 0x31e0) / 16 + 1 instructions
    assert (s.loops, s.hot_loop, s.hot_loop_tensor_core) == (1, 116, 16)
    assert s.setmaxnreg is False


def test_sm90_warp_specialized_kernel() -> None:
    """NVIDIA's 128x128x64 f16 matmul on sm_90: TMA, mbarriers, wgmma, setmaxnreg."""
    s = captured_stats("mm_f16_128x128x64.sm_90", "mm_f16_128x128x64")
    assert s.arch.startswith("sm_90")
    assert (s.registers, s.shared_static, s.threads, s.setmaxnreg) == (255, 197784, 256, True)
    assert s.tensor_core == {"HGMMA": 16}
    assert s.tensor_shapes == {"HGMMA.64x128x16.F32": 16}
    assert s.tma == {"UTMALDG": 3, "UTMASTG": 4}
    assert (s.mbarrier, s.stmatrix, s.ldmatrix, s.ldgsts, s.spills) == (54, 16, 0, 0, 0)
    assert s.hot_loop_tensor_core > 0 and s.hot_loop is not None


def test_parameter_block_of_tma_kernel() -> None:
    """15 user parameters (3 arrays: ptr + 2 shapes + 2 strides) and, after them, the
    parameter bytes NVIDIA's compiler adds for its tensor maps."""
    info = sass_stats.parse_elf_info(captured("mm_f16_128x128x64.sm_90", "elf"))["mm_f16_128x128x64"]
    assert [size for _, _, size in info.params] == [8, 4, 4, 4, 4] * 3
    assert [ordinal for ordinal, _, _ in info.params] == list(range(15))
    assert info.param_bytes is not None and info.param_bytes > 72
    assert info.reqntid == (256, 1, 1)


def test_innermost_loop_choice() -> None:
    """Nested loops: the inner one is the hot loop; a branch to itself is not a loop."""
    text = "\n".join([
        "\tcode for sm_80", "\t\tFunction : k",
        *(f"        /*{a:04x}*/ {op} ;" for a, op in [
            (0x00, "MOV R1, R2"), (0x10, "LDG.E.64 R2, [R4.64]"), (0x20, "HMMA.16816.F32 R8, R2, R4, R8"),
            (0x30, "@P0 BRA 0x10"), (0x40, "STG.E.U16 [R4.64], R2"), (0x50, "@P1 BRA 0x0"),
            (0x60, "EXIT"), (0x70, "BRA 0x70")]),
    ])
    func = sass_stats.parse_sass(text)["k"]
    inner = sass_stats.innermost_loops(func)
    assert [(lp.head, lp.latch, lp.size) for lp in inner] == [(0x10, 0x30, 3)]
    s = sass_stats.function_stats(func)
    assert (s.loops, s.hot_loop, s.hot_loop_tensor_core, s.instructions) == (2, 3, 1, 7)
    assert s.global_loads == {64: 1} and s.global_stores == {16: 1}


def test_a_loop_closed_by_a_uniform_predicate_branch() -> None:
    """sm_100's SASS closes loops with `BRA.U UP0, target` (the predicate an operand): still a loop,
    and a forward `BRA.U !UP0` is not one."""
    text = "\n".join([
        "\tcode for sm_100", "\t\tFunction : k",
        *(f"        /*{a:04x}*/ {op} ;" for a, op in [
            (0x00, "BRA.U !UP0, 0x50"), (0x10, "LDS R2, [R4]"), (0x20, "HMMA.16816.F32.BF16 R8, R2, R4, R8"),
            (0x30, "BRA.U UP0, 0x10"), (0x40, "STG.E [R4.64], R8"), (0x50, "EXIT")]),
    ])
    func = sass_stats.parse_sass(text)["k"]
    assert [(lp.head, lp.latch) for lp in sass_stats.loops(func)] == [(0x10, 0x30)]
    assert sass_stats.function_stats(func).hot_loop_tensor_core == 1


def test_live_cuobjdump_on_both_compilers(tmp_path: Path) -> None:
    """Our cubin and NVIDIA's for the same module, through cuobjdump now: both kernels are
    found with their threads, registers and global accesses."""
    src = compilers.HERE / "bytecode" / "vector_add_f32_1024.tileirbc"
    ours = compilers.compile_ours(src, "sm_80", tmp_path / "ours.cubin")
    theirs = compilers.compile_nvidia(src, "sm_80", tmp_path / "nvidia.cubin")
    assert ours.ok, ours.message
    assert theirs.ok, theirs.message
    for result in (ours, theirs):
        s = sass_stats.cubin_stats(result.cubin)["vector_add_f32_1024"]
        assert s.arch == "sm_80"
        assert s.threads and s.threads % 32 == 0
        assert s.registers and s.registers > 0
        assert sum(s.global_loads.values()) > 0 and sum(s.global_stores.values()) > 0
        assert s.tensor_core == {} and s.hot_loop is None
    assert ours.block and sass_stats.cubin_stats(ours.cubin)["vector_add_f32_1024"].threads == \
        ours.block[0] * ours.block[1] * ours.block[2]


def test_cuobjdump_error_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cubin"
    bad.write_bytes(b"not an ELF file")
    with pytest.raises(sass_stats.CuobjdumpError, match="cuobjdump -sass bad.cubin"):
        sass_stats.cuobjdump(bad, "-sass")


def test_an_mbarrier_waits_retry_loop_leaves_its_loop_innermost() -> None:
    """A K loop whose body waits on an mbarrier, the wait's retry loop laid out inside it (ours; NVIDIA's lays
    its retries out after the kernel's code): the hot loop is still the K loop with its MMAs, not the retry
    loop, which does no work (`waits_only`)."""
    lines = ["/*0000*/ MOV R1, c[0x0][0x28] ;",
             "/*0010*/ SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2 ;", "/*0020*/ @!P0 BRA 0x10 ;",
             "/*0030*/ UTCHMMA gdesc[UR8], gdesc[UR10], tmem[UR4], tmem[UR6], idesc[UR7], UPT ;",
             "/*0040*/ UTCHMMA gdesc[UR8], gdesc[UR10], tmem[UR4], tmem[UR6], idesc[UR7], UPT ;",
             "/*0050*/ IADD3 R3, R3, 0x1, RZ ;", "/*0060*/ @P1 BRA 0x10 ;", "/*0070*/ EXIT ;",
             "/*0080*/ BRA 0x80 ;"]
    listing = "code for sm_100\nFunction : k\n" + "".join(f"        {ln}\n" for ln in lines)
    func = sass_stats.parse_sass(listing)["k"]
    assert [(lp.head, lp.latch) for lp in sass_stats.loops(func)] == [(0x10, 0x20), (0x10, 0x60)]
    hot = sass_stats.hot_loop(func)
    assert hot is not None and (hot.head, hot.latch) == (0x10, 0x60)
    assert sum(1 for i in hot.instrs if i.base in sass_stats.TENSOR_CORE) == 2


def test_the_hot_loop_holds_the_tensor_core_instructions_even_around_a_load_loop() -> None:
    """An MLA decode without facts loads its tiles element by element in loops of their own inside the K
    loop: the K loop, which holds the MMAs, is the hot loop (the innermost loop holding tensor-core
    instructions), not the load loop inside it."""
    lines = ["/*0000*/ MOV R1, c[0x0][0x28] ;",
             "/*0010*/ LDG.E R2, [R4.64] ;", "/*0020*/ STS [R6], R2 ;", "/*0030*/ @P0 BRA 0x10 ;",
             "/*0040*/ LDSM.16.M88.4 R8, [R6] ;", "/*0050*/ HMMA.16816.F32 R12, R8, R10, R12 ;",
             "/*0060*/ HMMA.16816.F32 R16, R8, R10, R16 ;", "/*0070*/ @P1 BRA 0x10 ;", "/*0080*/ EXIT ;",
             "/*0090*/ BRA 0x90 ;"]
    listing = "code for sm_80\nFunction : k\n" + "".join(f"        {ln}\n" for ln in lines)
    func = sass_stats.parse_sass(listing)["k"]
    hot = sass_stats.hot_loop(func)
    assert hot is not None and (hot.head, hot.latch) == (0x10, 0x70)
    assert sass_stats.function_stats(func).hot_loop_tensor_core == 2


def test_the_jump_back_from_a_wait_laid_out_after_the_code_is_no_loop() -> None:
    """Both compilers lay a wait's retries out after the kernel's code, in a block reached only by a branch,
    which jumps back into the loop once the phase flips: that jump is no latch (a body from its target to it
    would hold most of the kernel, and measure it as the hot loop), the K loop is (`wait_return`)."""
    lines = ["/*0000*/ MOV R1, c[0x0][0x28] ;",
             "/*0010*/ SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR8], R5 ;", "/*0020*/ @!P1 BRA 0xb0 ;",
             "/*0030*/ HGMMA.64x128x16.F32 R24, gdesc[UR8].tnspA, R24 ;",
             "/*0040*/ HGMMA.64x128x16.F32 R24, gdesc[UR8].tnspA, R24, gsb0 ;",
             "/*0050*/ @P2 BRA 0x10 ;", "/*0060*/ LDG.E R2, [R4.64] ;", "/*0070*/ STG.E [R4.64], R2 ;",
             "/*0080*/ STS [R6], R2 ;", "/*0090*/ EXIT ;",
             "/*00a0*/ BRA 0xa0 ;",
             "/*00b0*/ IMAD.U32 R6, RZ, RZ, UR8 ;", "/*00c0*/ SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [R6], R5 ;",
             "/*00d0*/ @!P1 NANOSLEEP.SYNCS 0x989680 ;", "/*00e0*/ @!P1 BRA 0xb0 ;", "/*00f0*/ BRA 0x30 ;"]
    listing = "code for sm_90a\nFunction : k\n" + "".join(f"        {ln}\n" for ln in lines)
    func = sass_stats.parse_sass(listing)["k"]
    assert [(lp.head, lp.latch) for lp in sass_stats.loops(func)] == [(0x10, 0x50), (0xb0, 0xe0)]
    hot = sass_stats.hot_loop(func)
    assert hot is not None and (hot.head, hot.latch) == (0x10, 0x50)
    # a loop whose latch is an unconditional branch after real work stays a loop
    work = lines[:-1] + ["/*00f0*/ LDG.E R2, [R4.64] ;", "/*0100*/ BRA 0x30 ;"]
    listing = "code for sm_90a\nFunction : k\n" + "".join(f"        {ln}\n" for ln in work)
    assert (0x30, 0x100) in [(lp.head, lp.latch) for lp in sass_stats.loops(sass_stats.parse_sass(listing)["k"])]


def test_wgmma_descriptors_stay_in_uniform_registers(tmp_path: Path) -> None:
    """sm_90's 256 x 128 f16 matmul: two consumer warpgroups, each starting its A rows at its own warp index.
    Broadcast from lane 0 (lowering/ops_wgmma.py), the index is warp-uniform to ptxas, which builds every wgmma
    descriptor in uniform registers: the consumer loop moves none over from vector registers (R2UR), 8 HGMMA
    in at most 56 instructions (83 while the index came from %tid)."""
    src = compilers.HERE / "bytecode" / "mm_f16_256x128x64.tileirbc"
    ours = compilers.compile_ours(src, "sm_90", tmp_path / "ours.cubin")
    assert ours.ok, ours.message
    (func,) = sass_stats.parse_sass(sass_stats.cuobjdump(ours.cubin, "-sass")).values()
    hot = sass_stats.hot_loop(func)
    assert hot is not None and sum(i.base == "HGMMA" for i in hot.instrs) == 8
    assert not any(i.base == "R2UR" for i in hot.instrs) and hot.size <= 56, [i.opcode for i in hot.instrs]
