"""Mutation fuzzer of TileIR text inputs, seeded by the corpus' text form.

The seeds are the corpus' bytecode printed as tileirdisasm prints it (tests/corpus/bytecode, the
realistic kernels) and the hand-written text modules (tests/corpus/text). A mutant changes what a
frontend could write differently: a shape (one dimension, or one size everywhere), an element type
(one, or one everywhere), an attribute (a memory ordering, a signedness, a rounding, a padding, a
number) or the entry's optimization hints (num_cta_in_cga, occupancy, num_worker_warps_per_cta).
Each goes through parse, verify, the compile limits and the lowering to LLVM IR for one target,
and the LLVM IR must parse; every `full_every`-th one that lowers also goes through the whole
driver to a cubin. A mutant must end in a diagnostic or succeed: an internal compiler error, a
traceback, invalid LLVM IR, a hang or a crash is a failure, saved for replay.

    python tests/fuzz_text.py --seconds 600            # the 10-minute run (benchmarks/fuzz_text.py)
    python tests/fuzz_text.py --replay DIR              # re-run saved failures

CI runs a fixed sample of it (tests/test_safety_fuzz_text.py), beside the bytecode fuzzer.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_bytecode import FULL_COMPILE_SECONDS, LOWER_TARGETS, PER_INPUT_SECONDS, Hang, Report, _alarm  # noqa: E402

SEED_BYTECODE = (ROOT / "tests" / "corpus" / "bytecode", ROOT / "tests" / "realistic" / "bytecode")
SEED_TEXT = ROOT / "tests" / "corpus" / "text"
TARGETS = (*LOWER_TARGETS, "sm_120")

ELEMENT_TYPES = ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "tf32", "f8E4M3FN", "f8E5M2")
_TYPE = re.compile(r"(?<=[<x(,\s])(" + "|".join(sorted(ELEMENT_TYPES, key=len, reverse=True)) + r")(?=[>,:\s)])")
_TILE_DIMS = re.compile(r"(?<=tile<)((?:\d+x)+)|(?<=tile=\()([\dx]+)(?=\))")
SIZES = (0, 1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 1024, 4096, 65536)
KEYWORD_SWAPS = (
    ("weak", "relaxed", "acquire", "release", "acq_rel"),
    ("signed", "unsigned"),
    ("device", "tl_blk", "sys"),
    ("zero", "nan", "neg_inf", "pos_inf", "neg_zero"),
    ("nearest_even", "zero", "negative_inf", "positive_inf", "approx", "full"),
    ("equal", "not_equal", "less_than", "less_than_or_equal", "greater_than", "greater_than_or_equal"),
    ("ordered", "unordered"),
)
HINTS = ("num_cta_in_cga", "occupancy", "num_worker_warps_per_cta")
HINT_VALUES = (0, 1, 2, 3, 4, 8, 16)
HINT_ARCHS = ("default", "sm_80", "sm_90", "sm_100", "sm_120")


def corpus(realistic: bool = True) -> list[str]:
    """The seeds: every corpus module's text form (printed once, for the run); `realistic`: the
    realistic kernels too (large: a tenth of the mutants' speed)."""
    from tileiras.bytecode.reader import read_module
    from tileiras.text.printer import print_module

    texts = []
    for folder in SEED_BYTECODE if realistic else SEED_BYTECODE[:1]:
        for path in sorted(folder.rglob("*.tileirbc")):
            try:
                texts.append(print_module(read_module(path.read_bytes(), path.name)))
            except Exception:  # noqa: BLE001 - a seed the printer cannot print is no seed
                continue
    texts += [path.read_text() for path in sorted(SEED_TEXT.glob("*.mlir"))]
    return texts


# -- mutations: each takes (random, text) and returns the new text ---------------------------------
def _one_dimension(rnd: random.Random, text: str) -> str:
    found = list(_TILE_DIMS.finditer(text))
    if not found:
        return text
    match = rnd.choice(found)
    dims = [d for d in (match.group(1) or match.group(2)).split("x") if d]
    dims[rnd.randrange(len(dims))] = str(rnd.choice(SIZES))
    new = "x".join(dims) + ("x" if match.group(1) else "")
    return text[:match.start()] + new + text[match.end():]


def _one_size_everywhere(rnd: random.Random, text: str) -> str:
    """One size, in every tile shape that has it: shapes stay consistent, so more mutants verify."""
    sizes = sorted({d for m in _TILE_DIMS.finditer(text) for d in (m.group(1) or m.group(2)).split("x") if d})
    if not sizes:
        return text
    old, new = rnd.choice(sizes), str(rnd.choice(SIZES[1:]))

    def swap(match: re.Match[str]) -> str:
        dims = (match.group(1) or match.group(2)).split("x")
        return "x".join(new if d == old else d for d in dims)

    return _TILE_DIMS.sub(swap, text)


def _rank_zero(rnd: random.Random, text: str) -> str:
    """A `tile<1x...xT>` becomes `tile<T>` (0-d), or the other way round."""
    if rnd.random() < 0.5:
        return re.sub(r"tile<((?:1x)+)", "tile<", text, count=1)
    found = list(re.finditer(r"tile<(?=[a-z])", text))
    if not found:
        return text
    at = rnd.choice(found).end()
    return text[:at] + "1x" + text[at:]


def _one_type(rnd: random.Random, text: str) -> str:
    found = list(_TYPE.finditer(text))
    if not found:
        return text
    match = rnd.choice(found)
    return text[:match.start()] + rnd.choice(ELEMENT_TYPES) + text[match.end():]


def _one_type_everywhere(rnd: random.Random, text: str) -> str:
    present = sorted({m.group(1) for m in _TYPE.finditer(text)})
    if not present:
        return text
    old, new = rnd.choice(present), rnd.choice(ELEMENT_TYPES)
    return _TYPE.sub(lambda m: new if m.group(1) == old else m.group(1), text)


def _keyword(rnd: random.Random, text: str) -> str:
    group = rnd.choice(KEYWORD_SWAPS)
    found = list(re.finditer(r"(?<![\w%#@])(" + "|".join(group) + r")(?![\w])", text))
    if not found:
        return text
    match = rnd.choice(found)
    return text[:match.start()] + rnd.choice(group) + text[match.end():]


def _number_attribute(rnd: random.Random, text: str) -> str:
    """`name = N` (dim, alignment, num_elem, ...) or a constant's value gets another number."""
    found = list(re.finditer(r"(?<=[=:] )(-?\d+)(?=[\s,>\]}])", text))
    if not found:
        return text
    match = rnd.choice(found)
    value = rnd.choice((0, 1, -1, 2, 7, 16, 64, 255, 1 << 20, 1 << 31, 1 << 62))
    return text[:match.start()] + str(value) + text[match.end():]


def _hints(rnd: random.Random, text: str) -> str:
    """The entry's optimization hints: one to three entries, for `default` or a target."""
    found = list(re.finditer(r"optimization_hints=<[^\n]*?>(?= \{)", text))
    if not found:
        return text
    match = rnd.choice(found)
    arch = rnd.choice(HINT_ARCHS)
    names = rnd.sample(HINTS, rnd.randint(1, len(HINTS)))
    body = ", ".join(f"{name} = {rnd.choice(HINT_VALUES)}" for name in sorted(names))
    return text[:match.start()] + f"optimization_hints=<{arch} = {{{body}}}>" + text[match.end():]


MUTATIONS: tuple[tuple[Callable[[random.Random, str], str], int], ...] = (
    (_one_dimension, 2), (_one_size_everywhere, 3), (_rank_zero, 1), (_one_type, 2), (_one_type_everywhere, 3),
    (_keyword, 2), (_number_attribute, 2), (_hints, 3))
_CHOICES = [fn for fn, weight in MUTATIONS for _ in range(weight)]


def mutate(rnd: random.Random, text: str) -> str:
    for _ in range(rnd.randint(1, 3)):
        text = rnd.choice(_CHOICES)(rnd, text)
    return text


# -- one input --------------------------------------------------------------------------------------
_llvm = None


def llvm_ir_problem(text: str) -> Optional[str]:
    """Why LLVM rejects `text` (our lowering made it, so any reason is our bug), or None."""
    global _llvm
    if _llvm is None:
        import llvmlite.binding as llvm

        _llvm = llvm
    try:
        module = _llvm.parse_assembly(text)
        module.verify()
    except RuntimeError as exc:
        lines = [line for line in str(exc).splitlines() if "error" in line and "parsing error" not in line]
        return (lines or [str(exc).strip() or "invalid LLVM IR"])[0]
    return None


def check_one(text: str, target: str = "sm_90") -> tuple[str, str]:
    """In this process: (outcome, detail); outcome 'rejected' (parse), 'read' (verify refused),
    'verified' (limits or lowering refused) or 'lowered' when all is well, 'failure' otherwise."""
    from tileiras.tileaa.limits import check_module
    from tileiras.dialects.verifier import verify_module
    from tileiras.driver.compile import lower_to_llvm
    from tileiras.errors import TileirasError
    from tileiras.driver.options import parse_args
    from tileiras.text.parser import parse_module

    stage = "parse"
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, PER_INPUT_SECONDS)
    try:
        module = parse_module(text, "fuzz.mlir")
        stage = "verify"
        verify_module(module)
        stage = "limits"
        check_module(module)
        stage = "lower"
        opts = parse_args(["--no-cache", "--gpu-name", target, "fuzz.mlir"])
        llvm_ir, _ = lower_to_llvm(module, target, opts)
        stage = "llvm"
        problem = llvm_ir_problem(llvm_ir)
        if problem is not None:
            return "failure", f"{target}: invalid LLVM IR: {problem}"
        return "lowered", ""
    except TileirasError as exc:
        if "internal" in exc.message:  # our own checks' words for our bugs
            return "failure", f"{target} {stage}: {exc.message}"
        return {"parse": "rejected", "verify": "read", "limits": "verified", "lower": "verified",
                "llvm": "verified"}[stage], ""
    except Hang:
        return "failure", f"hang: {stage} ran past {PER_INPUT_SECONDS:g} s"
    except RecursionError:
        return "failure", f"{stage}: RecursionError"
    except Exception:  # noqa: BLE001 - this is what the fuzzer looks for
        return "failure", f"{target} {stage}: " + traceback.format_exc(limit=-6)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def compile_fully(text: str, target: str, workdir: Path) -> tuple[str, str]:
    """The mutant through the real driver to a cubin (LLVM, ptxas): exit 0 or 5 with a diagnostic,
    never an internal compiler error, invalid LLVM IR, a ptxas failure on our PTX, or a hang."""
    source, output = workdir / "fuzz.mlir", workdir / "fuzz.cubin"
    source.write_text(text)
    output.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--gpu-name", target, str(source),
            "-o", str(output)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=FULL_COMPILE_SECONDS, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        return "failure", f"hang: the driver ran past {FULL_COMPILE_SECONDS:g} s"
    ours = ("Traceback", "internal compiler error", "invalid LLVM IR", "ptxas")
    bad = done.returncode not in (0, 5) or any(word in done.stderr for word in ours)
    if bad or (done.returncode == 0) != output.exists():
        return "failure", f"{target}: driver exit {done.returncode}: {done.stderr.strip()[-2000:]}"
    return ("compiled" if done.returncode == 0 else "refused by the driver"), ""


def fuzz(seconds: float, seed: int, max_inputs: Optional[int] = None, full_every: int = 0,
         workdir: Optional[Path] = None, seeds: Optional[list[str]] = None) -> Report:
    """Mutants for `seconds` (or `max_inputs`); every `full_every`-th one that lowers also goes
    through the whole driver (0: none), in `workdir`. Report.failures holds (text bytes, detail)."""
    rnd = random.Random(seed)
    seeds = seeds if seeds is not None else corpus()
    report = Report()
    # the product's behaviour: the suite's strict shared-memory plan check (an internal error where the
    # plan mispredicts a buffer the lowering then places anyway) is off here, as it is for users
    strict = os.environ.get("TILEIRAS_STRICT_SHARED_PLAN")
    os.environ["TILEIRAS_STRICT_SHARED_PLAN"] = "0"
    try:
        _fuzz(rnd, seeds, report, seconds, max_inputs, full_every, workdir)
    finally:
        if strict is None:
            os.environ.pop("TILEIRAS_STRICT_SHARED_PLAN", None)
        else:
            os.environ["TILEIRAS_STRICT_SHARED_PLAN"] = strict
    return report


def _fuzz(rnd: random.Random, seeds: list[str], report: Report, seconds: float, max_inputs: Optional[int],
          full_every: int, workdir: Optional[Path]) -> None:
    deadline = time.monotonic() + seconds
    seen: set[str] = set()
    while time.monotonic() < deadline and (max_inputs is None or report.inputs < max_inputs):
        text = mutate(rnd, rnd.choice(seeds))
        target = TARGETS[report.inputs % len(TARGETS)]
        outcome, detail = check_one(text, target)
        if outcome == "lowered" and full_every and workdir is not None:
            if (report.outcomes.get("lowered", 0) + 1) % full_every == 0:
                full, detail = compile_fully(text, target, workdir)
                report.outcomes[full] = report.outcomes.get(full, 0) + 1
                outcome = "failure" if full == "failure" else outcome
        report.inputs += 1
        report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
        if outcome == "failure":
            key = detail.strip().splitlines()[-1] if detail.strip() else detail
            if key not in seen:  # one example of each distinct failure
                seen.add(key)
                report.failures.append((text.encode(), detail))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=20261125)
    parser.add_argument("--save", type=Path, default=Path("fuzz-text-failures"), help="where failing inputs go")
    parser.add_argument("--replay", type=Path, help="re-check the .mlir files in this folder instead")
    parser.add_argument("--memory-gb", type=float, default=4.0, help="address-space limit (a runaway is a failure)")
    parser.add_argument("--full-every", type=int, default=25,
                        help="every Nth mutant that lowers is compiled to a cubin by the driver (0: never)")
    args = parser.parse_args(argv)
    try:
        import resource

        limit = int(args.memory_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass
    if args.replay:
        bad = 0
        for path in sorted(args.replay.glob("*.mlir")):
            for target in TARGETS:
                outcome, detail = check_one(path.read_text(), target)
                print(f"{path.name} {target}: {outcome}" + (f"\n{detail}" if detail else ""))
                bad += outcome == "failure"
        return 1 if bad else 0
    start = time.monotonic()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tileiras-fuzz-text-") as workdir:
        report = fuzz(args.seconds, args.seed, full_every=args.full_every, workdir=Path(workdir))
    print(f"{report.summary()} in {time.monotonic() - start:.0f} s (seed {args.seed})")
    if report.failures:
        args.save.mkdir(parents=True, exist_ok=True)
        for i, (data, detail) in enumerate(report.failures):
            (args.save / f"failure{i}.mlir").write_bytes(data)
            (args.save / f"failure{i}.txt").write_text(detail)
            print(f"--- failure{i} ---\n{detail}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
