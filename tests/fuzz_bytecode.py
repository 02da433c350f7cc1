"""Mutation fuzzer of TileIR bytecode inputs, seeded by the corpus (tests/corpus/bytecode).

Each mutant goes through what the compiler does before LLVM: read, verify,
the compile-cost limits, print, and (when it is still a valid module) the
lowering to LLVM IR for one target. A mutant must end in a diagnostic (a
`TileirasError`) or succeed: any other exception, a run past the per-input
time limit (a hang) or a MemoryError is a failure, saved for replay.

    python tests/fuzz_bytecode.py --seconds 600            # the 10-minute run
    python tests/fuzz_bytecode.py --replay DIR              # re-run saved failures

CI runs a few seconds of it with a fixed seed (tests/test_safety_fuzz.py).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "bytecode"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PER_INPUT_SECONDS = 20.0  # one mutant's read + verify + lower; anything longer is a hang
FULL_COMPILE_SECONDS = 120.0  # one mutant through the whole driver (LLVM, ptxas)
LOWER_TARGETS = ("sm_90", "sm_80", "sm_100")


def corpus() -> list[bytes]:
    return [path.read_bytes() for path in sorted(CORPUS.glob("*/*.tileirbc"))]


# -- mutations: each takes (random, data, other corpus file) and returns new bytes ---------------
def _flip(rnd: random.Random, d: bytearray, _: bytes) -> None:
    d[rnd.randrange(len(d))] = rnd.randrange(256)


def _small_int(rnd: random.Random, d: bytearray, _: bytes) -> None:
    """Varints are most of bytecode: shapes, counts, indices. Nudge one, or make it a power of two."""
    i = rnd.randrange(len(d))
    d[i] = rnd.choice([(d[i] + rnd.choice((-1, 1))) % 128, 1 << rnd.randrange(7), 0, 127])


def _big_varint(rnd: random.Random, d: bytearray, _: bytes) -> None:
    """A small byte becomes a multi-byte varint: huge shapes, lengths, counts."""
    i = rnd.randrange(len(d))
    value = 1 << rnd.randrange(7, 64)
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            break
    d[i:i + 1] = out


def _delete(rnd: random.Random, d: bytearray, _: bytes) -> None:
    i = rnd.randrange(len(d))
    del d[i:i + rnd.randint(1, 16)]


def _insert(rnd: random.Random, d: bytearray, _: bytes) -> None:
    i = rnd.randrange(len(d) + 1)
    d[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 8)))


def _duplicate(rnd: random.Random, d: bytearray, _: bytes) -> None:
    i = rnd.randrange(len(d))
    chunk = d[i:i + rnd.randint(1, 64)]
    j = rnd.randrange(len(d) + 1)
    d[j:j] = chunk


def _splice(rnd: random.Random, d: bytearray, other: bytes) -> None:
    """A chunk of another corpus file: sections and ops that parse in a foreign context."""
    i = rnd.randrange(len(other))
    chunk = other[i:i + rnd.randint(4, 128)]
    j = rnd.randrange(len(d) + 1)
    d[j:j + rnd.randint(0, len(chunk))] = chunk


MUTATIONS = ((_flip, 4), (_small_int, 4), (_big_varint, 1), (_delete, 2), (_insert, 1), (_duplicate, 1),
             (_splice, 1))
_CHOICES = [fn for fn, weight in MUTATIONS for _ in range(weight)]


def mutate(rnd: random.Random, data: bytes, other: bytes) -> bytes:
    d = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        if not d:
            break
        rnd.choice(_CHOICES)(rnd, d, other)
    return bytes(d)


# -- one input ------------------------------------------------------------------------------------
class Hang(BaseException):
    """Raised by the alarm: a BaseException, so no `except Exception` in the compiler swallows it."""


def _alarm(signum: int, frame: object) -> None:
    raise Hang()


def compile_fully(data: bytes, target: str, workdir: Path) -> tuple[str, str]:
    """The mutant through the real driver, to a cubin: exit 0, 3 or 5 with one diagnostic, never a
    traceback, an internal compiler error, a crash or a hang."""
    import subprocess

    source, output = workdir / "fuzz.tileirbc", workdir / "fuzz.cubin"
    source.write_bytes(data)
    output.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--gpu-name", target, str(source),
            "-o", str(output)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=FULL_COMPILE_SECONDS, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        return "failure", f"hang: the driver ran past {FULL_COMPILE_SECONDS:g} s"
    bad = done.returncode not in (0, 3, 5) or "Traceback" in done.stderr or "internal compiler error" in done.stderr
    if bad or (done.returncode == 0) != output.exists():
        return "failure", f"driver exit {done.returncode}: {done.stderr.strip()[-2000:]}"
    return ("compiled" if done.returncode == 0 else "refused by the driver"), ""


def check_one(data: bytes, target: str = "sm_90") -> tuple[str, str]:
    """In this process: (outcome, detail); outcome is 'rejected', 'read', 'verified' or 'lowered' when all is well,
    'failure' otherwise (detail: the traceback)."""
    from tileiras.bytecode.reader import read_module
    from tileiras.tileaa.limits import check_module
    from tileiras.dialects.verifier import verify_module
    from tileiras.driver.compile import lower_to_llvm
    from tileiras.errors import TileirasError
    from tileiras.driver.options import parse_args
    from tileiras.text.printer import print_module

    stage = "read"
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, PER_INPUT_SECONDS)
    try:
        module = read_module(data, "fuzz.tileirbc")
        stage = "verify"
        verify_module(module)
        print_module(module, debug_info=True)
        stage = "limits"
        check_module(module)
        stage = "lower"
        opts = parse_args(["--no-cache", "--gpu-name", target, "fuzz.tileirbc"])
        lower_to_llvm(module, target, opts)
        return "lowered", ""
    except TileirasError:
        return {"read": "rejected", "verify": "read", "limits": "verified", "lower": "verified"}[stage], ""
    except Hang:
        return "failure", f"hang: {stage} ran past {PER_INPUT_SECONDS:g} s"
    except RecursionError:
        return "failure", f"{stage}: RecursionError (the driver reports it, but nothing should recurse this deep)"
    except Exception:  # noqa: BLE001 - this is what the fuzzer looks for
        return "failure", f"{stage}: " + traceback.format_exc(limit=-6)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Report:
    inputs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[bytes, str]] = field(default_factory=list)

    def summary(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
        return f"{self.inputs} inputs: {counts}; {len(self.failures)} failures"


def fuzz(seconds: float, seed: int, max_inputs: int | None = None, full_every: int = 0,
         workdir: Path | None = None) -> Report:
    """Mutants for `seconds` (or `max_inputs`); every `full_every`-th one that lowers also goes
    through the whole driver (0: none), in `workdir`."""
    rnd = random.Random(seed)
    seeds = corpus()
    report = Report()
    deadline = time.monotonic() + seconds
    seen_failures: set[str] = set()
    while time.monotonic() < deadline and (max_inputs is None or report.inputs < max_inputs):
        data = mutate(rnd, rnd.choice(seeds), rnd.choice(seeds))
        target = LOWER_TARGETS[report.inputs % len(LOWER_TARGETS)]
        outcome, detail = check_one(data, target)
        if outcome == "lowered" and full_every and workdir is not None:
            lowered = report.outcomes.get("lowered", 0) + 1
            if lowered % full_every == 0:
                full, detail = compile_fully(data, target, workdir)
                report.outcomes[full] = report.outcomes.get(full, 0) + 1
                outcome = "failure" if full == "failure" else outcome
        report.inputs += 1
        report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
        if outcome == "failure":
            key = detail.strip().splitlines()[-1] if detail.strip() else detail
            if key not in seen_failures:  # one example of each distinct failure
                seen_failures.add(key)
                report.failures.append((data, detail))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--save", type=Path, default=Path("fuzz-failures"), help="where failing inputs go")
    parser.add_argument("--replay", type=Path, help="re-check the .tileirbc files in this folder instead")
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
        for path in sorted(args.replay.glob("*.tileirbc")):
            outcome, detail = check_one(path.read_bytes())
            print(f"{path.name}: {outcome}\n{detail}" if detail else f"{path.name}: {outcome}")
            bad += outcome == "failure"
        return 1 if bad else 0
    start = time.monotonic()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tileiras-fuzz-") as workdir:
        report = fuzz(args.seconds, args.seed, full_every=args.full_every, workdir=Path(workdir))
    print(f"{report.summary()} in {time.monotonic() - start:.0f} s (seed {args.seed})")
    if report.failures:
        args.save.mkdir(parents=True, exist_ok=True)
        for i, (data, detail) in enumerate(report.failures):
            (args.save / f"failure{i}.tileirbc").write_bytes(data)
            (args.save / f"failure{i}.txt").write_text(detail)
            print(f"--- failure{i} ---\n{detail}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
