"""The machine model the modulo scheduler reserves: per target family, the units a tile op occupies.

Seed 003 gives Blackwell's vocabulary (issue, ALU, special-function, LSU, TMA,
MMA, shared-/tensor-memory transport rows, capacity pools); this is the same
vocabulary at tile granularity, for every family we target. A unit is one row
of the reservation table: an op holds it for as many cycles as its work takes at
the unit's per-SM rate (a throughput model: a unit of capacity 1 that is busy
for `bytes / rate` cycles), and its result is ready `latency` cycles after it
issues. Capacity pools that are not per-cycle rows (shared memory bytes, tensor
memory bytes) are fields of the machine and family, checked by buffers.py.

Rates are per SM per clock. Where NVIDIA publishes them (whitepapers' peak
dense tensor throughput divided by SMs x boost clock; CUDA programming guide's
arithmetic-instruction table; the PTX ISA's tensor memory) the comment says so; the rest
(latencies, L2-to-SM bandwidth, legacy mma.sync rates on sm_90+) are estimates,
marked as such, good enough to rank schedules: they set which unit bounds the
initiation interval and how many iterations a load's latency spans.
"""

from __future__ import annotations

from typing import Mapping

from ..ir.record import record
from ..target import caps

# Reservation-table rows (seed 003's coarse families; one bit each in a row).
ISSUE = "issue"         # warp-instruction issue: 4 schedulers per SM
ALU = "alu"             # FP32/INT32 lanes (alu_or_fmaheavy)
XU = "xu"               # special-function unit: exp2, rsqrt, ... (MUFU)
LSU = "lsu"             # global <-> SM transport: ld/st.global and cp.async (tp_gnic_rd/wr)
TMA = "tma"             # the tensor memory accelerator (sm_90+): one bulk-copy engine per SM
SMEM_RD = "smem_rd"     # shared-memory read transport: ldmatrix, wgmma/tcgen05 descriptors
SMEM_WR = "smem_wr"     # shared-memory write transport: landing copies, st.shared
TMEM = "tmem"           # tensor-memory transport (sm_100): tcgen05.ld/st, accumulators
# The tensor-core unit is named by the instruction family that drives it.
MMA_SYNC = "mma.sync"   # warp-level HMMA/IMMA (sm_80+; the legacy path on sm_90+)
WGMMA = "wgmma"         # warpgroup MMA (sm_90a)
TCGEN05 = "tcgen05"     # 5th-generation tensor cores, accumulators in TMEM (sm_100a/103a)


@record
class Reservation:
    """`count` of `unit` held for `length` cycles starting `offset` cycles after the op issues."""
    unit: str
    offset: int
    length: int
    count: int = 1


@record
class Footprint:
    """What one op costs: its latency (issue to result) and the units it reserves."""
    op_class: str
    latency: int
    reservations: tuple[Reservation, ...] = ()


@record
class Family:
    """One target family's per-SM resources (rates per clock)."""
    name: str
    units: tuple[str, ...]                 # the reservation-table rows this family has
    tensor_unit: str                       # the unit its fastest MMA issues on
    fma_per_clk: Mapping[str, Mapping[str, int]]   # tensor unit -> operand class -> dense FMA/clk/SM
    alu_lanes: int                         # FP32 lanes per SM
    xu_lanes: int                          # special-function results per clk per SM
    l2_bytes_per_clk: int                  # L2 -> SM fill bandwidth (one SM's share)
    smem_bytes_per_clk: int                # shared-memory bandwidth (32 banks x 4 B)
    mem_latency: int                       # issue-to-land of a global load under load, cycles
    tmem_bytes: int = 0                    # tensor memory per SM (0: none)
    issue_width: int = 4                   # warp instructions per clk (4 SM sub-partitions)
    # FP64 FMA lanes per SM (the FMA path's f64 matmuls), from the non-tensor FP64 peaks: A100 9.7 TFLOPS -> 32,
    # H100 SXM 34 -> 64, B200 37 -> 64, RTX 5090 (1/64 of FP32) -> 2
    f64_lanes: int = 2

    @property
    def has_tma(self) -> bool:
        return TMA in self.units


_CORE = (ISSUE, ALU, XU, LSU, SMEM_RD, SMEM_WR)

FAMILIES: dict[str, Family] = {
    # A100 whitepaper: 312 dense FP16 TFLOPS / (108 SMs x 1.41 GHz x 2) = 1024 FMA/clk/SM; TF32 156 -> 512;
    # INT8 624 TOPS -> 2048. 64 FP32 lanes and 16 SFU results per SM (CUDA guide, throughput table).
    # L2 read bandwidth 5120 B/clk for 108 SMs (whitepaper) -> ~47 B/clk/SM. Latency: estimate.
    "sm_80": Family("sm_80", _CORE + (MMA_SYNC,), MMA_SYNC,
                    {MMA_SYNC: {"f16": 1024, "tf32": 512, "i8": 2048, "f8": 1024, "f64": 64}},
                    alu_lanes=64, xu_lanes=16, l2_bytes_per_clk=47, smem_bytes_per_clk=128, mem_latency=600,
                    f64_lanes=32),
    # H100 SXM whitepaper: 989 dense FP16 TFLOPS / (132 SMs x 1.83 GHz x 2) = 2048 FMA/clk/SM (wgmma);
    # TF32 1024, FP8/INT8 4096. 128 FP32 lanes. mma.sync on sm_90: estimate, half of wgmma's rate
    # (microbenchmarks of Hopper show the legacy path well below peak). L2 share, latency: estimates.
    "sm_90": Family("sm_90", _CORE + (TMA, MMA_SYNC, WGMMA), WGMMA,
                    {WGMMA: {"f16": 2048, "tf32": 1024, "i8": 4096, "f8": 4096, "f64": 128},
                     MMA_SYNC: {"f16": 1024, "tf32": 512, "i8": 2048, "f8": 2048, "f64": 128}},
                    alu_lanes=128, xu_lanes=16, l2_bytes_per_clk=64, smem_bytes_per_clk=128, mem_latency=650,
                    f64_lanes=64),
    # B200 datasheet: 2.25 dense FP16 PFLOPS / (148 SMs x ~1.9 GHz x 2) ~ 4096 FMA/clk/SM (tcgen05);
    # FP8/INT8 2x that. Tensor memory: 128 lanes x 512 columns x 32 bits = 256 KiB per SM (PTX ISA,
    # tcgen05). mma.sync rate, L2 share, latency: estimates.
    "sm_100": Family("sm_100", _CORE + (TMA, TMEM, MMA_SYNC, TCGEN05), TCGEN05,
                     {TCGEN05: {"f16": 4096, "tf32": 2048, "i8": 8192, "f8": 8192, "f64": 128},
                      MMA_SYNC: {"f16": 1024, "tf32": 512, "i8": 2048, "f8": 2048, "f64": 128}},
                     alu_lanes=128, xu_lanes=16, l2_bytes_per_clk=64, smem_bytes_per_clk=128, mem_latency=700,
                     tmem_bytes=256 * 1024, f64_lanes=64),
    # Consumer Blackwell (RTX 50xx): mma.sync only, no TMEM; RTX 5090's 419 dense FP16 TFLOPS (FP16
    # accumulate) / (170 SMs x 2.41 GHz x 2) = 512 FMA/clk/SM. TMA present. L2 share, latency: estimates.
    "sm_120": Family("sm_120", _CORE + (TMA, MMA_SYNC), MMA_SYNC,
                     {MMA_SYNC: {"f16": 512, "tf32": 256, "i8": 1024, "f8": 1024, "f64": 16}},
                     alu_lanes=128, xu_lanes=16, l2_bytes_per_clk=48, smem_bytes_per_clk=128, mem_latency=600),
}

# Which family schedules a target is the target table's `Caps.family` (sm_86/87/88/89 are Ampere/Ada:
# the sm_80 vocabulary; sm_103/107/110 are datacenter Blackwell; sm_121 is consumer Blackwell).

# Fixed latencies beyond the occupancy, cycles (estimates; the dependent FP32 FMA latency of 4 cycles
# on Volta and later is from NVIDIA's tuning guides and microbenchmarks).
ALU_LATENCY = 4
XU_LATENCY = 20
REDUCE_LATENCY = 5 * 24           # a 5-step shuffle tree across a warp
MMA_LATENCY = {MMA_SYNC: 32, WGMMA: 64, TCGEN05: 128}   # pipeline drain of the last instruction
SMEM_LATENCY = 30                 # a shared-memory round trip
BYTES_PER_COPY_INSTR = 32 * 16    # a warp's 16-byte cp.async / ld.global.v4
FMA_PER_MMA_INSTR = 16 * 8 * 16   # one m16n8k16 per warp instruction


@record
class Machine:
    """The resource model of one target: its family's rows and rates plus its capacities."""
    sm: int
    family: Family
    smem_bytes: int                        # per-CTA opt-in shared memory (Caps.smem_per_block)

    @property
    def capacities(self) -> dict[str, int]:
        """Per-cycle capacity of each reservation-table row (every row is one unit)."""
        return {unit: 1 for unit in self.family.units}

    # -- footprints of the tile-op classes (cycles, per CTA on one SM) --

    def copy_async(self, nbytes: int, tma: bool = False) -> Footprint:
        """A tile copied global -> shared without registers: cp.async (LSU) or a TMA bulk copy."""
        f = self.family
        transfer = _cycles(nbytes, f.l2_bytes_per_clk)
        land = f.mem_latency
        engine = Reservation(TMA, 0, transfer) if tma else Reservation(LSU, 0, transfer)
        issue = () if tma else (Reservation(ISSUE, 0, _cycles(nbytes, BYTES_PER_COPY_INSTR * f.issue_width)),)
        return Footprint("copy_tma" if tma else "copy_async", land + transfer,
                         (*issue, engine, Reservation(SMEM_WR, land, _cycles(nbytes, f.smem_bytes_per_clk))))

    def load_global(self, nbytes: int) -> Footprint:
        """A tile loaded into registers (ld.global)."""
        f = self.family
        transfer = _cycles(nbytes, f.l2_bytes_per_clk)
        return Footprint("load_global", f.mem_latency + transfer,
                         (Reservation(ISSUE, 0, _cycles(nbytes, BYTES_PER_COPY_INSTR * f.issue_width)),
                          Reservation(LSU, 0, transfer)))

    def store_global(self, nbytes: int) -> Footprint:
        f = self.family
        return Footprint("store_global", _cycles(nbytes, f.l2_bytes_per_clk),
                         (Reservation(ISSUE, 0, _cycles(nbytes, BYTES_PER_COPY_INSTR * f.issue_width)),
                          Reservation(LSU, 0, _cycles(nbytes, f.l2_bytes_per_clk))))

    def mma(self, unit: str, operand: str, fmas: int, operand_bytes: int) -> Footprint:
        """A tile matmul of `fmas` multiply-adds on tensor unit `unit`, reading `operand_bytes` from
        shared memory (mma.sync: each operand is read by two warps, ldmatrix; wgmma/tcgen05: once)."""
        f = self.family
        if unit not in f.fma_per_clk:
            unit = MMA_SYNC
        busy = _cycles(fmas, f.fma_per_clk[unit].get(operand, f.fma_per_clk[unit]["f16"]))
        reads = operand_bytes * (2 if unit == MMA_SYNC else 1)
        rows = [Reservation(unit, 0, busy), Reservation(SMEM_RD, 0, _cycles(reads, f.smem_bytes_per_clk))]
        if unit == MMA_SYNC:
            rows.append(Reservation(ISSUE, 0, _cycles(fmas, FMA_PER_MMA_INSTR * f.issue_width)))
        if unit == TCGEN05:
            rows.append(Reservation(TMEM, 0, busy))   # the accumulator lives in tensor memory
        return Footprint(unit, busy + MMA_LATENCY[unit], tuple(rows))

    def fma(self, fmas: int, operand_bytes: int, f64: bool = False) -> Footprint:
        """A tile matmul on the FMA path (no tensor-core form: f32 x f32, f64): `fmas` multiply-adds on the
        FP32 (FP64) lanes, a warp instruction each 32, reading `operand_bytes` of shared memory (at least)."""
        f = self.family
        busy = _cycles(fmas, f.f64_lanes if f64 else f.alu_lanes)
        return Footprint(ALU, busy + ALU_LATENCY,
                         (Reservation(ALU, 0, busy), Reservation(ISSUE, 0, _cycles(fmas, 32 * f.issue_width)),
                          Reservation(SMEM_RD, 0, _cycles(operand_bytes, f.smem_bytes_per_clk))))

    def elementwise(self, elements: int, special: bool = False) -> Footprint:
        """Arithmetic on every element of a tile (`special`: on the special-function unit)."""
        f = self.family
        lanes, unit, tail = (f.xu_lanes, XU, XU_LATENCY) if special else (f.alu_lanes, ALU, ALU_LATENCY)
        busy = _cycles(elements, lanes)
        return Footprint("xu" if special else "alu", busy + tail,
                         (Reservation(unit, 0, busy), Reservation(ISSUE, 0, _cycles(elements, 32 * f.issue_width))))

    def reduce(self, elements: int) -> Footprint:
        f = self.family
        busy = _cycles(elements, f.alu_lanes)
        return Footprint("reduce", busy + REDUCE_LATENCY,
                         (Reservation(ALU, 0, busy), Reservation(ISSUE, 0, _cycles(elements, 32 * f.issue_width))))

    def free(self) -> Footprint:
        """Shape changes, scalars, views: no tile-sized work (a register rename or an index)."""
        return Footprint("free", 0)


def _cycles(work: int, rate: int) -> int:
    return -(-work // rate) if work > 0 else 0


def family_of(sm: int) -> Family:
    return FAMILIES[caps(sm).family]


def machine(sm: int) -> Machine:
    return Machine(sm, family_of(sm), caps(sm).smem_per_block)
