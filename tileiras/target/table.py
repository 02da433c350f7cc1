"""The target table: everything the compiler knows about each GPU target, one row per target.

Every decision that depends on the target asks this table by feature name (`caps(gpu).has("tma")`,
`caps(sm).smem_per_block`); no other module compares SM numbers (tests/test_target_table.py holds
that rule). Enabling a feature on a target is an edit of its row alone.

A row describes a base target (`sm_90`); its `a`/`f` variants (`variants`) share its capabilities
and differ only in how codegen/targets.py hands them to LLVM and ptxas. The lowering always sees the
base target (the driver accepts base names; `caps` strips a suffix).

Sources: the PTX ISA's target notes (TMA `cp.async.bulk.tensor`, clusters, `mbarrier.expect_tx`,
`griddepcontrol` and `setmaxnreg` from sm_90; wgmma on sm_90a only; tcgen05 and CTA pairs on the
datacenter Blackwell `a`/`f` targets); the CUDA programming guide's per-block shared memory opt-in
maximum; where the row keeps what the lowering implements today, the comment says so.
"""

from __future__ import annotations

from ..errors import ExitCode, TileirasError
from ..ir.record import record

# Named features a row may list (`Caps.has`): each is one yes/no fact a decision asks about.
FEATURES: dict[str, str] = {
    "tma": "pipelined loads copied by TMA (cp.async.bulk.tensor) into mbarrier-handed stages; "
           "warp specialization is built on it",
    "row_tma": "row-major tiles of element-wise kernels copied by TMA (lowering/row_tma.py)",
    "multicast": "TMA loads multicast to the CTAs of a cluster (tileas/multicast_groups.py)",
    "clusters": "cluster launches (.reqnctapercluster)",
    "cta_pairs": "two CTAs of a cluster run one tcgen05.mma (cta_group::2)",
    "mbarrier_tx": "mbarriers with transaction counts hand pipeline stages over (else cp.async groups)",
    "griddepcontrol": "programmatic dependent launch (griddepcontrol.wait / launch_dependents)",
    "setmaxnreg": "warpgroups give registers away and take them (setmaxnreg)",
    "cvt_tf32_rn": "f32 rounded to tf32, ties to even, by one cvt.rn.tf32.f32 (one F2FP instruction)",
    "stmatrix": "a warp stores four 8x8 16-bit matrices of mma fragments to shared memory at once (stmatrix)",
    # element types and instructions the frontend may ask for (lowering/features.py diagnoses them)
    "f8E4M3FN": "element type f8E4M3FN",
    "f8E5M2": "element type f8E5M2",
    "f8E8M0FNU": "element type f8E8M0FNU",
    "f4E2M1FN": "element type f4E2M1FN",
    "fnv8E5M3FNU": "element type fnv8E5M3FNU",
    "mmaf_scaled": "block-scaled matrix multiply",
    "bf16_atomic_add": "atomic add of bf16",
}

# The tensor-core instruction a target's matmuls are built on (`Caps.mma`); `has` answers it too.
MMA_KINDS = ("mma.sync", "wgmma", "tcgen05")


@record
class Caps:
    """One target's capabilities."""
    name: str                   # base target: sm_90
    sm: int                     # 90
    variants: str               # the suffixes accepted besides the base: "a", "af"
    family: str                 # scheduling family: a key of schedule/resources.FAMILIES
    mma: str                    # the tensor-core instruction its matmuls use (MMA_KINDS)
    features: frozenset[str]    # named features it has (FEATURES)
    smem_per_block: int         # opt-in maximum of shared memory per block, bytes (static + dynamic)
    smem_per_sm: int            # shared memory per SM, bytes (CUDA programming guide; sm_88 and sm_107
                                # as their family's)
    tmem_columns: int = 0       # tensor memory: 32-bit columns of 128 lanes per SM (0: none)
    blockscale: str = "fma"     # block-scaled mma: "native" (the block_scale mma.sync) or "fma" (fp8
                                # mma.sync per scale block, scaled into the accumulator by FMA)
    tma_box_rows: int = 0       # rows of a pipelined load's TMA box (0: tileas/tma_boxes.MAX_BOX)
    param_base: int = -1        # constant-bank offset of the first kernel parameter modulo 64, where
                                # hidden TMA descriptors are laid out (codegen/nv_host.py; -1: no TMA)
    ptx: int = 88               # PTX ISA version LLVM is told (+ptxNN), times ten
    ptx_declared: int = 0       # the .version the PTX must declare where not `ptx`
    llvm_as: str = ""           # the family member LLVM generates code for where LLVM lacks this one
    max_stages: int = 8         # the deepest stage ring a pipelined loop takes (schedule/buffers.assign; the modulo
                                # schedule asks for the depth that covers its loads' latency): deeper rings only
                                # lengthen the prologue

    def has(self, feature: str) -> bool:
        """Whether the target has a named feature (FEATURES) or builds its matmuls on `feature`
        (MMA_KINDS)."""
        assert feature in FEATURES or feature in MMA_KINDS, feature
        return feature in self.features or feature == self.mma

    @property
    def mma_sync_roles(self) -> bool:
        """Warp-specialized with mma.sync consumers: a TMA target without wgmma or tcgen05 (sm_120's
        tensor cores; NVIDIA's compiler specializes its matmuls and attention there the sm_90 way)."""
        return self.has("tma") and self.mma == "mma.sync"


# tensor memory of every tcgen05 target (PTX ISA, tcgen05): 128 lanes x 512 32-bit columns per SM
TMEM_COLUMNS = 512
# sm_90 and later: what every Hopper/Blackwell target has beside its tensor cores
_SM90 = frozenset({"mbarrier_tx", "griddepcontrol", "bf16_atomic_add", "cvt_tf32_rn", "stmatrix"})
_F8 = frozenset({"f8E4M3FN", "f8E5M2"})                                   # sm_89 on
_MX = _F8 | {"f8E8M0FNU", "f4E2M1FN", "mmaf_scaled"}                     # sm_100 on
_AMPERE = dict(family="sm_80", mma="mma.sync")
_BLACKWELL = dict(family="sm_100", smem_per_block=232448, smem_per_sm=233472, param_base=0)

ROWS: tuple[Caps, ...] = (
    # Ampere / Ada: mma.sync, cp.async pipelines, no TMA
    Caps("sm_80", 80, "", **_AMPERE, features=frozenset(), smem_per_block=166912, smem_per_sm=167936),
    Caps("sm_86", 86, "", **_AMPERE, features=frozenset(), smem_per_block=101376, smem_per_sm=102400),
    Caps("sm_87", 87, "", **_AMPERE, features=frozenset(), smem_per_block=166912, smem_per_sm=167936),
    Caps("sm_88", 88, "", **_AMPERE, features=frozenset(), smem_per_block=101376, smem_per_sm=102400,
         ptx=90),
    Caps("sm_89", 89, "", **_AMPERE, features=_F8, smem_per_block=101376, smem_per_sm=102400),
    # Hopper: wgmma (sm_90a), TMA, multicast over clusters
    Caps("sm_90", 90, "a", "sm_90", "wgmma",
         _SM90 | _F8 | {"tma", "row_tma", "multicast", "clusters", "setmaxnreg"},
         smem_per_block=232448, smem_per_sm=233472, param_base=0x210),
    # datacenter Blackwell: tcgen05 with tensor memory, CTA pairs; TMA boxes of 128 rows (one
    # tcgen05.mma's M, as NVIDIA's sm_100 boxes)
    Caps("sm_100", 100, "af", mma="tcgen05",
         features=_SM90 | _MX | {"tma", "row_tma", "clusters", "cta_pairs", "setmaxnreg"},
         tmem_columns=TMEM_COLUMNS, tma_box_rows=128, **_BLACKWELL),
    Caps("sm_103", 103, "af", mma="tcgen05",
         features=_SM90 | _MX | {"tma", "row_tma", "clusters", "cta_pairs", "setmaxnreg"},
         tmem_columns=TMEM_COLUMNS, tma_box_rows=128, **_BLACKWELL),
    # sm_107: LLVM 22 stops at PTX 9.0, so LLVM generates sm_100 code and the header declares 9.4
    # (PTX for sm_100 assembles for sm_107). Its own cvt to ue5m3x2 (fnv8E5M3FNU) exists nowhere
    # else. The lowering builds no tcgen05, TMA or clusters for it yet (kept as before the table).
    Caps("sm_107", 107, "af", mma="mma.sync", features=_SM90 | _MX | {"fnv8E5M3FNU"},
         ptx_declared=94, llvm_as="sm_100", **_BLACKWELL),
    # sm_110 (Thor; sm_101 before CUDA 13, PTX 9.0): datacenter Blackwell as sm_100. The PTX ISA gives
    # tcgen05 (cta_group::1 and ::2) to sm_110a / sm_110f as to sm_100a (CUDA 13.5's ptxas accepts it
    # for sm_110a, refuses it for plain sm_110: codegen/targets.ARCH_SPECIFIC_USE lifts the target),
    # and cp.async.bulk.tensor to every target from sm_90.
    Caps("sm_110", 110, "af", mma="tcgen05",
         features=_SM90 | _MX | {"tma", "row_tma", "clusters", "cta_pairs", "setmaxnreg"},
         tmem_columns=TMEM_COLUMNS, tma_box_rows=128, ptx=90, **_BLACKWELL),
    # consumer Blackwell: mma.sync only (the block-scaled mma.sync is native), TMA, no tensor memory.
    # sm_121 (GB10) is the sm_120 family and has its row (row TMA too, which sm_121 lacked before the
    # table: cp.async.bulk.tensor is every sm_90+ target's).
    Caps("sm_120", 120, "af", "sm_120", "mma.sync", _SM90 | _MX | {"tma", "row_tma", "clusters", "setmaxnreg"},
         smem_per_block=101376, smem_per_sm=102400, blockscale="native", param_base=0),
    Caps("sm_121", 121, "af", "sm_120", "mma.sync", _SM90 | _MX | {"tma", "row_tma", "clusters", "setmaxnreg"},
         smem_per_block=101376, smem_per_sm=102400, blockscale="native", param_base=0),
)

BY_SM: dict[int, Caps] = {row.sm: row for row in ROWS}    # the one index `caps` reads (tests patch a row here)
BASE_NAMES: tuple[str, ...] = tuple(row.name for row in ROWS)


def _parse(target: str) -> "tuple[int, str] | None":
    """("sm_90a") -> (90, "a"); None for anything else. String methods, not `re`: this module is imported
    by every compile, cache hits included, and `re` costs a hit more than all else it does."""
    if not target.startswith("sm_"):
        return None
    body = target[3:]
    suffix = body[-1] if body[-1:] in ("a", "f") else ""
    number = body[:-1] if suffix else body
    return (int(number), suffix) if number.isdigit() and number.isascii() else None


def caps(target: "str | int") -> Caps:
    """The row of a target: a name (`sm_90`, `sm_100a`) or an SM number (90)."""
    if isinstance(target, int):
        row = BY_SM.get(target)
    else:
        match = _parse(target)
        row = BY_SM.get(match[0]) if match else None
        if row is not None and match and match[1] not in row.variants:
            row = None
    if row is None:
        name = target if isinstance(target, str) else f"sm_{target}"
        raise TileirasError(f"error: unsupported GPU target '{name}' (supported: {', '.join(BASE_NAMES)}, "
                            "and their a/f variants)", ExitCode.INVALID_OPTIONS)
    return row


def known(target: "str | int") -> bool:
    try:
        caps(target)
    except TileirasError:
        return False
    return True


def with_feature(feature: str) -> tuple[Caps, ...]:
    """The rows that have a feature, oldest first."""
    return tuple(row for row in ROWS if row.has(feature))


def since(feature: str) -> "Caps | None":
    """The oldest target with a feature where every newer target has it too (diagnostics say "sm_N or
    newer"); None where a newer target lacks it (one family's feature: name `with_feature`'s rows)."""
    have = with_feature(feature)
    if not have or any(row.sm > have[0].sm and not row.has(feature) for row in ROWS):
        return None
    return have[0]
