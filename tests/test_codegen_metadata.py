"""Kernel launch metadata: canonical JSON, strict validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tileiras.codegen.metadata import KernelInfo, KernelParam, ModuleMetadata
from tileiras.errors import ExitCode, TileirasError

DATA = Path(__file__).parent / "data" / "llvm"


def sample() -> ModuleMetadata:
    return ModuleMetadata((
        KernelInfo("k1", (KernelParam("a", "ptr<f32>"), KernelParam("n", "i64")), (128, 2, 1), 4096, (2, 1, 1)),
        KernelInfo("k0", (), (32, 1, 1)),
    ), "sm_90a")


def test_round_trip_and_canonical_text() -> None:
    meta = sample()
    text = meta.to_json()
    assert ModuleMetadata.from_json(text) == meta
    assert ModuleMetadata.from_json(text).to_json() == text
    assert text.endswith("\n")
    document = json.loads(text)
    assert list(document) == sorted(document)
    assert list(document["kernels"][0]) == sorted(document["kernels"][0])
    assert [k["name"] for k in document["kernels"]] == ["k1", "k0"]  # kernel order is the module's


def test_defaults_may_be_omitted() -> None:
    meta = ModuleMetadata.from_json('{"gpu": "sm_80", "kernels": [{"name": "k", "params": [], "block": [64, 1, 1]}]}')
    assert meta.kernels[0].dynamic_smem == 0 and meta.kernels[0].cluster == (1, 1, 1)


def test_data_files_are_canonical() -> None:
    for path in DATA.glob("*.meta.json"):
        text = path.read_text()
        assert ModuleMetadata.from_json(text).to_json() == text, path


BAD = [
    "not json",
    "[]",
    '{"kernels": []}',
    '{"gpu": "gfx90a", "kernels": []}',
    '{"gpu": "sm_90", "kernels": {}}',
    '{"gpu": "sm_90", "kernels": [{"params": [], "block": [1, 1, 1]}]}',
    '{"gpu": "sm_90", "kernels": [{"name": "k", "params": [], "block": [0, 1, 1]}]}',
    '{"gpu": "sm_90", "kernels": [{"name": "k", "params": [], "block": [1, 1]}]}',
    '{"gpu": "sm_90", "kernels": [{"name": "k", "params": [], "block": [1, 1, true]}]}',
    '{"gpu": "sm_90", "kernels": [{"name": "k", "params": [], "block": [1, 1, 1], "dynamic_smem": -1}]}',
    '{"gpu": "sm_90", "kernels": [{"name": "k", "params": [{"name": "x", "type": "f128"}], "block": [1, 1, 1]}]}',
    '{"gpu": "sm_90", "kernels": [{"name": "k", "params": [{"name": "x"}], "block": [1, 1, 1]}]}',
    '{"gpu": "sm_90", "kernels": [{"name": "k", "params": [], "block": [1, 1, 1]},'
    ' {"name": "k", "params": [], "block": [1, 1, 1]}]}',
    '{"gpu": "sm_90", "schema_version": 99, "kernels": []}',
]


@pytest.mark.parametrize("text", BAD)
def test_malformed_metadata(text: str) -> None:
    with pytest.raises(TileirasError) as info:
        ModuleMetadata.from_json(text)
    assert info.value.code == ExitCode.COMPILE_FAILED
    assert info.value.message.startswith("error: malformed kernel metadata")
    assert "\n" not in info.value.message
