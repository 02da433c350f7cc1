"""benchmarks/cache.py measures a compile as every process it started, to the end of each.

The driver exits without waiting for its LLVM worker (fast_exit; the worker dies with it), so the
benchmark adopts such orphans (PR_SET_CHILD_SUBREAPER) and adds their CPU time: without that, a
miss's and a --no-cache run's worker went uncounted, and its exit overlapped the next run.
"""

from __future__ import annotations

import subprocess
import sys
from itertools import permutations
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A "compile" whose child burns CPU after its parent has exited, as the LLVM worker outlives the driver.
ORPHAN = ("import os, time\n"
          "if os.fork() == 0:\n"
          "    end = time.process_time() + 0.2\n"
          "    while time.process_time() < end:\n"
          "        pass\n"
          "os._exit(0)\n")

PROBE = ("import sys\n"
         "sys.path.insert(0, 'benchmarks')\n"
         "import cache\n"
         "cache.ADOPTED = cache._adopt_orphans() if sys.argv[1] == 'adopt' else False\n"
         "wall, cpu = cache.run_once([sys.executable, '-c', sys.argv[2]])\n"
         "print(cache.ADOPTED, f'{cpu:.3f}')\n")


def _measured_cpu(mode: str) -> tuple[bool, float]:
    # its own process: an adopting pytest would reap other tests' children
    done = subprocess.run([sys.executable, "-c", PROBE, mode, ORPHAN], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    adopted, cpu = done.stdout.split()
    return adopted == "True", float(cpu)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux's")
def test_cpu_counts_the_children_a_compile_does_not_wait_for() -> None:
    adopted, cpu = _measured_cpu("adopt")
    assert adopted
    assert cpu >= 0.18  # the orphan's 0.2 s
    _, unadopted = _measured_cpu("plain")
    assert unadopted < 0.12  # what the old measure saw: the orphan's time lost to init


def test_each_mode_follows_each_other_mode_equally_often() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import cache
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert sorted(cache.ORDERS) == sorted(permutations(cache.MODES))
    follows = [(order[i - 1], order[i]) for order in cache.ORDERS for i in range(1, len(order))]
    assert len(set(follows)) == 6 and all(follows.count(pair) == follows.count(follows[0]) for pair in follows)
