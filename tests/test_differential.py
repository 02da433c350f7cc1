"""Differential tests: the compiled code (PTX run by the SIMT emulator, sm_80 and sm_90
lowerings) against the reference interpreter, on every corpus case.

Integer outputs must match bit for bit; float outputs within the manifest's per-kernel
tolerance (tensor-core sums, libdevice and hardware conversions differ from the
interpreter's correctly rounded results by a few ulp). A deliberately broken lowering
must be caught.
"""

from __future__ import annotations

import io
import re
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

CORPUS = Path(__file__).resolve().parent / "corpus"
sys.path.insert(0, str(CORPUS))

import reference  # noqa: E402

from tileiras.errors import TileirasError  # noqa: E402

MANIFEST = reference.load_manifest()
TARGETS = ("sm_80", "sm_90")

# Cases that cannot run yet, with the reason (issues 3 and 4 track them). Strict: a case that
# starts passing fails here, so the entry must be removed.
KNOWN_GAPS: dict[str, str] = {}


def _newest(kernel: dict) -> str:
    return max(kernel["files"], key=lambda v: tuple(int(p) for p in v.split(".")))


def _cases():
    for kernel, entry, case in reference.iter_cases(MANIFEST):
        gpu_code = kernel.get("gpu_code") or "sm_90"
        targets = TARGETS if gpu_code == "sm_90" else (gpu_code,)
        for gpu in targets:
            ident = f"{entry['symbol']}-{case['name']}-{gpu}"
            marks = [pytest.mark.xfail(strict=True, raises=TileirasError, reason=KNOWN_GAPS[ident])] \
                if ident in KNOWN_GAPS else []
            yield pytest.param(kernel, entry, case, gpu, marks=marks, id=ident)


@lru_cache(maxsize=None)
def _module(path: str):
    from tileiras.frontend import load_module

    return load_module(str(CORPUS / path))


def _run(kernel: dict, entry: dict, case: dict, backend: str, gpu: str | None) -> dict:
    from tileiras.runtime import run_arrays

    path = kernel["files"][_newest(kernel)]
    args = reference.make_args(kernel, entry, case)
    order = [p["name"] for p in entry["params"] if p["kind"] in ("array", "scalar", "list")]
    arrays = [args[n] for n in order]
    out = run_arrays(_module(path), entry["symbol"], tuple(case["grid"]), arrays, backend=backend,
                     gpu_name=gpu, stdout=io.StringIO(), source=(CORPUS / path).read_bytes(), filename=path)
    return {n: v if isinstance(v, list) else np.asarray(v) for n, v in zip(order, out)}


FEATURE = re.compile(r"requires sm_(\d+) or newer; the target is (sm_\d+)")


@pytest.mark.parametrize("kernel,entry,case,gpu", list(_cases()))
def test_compiled_code_matches_interpreter(kernel: dict, entry: dict, case: dict, gpu: str) -> None:
    want = _run(kernel, entry, case, "interpreter", None)
    try:
        got = _run(kernel, entry, case, "emulator", gpu)
    except Exception as exc:
        # A module using a feature this target lacks (f8 on sm_80) must say so; it then runs on
        # the oldest target that has the feature instead.
        found = FEATURE.search(str(exc))
        if not found or found.group(2) != gpu:
            raise
        got = _run(kernel, entry, case, "emulator", f"sm_{found.group(1)}")
    outputs = [o for o in entry.get("outputs", []) if o in want] or list(want)
    problems = reference.compare(entry, {k: got[k] for k in outputs}, {k: want[k] for k in outputs})
    assert not problems, "\n".join(problems)


def test_an_off_by_one_mask_is_caught(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Break the bounds check of view loads and stores (< becomes <=): the suite must notice."""
    from tileiras.lowering import ops_memory

    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path))  # compile afresh with the broken lowering
    original = ops_memory._view_addresses

    def off_by_one(k, op, view, tile_type):
        text_before = len(k.b.lines)
        out = original(k, op, view, tile_type)
        k.b.lines[text_before:] = [line.replace("icmp ult i64", "icmp ule i64") for line in k.b.lines[text_before:]]
        return out

    monkeypatch.setattr(ops_memory, "_view_addresses", off_by_one)
    kernel = next(k for k in MANIFEST["kernels"] if k["name"] == "ew_float")
    entry = kernel["entries"][0]
    ragged = next(c for c in entry["cases"] if c["name"] == "ragged")
    want = _run(kernel, entry, ragged, "interpreter", None)
    try:
        got = _run(kernel, entry, ragged, "emulator", "sm_80")
    except Exception as exc:  # the emulator may fault on the access one past the end: caught too
        assert "error" in str(exc).lower()
        return
    assert reference.compare(entry, got, want), "an off-by-one mask went unnoticed"
