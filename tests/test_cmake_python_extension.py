"""examples/python-extension: a scikit-build-core wheel carrying TileIR kernels, built with `pip wheel`.

scikit-build-core finds TileIR through the tileiras wheel's `cmake.prefix`
entry point; nothing names TileIR_DIR. Needs the whole compiler: fails, not
skips, until it works end to end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from test_cmake_support import REPO, tileiras_wheel  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

EXAMPLE = REPO / "examples" / "python-extension"
CHECK = """
import numpy as np, vecops
if vecops.gpu_available():
    a = np.arange(1000, dtype=np.float32); b = np.full(1000, 3.0, np.float32)
    assert (vecops.vadd(a, b) == a + b).all() and (vecops.vscale(a, 2.5) == a * np.float32(2.5)).all()
    print("vecops: GPU results match")
else:
    try:
        vecops.vadd([1.0], [2.0])
    except vecops.NoGPUError as exc:
        print("vecops: no GPU:", exc)
    else:
        raise SystemExit("vadd ran without a GPU")
"""


def pip(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=env)
    assert result.returncode == 0, f"pip {' '.join(args)} failed:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    return result


def check_wheel(dist: Path, tmp_path: Path) -> None:
    [wheel] = dist.glob("vecops-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "vecops/__init__.py" in names and "vecops/_driver.py" in names
    assert any(n.startswith("vecops/_vecops") and n.endswith(".so") for n in names), names
    site = tmp_path / "vecops_site"
    pip("install", "-q", "--no-deps", "--no-index", "--target", str(site), str(wheel))
    env = dict(os.environ, PYTHONPATH=str(site))
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "vecops:" in result.stdout


def test_pip_wheel_without_build_isolation(tmp_path: Path, tileiras_wheel: Path) -> None:  # noqa: F811
    """tileiras installed (here: into a --target dir on PYTHONPATH), then `pip wheel --no-build-isolation`."""
    site = tmp_path / "tileiras_site"
    pip("install", "-q", "--no-deps", "--no-index", "--target", str(site), str(tileiras_wheel))
    source = tmp_path / "python-extension"
    shutil.copytree(EXAMPLE, source)
    env = dict(os.environ, PYTHONPATH=str(site), TILEIRAS_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TileIR_DIR", None)
    pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp_path / "dist"), str(source),
        env=env)
    check_wheel(tmp_path / "dist", tmp_path)


def test_pip_wheel_with_build_isolation(tmp_path: Path, tileiras_wheel: Path) -> None:  # noqa: F811
    """The everyday route: pip builds in an isolated environment with tileiras as a build requirement.

    pip resolves scikit-build-core and tileiras' dependencies from the configured index.
    """
    source = tmp_path / "python-extension"
    shutil.copytree(EXAMPLE, source)
    env = dict(os.environ, TILEIRAS_CACHE_DIR=str(tmp_path / "cache"))
    pip("wheel", "--no-deps", "--find-links", str(tileiras_wheel.parent), "-w", str(tmp_path / "dist"), str(source),
        env=env)
    check_wheel(tmp_path / "dist", tmp_path)
