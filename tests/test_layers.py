"""The package layering of pyproject.toml's import contract holds (import-linter, every import
counted, those inside functions too): the compile path's levels import only the levels below them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_packages_import_only_the_layers_below_them() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.fail("lint-imports is missing: install the test extras (pip install '.[test]')")
    # the tree, not an installed copy of the package
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([lint, "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


def test_the_middle_level_is_a_layer_below_the_lowering() -> None:
    """Issue 33: nv_tileaa, nv_tileas and the scheduler decide, the lowering translates; they import
    nothing from it (each in a layer of its own below the lowering's, not an independent sibling)."""
    import tomllib

    layers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
    position = {name.strip(): i for i, layer in enumerate(layers) for name in layer.replace(":", "|").split("|")}
    for below in ("tileas", "schedule", "tileaa"):
        assert position[below] > position["lowering"], (below, layers)
        assert not any("lowering" in layer and below in layer for layer in layers), (below, layers)
