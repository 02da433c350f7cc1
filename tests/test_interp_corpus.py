"""Every corpus kernel, every bytecode version, every case: the interpreter against numpy.

Inputs come from the manifest recipes and the expected outputs from
tests/corpus/reference.py. Arguments follow cuTile's ABI: `ptr, shape...,
strides...` per array, scalars as themselves, and a list of arrays as a
pointer to a table of i64 descriptors (data pointer, shape..., strides...)
plus its length.
"""

from __future__ import annotations

import io
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

CORPUS = Path(__file__).resolve().parent / "corpus"
sys.path.insert(0, str(CORPUS))

import reference  # noqa: E402

MANIFEST = reference.load_manifest()


# Cases whose numpy reference disagrees with the kernel's documented semantics. Strict: once
# the reference is fixed the case passes and this entry must go.
REFERENCE_BUGS: dict[str, str] = {}


def _cases():
    for kernel, entry, case in reference.iter_cases(MANIFEST):
        for version, path in sorted(kernel["files"].items()):
            marks = []
            if entry["reference"] in REFERENCE_BUGS:
                marks.append(pytest.mark.xfail(strict=True, reason=REFERENCE_BUGS[entry["reference"]]))
            yield pytest.param(kernel, entry, case, version, path, marks=marks,
                               id=f"{entry['symbol']}-{case['name']}-{version}")


@lru_cache(maxsize=None)
def _module(path: str):
    from tileiras.frontend import load_module

    return load_module(str(CORPUS / path))


def _upload(memory, array: np.ndarray) -> list[int]:
    """An array in memory: [address, shape..., strides...] (strides in elements, C order)."""
    arr = np.ascontiguousarray(array)
    addr = memory.alloc(max(1, arr.nbytes))
    memory.write(addr, arr.tobytes())
    strides = [s // arr.itemsize for s in arr.strides]
    return [addr, *arr.shape, *strides]


def launch(kernel: dict, entry: dict, case: dict, version_path: str, args: dict) -> dict:
    from tileiras.interp.machine import Machine

    out = io.StringIO()
    machine = Machine(_module(version_path), stdout=out)
    params: list = []
    placed: dict[str, tuple[int, np.ndarray]] = {}
    for p in entry["params"]:
        name = p["name"]
        if p["kind"] == "array":
            desc = _upload(machine.memory, args[name])
            placed[name] = (desc[0], args[name])
            params += desc
        elif p["kind"] == "scalar":
            v = args[name]
            params.append(float(v) if np.asarray(v).dtype.kind == "f" else int(v))
        elif p["kind"] == "list":
            table = np.array([_upload(machine.memory, a) for a in args[name]], np.int64)
            params += [_upload(machine.memory, table)[0], len(args[name])]
    with np.errstate(all="ignore"):
        machine.launch(entry["symbol"], case["grid"], params)
    got: dict = {}
    for name, (addr, arr) in placed.items():
        raw = machine.memory.read(addr, arr.nbytes)
        got[name] = np.frombuffer(raw, arr.dtype).reshape(arr.shape)
    got[reference.STDOUT] = [line for line in out.getvalue().split("\n") if line]
    return got


@pytest.mark.parametrize("kernel,entry,case,version,path", list(_cases()))
def test_corpus_kernel_matches_numpy_reference(kernel, entry, case, version, path):
    args = reference.make_args(kernel, entry, case)
    want = reference.expected(entry, case, {k: (np.copy(v) if isinstance(v, np.ndarray) else v)
                                            for k, v in args.items()})
    got = launch(kernel, entry, case, path, args)
    if reference.STDOUT not in want:
        got.pop(reference.STDOUT)
    problems = reference.compare(entry, got, want)
    assert not problems, "\n".join(problems)
