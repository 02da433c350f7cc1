"""Differential test: our printer against NVIDIA's `tileirdisasm`, byte for byte.

Every corpus file (tests/corpus, cuTile kernels at every bytecode version)
and every hand-built sample (tests/frontend_samples.py) is printed by both,
with and without `-g`; a file NVIDIA rejects must be rejected by us too.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import frontend_samples as fs  # noqa: E402

from tileiras.bytecode.reader import read_module  # noqa: E402
from tileiras.dialects.verifier import verify_module  # noqa: E402
from tileiras.errors import TileirasError  # noqa: E402
from tileiras.text.printer import print_module  # noqa: E402

needs_oracle = pytest.mark.skipif(fs.oracle() is None, reason="NVIDIA's tileirdisasm (nvidia-cuda-tileiras) is not installed")


def _ours(data: bytes, name: str, debug: bool) -> tuple[int, str]:
    try:
        module = read_module(data, name)
        verify_module(module)
        return 0, print_module(module, debug_info=debug)
    except TileirasError as exc:
        return 3, exc.message


def _compare(path: str, debug: bool) -> None:
    data = open(path, "rb").read()
    ref = fs.run_oracle((["-g"] if debug else []) + [path])
    code, text = _ours(data, path, debug)
    if ref.returncode != 0:
        assert code != 0, f"NVIDIA rejects {path} ({ref.stderr.strip()}) but we accept it"
        return
    assert code == 0, f"we reject {path}: {text}"
    if text != ref.stdout:
        import difflib

        diff = "\n".join(list(difflib.unified_diff(ref.stdout.splitlines(), text.splitlines(), "nvidia", "ours",
                                                   lineterm="", n=1))[:40])
        pytest.fail(f"printer differs from tileirdisasm{' -g' if debug else ''} on {path}:\n{diff}")


CORPUS = fs.corpus_files()


@needs_oracle
@pytest.mark.skipif(not CORPUS, reason="tests/corpus has no bytecode yet")
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "g"])
@pytest.mark.parametrize("path", CORPUS, ids=[os.path.relpath(p, fs.REPO) for p in CORPUS])
def test_corpus_matches_tileirdisasm(path: str, debug: bool) -> None:
    _compare(path, debug)


SAMPLE_VERSIONS = fs.VERSIONS + ("13.5",)


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("samples")
    for v in SAMPLE_VERSIONS:
        for name, data in fs.sample_bytes(v).items():
            (d / f"{name}_{v}.tileirbc").write_bytes(data)
    return str(d)


SAMPLE_VERSIONS = fs.VERSIONS + ("13.5",)  # 13.5: NVIDIA's tools read it, cuTile can write it
SAMPLE_IDS = [(v, n) for v in SAMPLE_VERSIONS for n, since, _ in fs._SAMPLES if fs._vkey(v) >= fs._vkey(since)]


@needs_oracle
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "g"])
@pytest.mark.parametrize("version,name", SAMPLE_IDS, ids=[f"{n}-{v}" for v, n in SAMPLE_IDS])
def test_samples_match_tileirdisasm(sample_dir: str, version: str, name: str, debug: bool) -> None:
    _compare(os.path.join(sample_dir, f"{name}_{version}.tileirbc"), debug)
