"""What a cubin's machine code does, from NVIDIA's cuobjdump (an oracle: tests and benchmarks
only, never the product).

    stats = cubin_stats(Path("k.cubin"))          # {kernel name: KernelStats}
    stats["mm"].tensor_core   -> {"HMMA": 64}

Three cuobjdump listings are parsed, each by a small function that takes the text (so tests can
feed real captured output): ``-sass`` (instructions), ``-res-usage`` (registers, stack, static
shared memory) and ``-elf`` (the .nv.info attributes: threads per CTA). ``cuobjdump -sass``
needs ``nvdisasm`` next to it; both come from the nvidia-cuda-cuobjdump and
nvidia-cuda-nvdisasm wheels.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# -------------------------------------------------------------------------- instruction classes

# Opcode (first dotted component) -> family shown in the tables. One table, so a new
# instruction is one line here.
TENSOR_CORE: dict[str, str] = {
    # mma.sync (warp-level): Ampere and later
    "HMMA": "HMMA", "IMMA": "IMMA", "QMMA": "QMMA", "OMMA": "OMMA", "DMMA": "DMMA", "BMMA": "BMMA",
    # wgmma (warpgroup-level): Hopper
    "HGMMA": "HGMMA", "IGMMA": "IGMMA", "QGMMA": "QGMMA", "BGMMA": "BGMMA",
    # tcgen05 (tensor memory): Blackwell
    "UTCHMMA": "UTCMMA", "UTCIMMA": "UTCMMA", "UTCQMMA": "UTCMMA", "UTCOMMA": "UTCMMA",
    "UTCBMMA": "UTCMMA", "UTCMXQMMA": "UTCMMA", "UTCOMXQMMA": "UTCMMA",
}
TMA = frozenset({"UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF", "UBLKCP", "UBLKRED", "UBLKPF"})
ASYNC_COPY = frozenset({"LDGSTS"})
MBARRIER = frozenset({"SYNCS"})
LDMATRIX = frozenset({"LDSM"})
STMATRIX = frozenset({"STSM"})
LOCAL = frozenset({"LDL", "STL"})
GLOBAL_ACCESS = frozenset({"LDG", "STG"})
BRANCH = frozenset({"BRA"})

# width modifiers of LDG/STG (no modifier: 32 bits)
_WIDTH: dict[str, int] = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128,
                          "ENL2.256": 256, "256": 256}

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_ARCH = re.compile(r"^\s*\.target\s+(sm_\w+)|code for (sm_\w+)")
_INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(@!?U?P[T0-9]+\s+)?([A-Za-z0-9_.]+)\s*([^;]*);")
# the target, after the uniform predicate of a `BRA.U UP0, 0x39e0` (Blackwell's loop latches)
_BRANCH_TARGET = re.compile(r"^(?:!?U?PT?\d*,\s*)?(0x[0-9a-fA-F]+)\b")


@dataclass(frozen=True)
class Instr:
    address: int
    opcode: str                  # full mnemonic with modifiers: "LDG.E.128", "HMMA.16816.F32"
    operands: str
    predicate: str = ""

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def branch_target(self) -> int | None:
        if self.base not in BRANCH:
            return None
        m = _BRANCH_TARGET.match(self.operands.strip())
        return int(m.group(1), 16) if m else None


@dataclass
class SassFunction:
    name: str
    arch: str
    instrs: list[Instr] = field(default_factory=list)


def parse_sass(text: str) -> dict[str, SassFunction]:
    """Functions of a ``cuobjdump -sass`` listing, by name (the last one wins when a fatbin
    holds several targets: pass one cubin at a time)."""
    funcs: dict[str, SassFunction] = {}
    current: SassFunction | None = None
    arch = ""
    for line in text.splitlines():
        m = _ARCH.search(line)
        if m and ("code for" in line or ".target" in line):
            arch = m.group(1) or m.group(2)
            continue
        m = _FUNCTION.match(line)
        if m:
            current = funcs[m.group(1)] = SassFunction(m.group(1), arch)
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            current.instrs.append(Instr(int(m.group(1), 16), m.group(3), m.group(4).strip(),
                                        (m.group(2) or "").strip()))
    return funcs


@dataclass(frozen=True)
class ResUsage:
    registers: int
    stack: int
    shared: int          # static shared memory, bytes
    local: int


_RES_FUNC = re.compile(r"^\s*Function\s+(\S+?):\s*$")
_RES_FIELD = re.compile(r"\b(REG|STACK|SHARED|LOCAL):(\d+)")


def parse_res_usage(text: str) -> dict[str, ResUsage]:
    """``cuobjdump -res-usage``: per function REG, STACK, SHARED and LOCAL."""
    out: dict[str, ResUsage] = {}
    name = None
    for line in text.splitlines():
        m = _RES_FUNC.match(line)
        if m:
            name = m.group(1)
            continue
        fields = dict(_RES_FIELD.findall(line))
        if name and "REG" in fields:
            out[name] = ResUsage(int(fields["REG"]), int(fields.get("STACK", 0)),
                                 int(fields.get("SHARED", 0)), int(fields.get("LOCAL", 0)))
            name = None
    return out


@dataclass(frozen=True)
class ElfInfo:
    reqntid: tuple[int, ...] | None = None       # EIATTR_REQNTID: exact threads per CTA
    max_ntid: tuple[int, ...] | None = None      # EIATTR_MAX_THREADS: an upper bound
    max_registers: int | None = None             # EIATTR_MAXREG_COUNT
    num_barriers: int | None = None              # EIATTR_NUM_BARRIERS (named barriers)
    setmaxnreg: bool = False                     # EIATTR_REG_RECONFIG (register reallocation)
    param_bytes: int | None = None               # EIATTR_CBANK_PARAM_SIZE: the parameter block
    params: tuple[tuple[int, int, int], ...] = ()   # (ordinal, offset, size) per KPARAM_INFO

    @property
    def threads(self) -> int | None:
        dims = self.reqntid or self.max_ntid
        if not dims:
            return None
        n = 1
        for d in dims:
            n *= d
        return n


_INFO_SECTION = re.compile(r"^\.nv\.info\.(\S+)\s*$")
_ATTR = re.compile(r"^\s*Attribute:\s*(\S+)")
_VALUE = re.compile(r"^\s*Value:\s*(.*)$")


def parse_elf_info(text: str) -> dict[str, ElfInfo]:
    """Per-kernel attributes from the ``.nv.info.<kernel>`` sections of ``cuobjdump -elf``."""
    raw: dict[str, dict[str, list[str]]] = {}
    kernel = attr = None
    for line in text.splitlines():
        m = _INFO_SECTION.match(line)
        if m:
            kernel, attr = m.group(1), None
            raw.setdefault(kernel, {})
            continue
        if line.startswith(".") and not line.startswith(".nv.info."):
            kernel = None                       # another section begins
            continue
        if kernel is None:
            continue
        m = _ATTR.match(line)
        if m:
            attr = m.group(1)
            raw[kernel].setdefault(attr, [])
            continue
        m = _VALUE.match(line)
        if m and attr:
            raw[kernel][attr].append(m.group(1).strip())

    def nums(value: str) -> tuple[int, ...]:
        return tuple(int(n, 0) for n in re.findall(r"0x[0-9a-fA-F]+|\b\d+\b", value))

    def first(attrs: dict[str, list[str]], name: str) -> tuple[int, ...] | None:
        values = attrs.get(name)
        return (nums(values[0]) or None) if values else None

    out = {}
    for name, attrs in raw.items():
        maxreg = first(attrs, "EIATTR_MAXREG_COUNT")
        barriers = first(attrs, "EIATTR_NUM_BARRIERS")
        psize = first(attrs, "EIATTR_CBANK_PARAM_SIZE")
        params = []
        for key in ("EIATTR_KPARAM_INFO", "EIATTR_KPARAM_INFO_V2"):
            for value in attrs.get(key, []):
                fields = dict(re.findall(r"(Ordinal|Offset|Size)\s*:\s*(0x[0-9a-fA-F]+)", value))
                if len(fields) == 3:
                    params.append((int(fields["Ordinal"], 16), int(fields["Offset"], 16),
                                   int(fields["Size"], 16)))
        out[name] = ElfInfo(first(attrs, "EIATTR_REQNTID"), first(attrs, "EIATTR_MAX_THREADS"),
                            maxreg[0] if maxreg else None, barriers[0] if barriers else None,
                            "EIATTR_REG_RECONFIG" in attrs, psize[0] if psize else None,
                            tuple(sorted(params)))
    return out


# -------------------------------------------------------------------------- derived figures

@dataclass(frozen=True)
class Loop:
    head: int            # address of the first instruction of the body (the branch target)
    latch: int           # address of the backward branch
    instrs: tuple[Instr, ...]

    @property
    def size(self) -> int:
        return len(self.instrs)


def loops(func: SassFunction) -> list[Loop]:
    """Every backward branch's body [target, branch], innermost first is not implied; not the jump
    back from an out-of-line wait (`wait_return`)."""
    out = []
    for n, ins in enumerate(func.instrs):
        target = ins.branch_target
        if target is not None and target < ins.address and not wait_return(func, n):
            body = tuple(i for i in func.instrs if target <= i.address <= ins.address)
            out.append(Loop(target, ins.address, body))
    return out


# what an out-of-line mbarrier wait holds besides its waits: its address moved into place, a back-off
WAIT_BLOCK = frozenset({"SYNCS", "NANOSLEEP", "BRA", "MOV", "IMAD", "UMOV"})


def wait_return(func: SassFunction, n: int) -> bool:
    """Whether instruction `n`, an unconditional branch back, ends a block laid out after the code (only
    reached by a branch: an unconditional BRA or EXIT precedes it) that does nothing but wait on an
    mbarrier: ptxas moves a wait's retries out of the loop it waits in, and jumps back to the loop from
    there. The jump is no loop latch (a body from its target to it would hold most of the kernel)."""
    if func.instrs[n].predicate:
        return False
    start = n
    while start > 0 and not (func.instrs[start - 1].base in ("BRA", "EXIT") and not func.instrs[start - 1].predicate):
        start -= 1
    block = func.instrs[start:n + 1]
    return len(block) <= WAIT_LOOP + 2 and any(i.base in MBARRIER for i in block) \
        and all(i.base in WAIT_BLOCK for i in block)


# the most instructions of a retry loop around an mbarrier wait (try_wait, its predicate, the branch back)
WAIT_LOOP = 8


def waits_only(lp: Loop) -> bool:
    """A retry loop around an mbarrier wait: it does none of the kernel's work, and where a compiler lays
    it out inside the loop it waits in (ours), that loop would no longer be innermost (NVIDIA's lays its
    retries out after the kernel's code), so the nesting ignores it."""
    return lp.size <= WAIT_LOOP and any(i.base in MBARRIER for i in lp.instrs) \
        and not any(i.base in TENSOR_CORE or i.base in GLOBAL_ACCESS for i in lp.instrs)


def innermost_loops(func: SassFunction, holding: "frozenset[str] | None" = None) -> list[Loop]:
    """Loops whose body holds no other loop (the trailing ``BRA self`` is not a loop; an mbarrier wait's
    retry loop is none either: `waits_only`); `holding`: among the loops with an instruction of those bases,
    those holding no other such loop."""
    all_loops = [lp for lp in loops(func) if not waits_only(lp)
                 and (holding is None or any(i.base in holding for i in lp.instrs))]
    return [lp for lp in all_loops
            if not any(o is not lp and lp.head <= o.head and o.latch <= lp.latch
                       and (o.head, o.latch) != (lp.head, lp.latch) for o in all_loops)]


def hot_loop(func: SassFunction) -> Loop | None:
    """The loop that does the kernel's work: the innermost of those holding tensor-core instructions
    (one whose loads run in loops of their own, element by element, still counts: its body is what an
    mma's iteration costs), the most of them; where none does, the innermost loop with the most
    global/shared memory accesses, then the longest body."""
    def weight(lp: Loop) -> tuple[int, int, int]:
        tc = sum(1 for i in lp.instrs if i.base in TENSOR_CORE)
        mem = sum(1 for i in lp.instrs if i.base in GLOBAL_ACCESS | ASYNC_COPY | TMA | LDMATRIX
                  or i.base in ("LDS", "STS"))
        return tc, mem, lp.size
    inner = innermost_loops(func, frozenset(TENSOR_CORE)) or innermost_loops(func)
    return max(inner, key=weight) if inner else None


def access_width(ins: Instr) -> int:
    """Bits per thread of an LDG/STG (32 without a size modifier)."""
    mods = ins.opcode.split(".")[1:]
    for i in range(len(mods)):
        joined = ".".join(mods[i:i + 2])
        if joined in _WIDTH:
            return _WIDTH[joined]
        if mods[i] in _WIDTH:
            return _WIDTH[mods[i]]
    return 32


@dataclass
class KernelStats:
    name: str
    arch: str
    instructions: int
    registers: int | None = None
    stack: int | None = None
    shared_static: int | None = None
    threads: int | None = None
    setmaxnreg: bool = False
    local_loads: int = 0                 # LDL: spill reloads (or local arrays)
    local_stores: int = 0                # STL
    tensor_core: Counter = field(default_factory=Counter)   # family -> count
    tensor_shapes: Counter = field(default_factory=Counter)  # full mnemonic -> count
    ldgsts: int = 0
    ldgsts_widths: Counter = field(default_factory=Counter)  # bits -> count
    tma: Counter = field(default_factory=Counter)
    mbarrier: int = 0
    ldmatrix: int = 0
    stmatrix: int = 0
    global_loads: Counter = field(default_factory=Counter)   # bits -> count
    global_stores: Counter = field(default_factory=Counter)
    hot_loop: int | None = None          # instructions in the hot loop's body
    hot_loop_tensor_core: int = 0
    loops: int = 0

    @property
    def spills(self) -> int:
        return self.local_loads + self.local_stores

    @property
    def widest_global_access(self) -> int:
        """Bits per thread of the widest LDG/STG/LDGSTS; TMA counts as 128 (it moves whole
        tiles, so a kernel using it has no narrower need)."""
        widths = [*self.global_loads, *self.global_stores, *self.ldgsts_widths]
        if sum(self.tma.values()):
            widths.append(128)
        return max(widths, default=0)


def as_json(s: KernelStats) -> dict[str, Any]:
    """Every figure of `s` as plain JSON (what the benchmarks write and benchmarks/gaps.py reads)."""
    return {"registers": s.registers, "spills": s.spills, "stack": s.stack,
            "shared_static": s.shared_static, "threads": s.threads, "setmaxnreg": s.setmaxnreg,
            "tensor_core": dict(s.tensor_core), "tensor_shapes": dict(s.tensor_shapes),
            "ldgsts": s.ldgsts, "ldgsts_widths": {str(k): v for k, v in sorted(s.ldgsts_widths.items())},
            "tma": dict(s.tma), "mbarrier": s.mbarrier,
            "ldmatrix": s.ldmatrix, "stmatrix": s.stmatrix,
            "global_loads": {str(k): v for k, v in sorted(s.global_loads.items())},
            "global_stores": {str(k): v for k, v in sorted(s.global_stores.items())},
            "hot_loop": s.hot_loop, "hot_loop_tensor_core": s.hot_loop_tensor_core,
            "loops": s.loops, "instructions": s.instructions}


def function_stats(func: SassFunction, res: ResUsage | None = None,
                   info: ElfInfo | None = None) -> KernelStats:
    exits = [i for i, ins in enumerate(func.instrs) if ins.base == "EXIT"]
    # the code after the last EXIT is padding (a branch to itself, NOPs) and not counted
    s = KernelStats(func.name, func.arch, exits[-1] + 1 if exits else len(func.instrs))
    for ins in func.instrs:
        base = ins.base
        if base in TENSOR_CORE:
            s.tensor_core[TENSOR_CORE[base]] += 1
            s.tensor_shapes[ins.opcode] += 1
        elif base in ASYNC_COPY:
            s.ldgsts += 1
            s.ldgsts_widths[access_width(ins)] += 1
        elif base in TMA:
            s.tma[base] += 1
        elif base in MBARRIER:
            s.mbarrier += 1
        elif base in LDMATRIX:
            s.ldmatrix += 1
        elif base in STMATRIX:
            s.stmatrix += 1
        elif base == "LDL":
            s.local_loads += 1
        elif base == "STL":
            s.local_stores += 1
        elif base == "LDG":
            s.global_loads[access_width(ins)] += 1
        elif base == "STG":
            s.global_stores[access_width(ins)] += 1
    loop = hot_loop(func)
    s.loops = len(loops(func))
    if loop is not None:
        s.hot_loop = loop.size
        s.hot_loop_tensor_core = sum(1 for i in loop.instrs if i.base in TENSOR_CORE)
    if res is not None:
        s.registers, s.stack, s.shared_static = res.registers, res.stack, res.shared
    if info is not None:
        s.threads, s.setmaxnreg = info.threads, info.setmaxnreg
    return s


# -------------------------------------------------------------------------- running cuobjdump

class CuobjdumpError(RuntimeError):
    pass


def cuobjdump_path() -> Path | None:
    """cuobjdump from the nvidia-cuda-cuobjdump wheel (or $CUOBJDUMP)."""
    if os.environ.get("CUOBJDUMP"):
        return Path(os.environ["CUOBJDUMP"])
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(base) / "cu13" / "bin" / "cuobjdump"
        if candidate.exists():
            return candidate
    return None


def cuobjdump(cubin: Path, flag: str) -> str:
    tool = cuobjdump_path()
    if tool is None:
        raise CuobjdumpError("cuobjdump is not installed (pip install nvidia-cuda-cuobjdump "
                             "nvidia-cuda-nvdisasm)")
    env = dict(os.environ)
    env["PATH"] = f"{tool.parent}{os.pathsep}{env.get('PATH', '')}"   # -sass runs nvdisasm
    proc = subprocess.run([str(tool), flag, str(cubin)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise CuobjdumpError(f"cuobjdump {flag} {cubin.name}: "
                             f"{lines[-1] if lines else f'exit {proc.returncode}'}")
    return proc.stdout


def cubin_stats(cubin: Path) -> dict[str, KernelStats]:
    """Every kernel of one cubin, with its resource usage and launch attributes."""
    funcs = parse_sass(cuobjdump(cubin, "-sass"))
    res = parse_res_usage(cuobjdump(cubin, "-res-usage"))
    info = parse_elf_info(cuobjdump(cubin, "-elf"))
    return {name: function_stats(f, res.get(name), info.get(name)) for name, f in funcs.items()}
