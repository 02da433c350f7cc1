"""The TileIR test corpus (tests/corpus) checked against NVIDIA's tools.

Every bytecode file the manifest lists must exist, disassemble with NVIDIA's
``tileirdisasm`` (with the entry symbols and parameter types the manifest
documents) and compile with NVIDIA's ``tileiras``; COVERAGE.md must match the
op/type coverage recomputed from the disassembly; the hand-written text kernels
must equal the disassembly of their bytecode; regenerating the corpus must give
byte-identical files; every reference must run on its recipes.

The oracle runs are many small processes, so they all start at once in a thread
pool the first time a test needs one.  ``tileiras`` runs at its default
optimisation level on the newest version of each kernel and at -O0 on the older
versions (the same front end and lowering, a third of the time); set
CORPUS_ORACLE_FULL=1 to use the default level everywhere.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import os
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

CORPUS = Path(__file__).resolve().parent / "corpus"
MAGIC = b"\x7fTileIR\x00"


def _load(name: str):
    key = f"corpus_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, CORPUS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


oracle = _load("oracle")
reference = _load("reference")
generate = _load("generate")

MANIFEST = reference.load_manifest()
KERNELS = {k["name"]: k for k in MANIFEST["kernels"]}
FILES = [(k["name"], v, rel) for k in MANIFEST["kernels"] for v, rel in k["files"].items()]
FILE_IDS = [rel for _, _, rel in FILES]


def _require_oracle() -> None:
    if not oracle.available():
        pytest.fail(f"NVIDIA's tileiras/tileirdisasm not found under {oracle.tileirdisasm_path()}"
                    " (pip install nvidia-cuda-tileiras; or set TILEIRAS_ORACLE_BIN)")


class OracleRuns:
    """All oracle processes of the session, started together."""

    def __init__(self) -> None:
        workers = max(2, os.cpu_count() or 2)
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
        full = os.environ.get("CORPUS_ORACLE_FULL") == "1"
        self.generator = self.pool.submit(self._regenerate)
        self.assembled = {}
        self.disassembled = {}
        # Slowest first: the newest versions compile at full optimisation.
        order = sorted(FILES, key=lambda f: f[1] != MANIFEST["versions"][-1])
        for name, version, rel in order:
            newest = version == KERNELS[name]["versions"][-1]
            opt = [] if (full or newest) else ["-O0"]
            self.assembled[rel] = self.pool.submit(oracle.assemble, CORPUS / rel,
                                                   KERNELS[name]["gpu_code"], opt)
        for _, _, rel in FILES:
            self.disassembled[rel] = self.pool.submit(oracle.disasm, CORPUS / rel)

    @staticmethod
    def _regenerate() -> subprocess.CompletedProcess:
        return oracle.run([sys.executable, str(CORPUS / "generate.py"), "--check"], timeout=900)


@lru_cache(maxsize=1)
def _runs() -> OracleRuns:
    _require_oracle()
    return OracleRuns()


@pytest.fixture(scope="module")
def runs() -> OracleRuns:
    r = _runs()
    yield r


def _disassembly(runs: OracleRuns, rel: str) -> str:
    proc = runs.disassembled[rel].result()
    assert proc.returncode == 0, f"tileirdisasm rejects {rel}: {proc.stderr.strip()}"
    return proc.stdout


# --------------------------------------------------------------------------- manifest

def test_manifest_covers_every_version():
    versions = MANIFEST["versions"]
    assert versions == list(oracle.VERSIONS)
    assert len(KERNELS) == len(MANIFEST["kernels"]), "duplicate kernel names"
    for k in MANIFEST["kernels"]:
        assert set(k["versions"]) | set(k["skipped"]) == set(versions), k["name"]
        assert not set(k["versions"]) & set(k["skipped"]), k["name"]
        assert versions[-1] in k["versions"], f"{k['name']} misses the newest version"
        for v, reason in k["skipped"].items():
            assert reason.strip(), f"{k['name']} {v}: skip without a reason"
        assert sorted(k["files"]) == sorted(k["versions"]), k["name"]
        assert k["entries"], k["name"]


@pytest.mark.parametrize("name,version,rel", FILES, ids=FILE_IDS)
def test_file_exists_with_header(name, version, rel):
    data = (CORPUS / rel).read_bytes()
    assert data[:8] == MAGIC, rel
    assert (data[8], data[9]) == tuple(int(x) for x in version.split(".")), rel


def test_no_stray_bytecode():
    listed = set(FILE_IDS)
    on_disk = {str(p.relative_to(CORPUS)) for p in (CORPUS / "bytecode").rglob("*")
               if p.is_file()}
    assert on_disk == listed


def test_entry_symbols_are_unique():
    symbols = [e["symbol"] for k in MANIFEST["kernels"] for e in k["entries"]]
    dupes = sorted({s for s in symbols if symbols.count(s) > 1})
    assert not dupes, dupes


# --------------------------------------------------------------------------- oracle

_ENTRY = re.compile(r"^entry @([\w.$]+)\((.*?)\)(?: optimization_hints=.*)? \{$", re.M)
_PARAM = re.compile(r"%arg\d+: tile<((?:ptr<[^>]+>)|[^>]+)>")


@pytest.mark.parametrize("name,version,rel", FILES, ids=FILE_IDS)
def test_tileirdisasm_accepts(runs, name, version, rel):
    text = _disassembly(runs, rel)
    found = {sym: _PARAM.findall(params) for sym, params in _ENTRY.findall(text)}
    want = {e["symbol"]: e["abi"] for e in KERNELS[name]["entries"]}
    assert found == want, f"{rel}: entries/ABI differ from the manifest"


@pytest.mark.parametrize("name,version,rel", FILES, ids=FILE_IDS)
def test_tileiras_accepts(runs, name, version, rel):
    proc = runs.assembled[rel].result()
    assert proc.returncode == 0, f"tileiras rejects {rel}: {proc.stderr.strip()[-2000:]}"


def test_coverage_md_is_current(runs):
    ops, types = {}, {}
    for _, _, rel in FILES:
        text = _disassembly(runs, rel)
        ops[rel], types[rel] = oracle.ops_in(text), oracle.element_types_in(text)
    markdown = generate.coverage_markdown({"ops": ops, "types": types, "failures": {}})
    assert (CORPUS / "COVERAGE.md").read_text() == markdown, \
        "COVERAGE.md is stale: run tests/corpus/generate.py"
    uncovered_ops, uncovered_types = generate.parse_uncovered(markdown)
    seen_ops = set().union(*ops.values()) | oracle.IMPLICIT_OPS
    assert uncovered_ops == set(oracle.OP_ROSTER) - seen_ops
    assert uncovered_types == set(oracle.TYPE_ROSTER) - set().union(*types.values())


def test_text_kernels_match_disassembly(runs):
    text_kernels = [k for k in MANIFEST["kernels"] if k["kind"] == "text"]
    assert text_kernels
    for k in text_kernels:
        path = CORPUS / k["source"]
        text = path.read_text()
        assert generate.text_header(text).get("min-version") == k["versions"][0], path
        newest = k["files"][k["versions"][-1]]
        assert generate.strip_text_header(text) == _disassembly(runs, newest), \
            f"{k['source']} differs from tileirdisasm {newest}"


def test_generator_is_deterministic(runs):
    proc = runs.generator.result()
    assert proc.returncode == 0, \
        f"generate.py --check found differences:\n{proc.stdout}{proc.stderr}"


# --------------------------------------------------------------------------- references

CASES = [(k["name"], e["symbol"], c["name"]) for k, e, c in reference.iter_cases(MANIFEST)]


def _find(kname: str, symbol: str, cname: str):
    k = KERNELS[kname]
    e = next(e for e in k["entries"] if e["symbol"] == symbol)
    return k, e, next(c for c in e["cases"] if c["name"] == cname)


@pytest.mark.parametrize("kname,symbol,cname", CASES,
                         ids=[f"{s}/{c}" for _, s, c in CASES])
def test_reference_runs(kname, symbol, cname):
    k, e, c = _find(kname, symbol, cname)
    args = reference.make_args(k, e, c)
    again = reference.make_args(k, e, c)
    for name, value in args.items():
        values = value if isinstance(value, list) else [value]
        others = again[name] if isinstance(value, list) else [again[name]]
        for a, b in zip(values, others):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), f"{name} not reproducible"
    want = reference.expected(e, c, args)
    assert set(want) - {reference.STDOUT} == set(e["outputs"])
    assert (reference.STDOUT in want) == k["prints"]
    for name in e["outputs"]:
        assert np.asarray(want[name]).shape == args[name].shape, name
        assert np.asarray(want[name]).dtype == args[name].dtype, name
    assert reference.compare(e, want, want) == []


def test_compare_reports_differences():
    k, e, c = _find("ew_float", "ew_float_float32", "default")
    args = reference.make_args(k, e, c)
    want = reference.expected(e, c, args)
    got = {n: np.array(v, copy=True) for n, v in want.items()}
    assert reference.compare(e, got, want) == []
    got["o_add"][3] += 1.0
    problems = reference.compare(e, got, want)
    assert len(problems) == 1 and problems[0].startswith("o_add: 1 of 256")
    k, e, c = _find("ew_int", "ew_int_int8", "default")
    args = reference.make_args(k, e, c)
    want = reference.expected(e, c, args)
    got = {n: np.array(v, copy=True) for n, v in want.items()}
    got["o_mul"][0] ^= 1
    assert [p.split(":")[0] for p in reference.compare(e, got, want)] == ["o_mul"]


def test_compare_handles_nan_and_tolerance():
    entry = {"tolerance": {"rtol": 1e-3, "atol": 0.0}}
    want = {"x": np.array([1.0, np.nan, -0.0], np.float32)}
    assert reference.compare(entry, {"x": np.array([1.0005, np.nan, 0.0], np.float32)},
                             want) == []
    assert reference.compare(entry, {"x": np.array([1.01, np.nan, 0.0], np.float32)}, want)
    assert reference.compare(entry, {"x": np.array([1.0, 0.0, 0.0], np.float32)}, want)
    exact = {"tolerance": "exact"}
    assert reference.compare(exact, {"x": np.array([1.0000001, np.nan, 0.0], np.float32)},
                             want)
