"""The examples' documented commands work as written from a clone (issue 37, item 3): tileiras is on
no package index, so `pip wheel examples/python-extension -w dist` asked an index for it and failed,
and `pip install tileiras` could not work either.

The fast test reads the READMEs: every pip command installs from the checkout or a wheelhouse
made from it, never `tileiras` by name. The slow one runs the commands, in a clean copy of the
checkout's tracked files, in a fresh virtual environment; pip is kept off the network by its
environment only (PIP_NO_INDEX, no build isolation, no dependencies: they are this venv's, through
a .pth file), so the command lines themselves are the documented ones."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = {"python-extension": ROOT / "examples" / "python-extension" / "README.md",
             "cmake": ROOT / "examples" / "cmake" / "README.md"}


def documented_commands(readme: Path) -> list[str]:
    """The lines of the README's first fenced block (its comments stripped)."""
    block = re.search(r"```\w*\n(.*?)```", readme.read_text(), re.S)
    assert block, f"no command block in {readme}"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


@pytest.mark.parametrize("example", sorted(DOCUMENTS))
def test_documented_pip_commands_never_ask_an_index_for_tileiras(example: str) -> None:
    commands = documented_commands(DOCUMENTS[example])
    for command in commands:
        words = command.split()
        if words[:1] != ["pip"]:
            continue
        assert "tileiras" not in words, command  # on no index
        if words[1] == "wheel" and "examples/python-extension" in words:  # its build requires tileiras
            assert "--find-links" in words and "wheelhouse" in words, command
    if example == "python-extension":
        assert "pip wheel . --no-deps -w wheelhouse" in commands


def _venv(where: Path) -> Path:
    """A fresh venv that sees this one's packages (pip, scikit-build-core, cmake, numpy, ...) after its own."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "outer-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _clean_copy(where: Path) -> Path:
    """The checkout's tracked files as they are now: what a clone (plus these edits) holds."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, names.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, where / name)
    return where


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None or shutil.which("c++") is None, reason="needs git and c++")
@pytest.mark.parametrize("example", sorted(DOCUMENTS))
def test_documented_commands_run_from_a_clean_clone(tmp_path: Path, example: str) -> None:
    clone = _clean_copy(tmp_path / "clone")
    python = _venv(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "TILEIR"))}
    env.update({"PATH": f"{python.parent}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
                "VIRTUAL_ENV": str(python.parent.parent), "TILEIRAS_CACHE_DIR": str(tmp_path / "cache"),
                # offline: the index off, the build in this environment, the dependencies already here
                "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "PIP_NO_DEPS": "1",
                "PIP_IGNORE_INSTALLED": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    for command in documented_commands(DOCUMENTS[example]):
        words = command.split()
        if words[0] in ("pip", "python"):  # this venv's: `pip` is `python -m pip` without a pip of its own
            command = f"'{python}' " + ("-m pip " if words[0] == "pip" else "") + command.split(" ", 1)[1]
        done = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, f"{command}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    if example == "python-extension":
        assert "True" in done.stdout or "False" in done.stdout  # vecops.gpu_available() ran
    else:
        assert "vector_ops" in command and done.stdout.strip()
