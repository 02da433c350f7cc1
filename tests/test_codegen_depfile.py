"""Depfiles: escaping checked against real Ninja and GNU Make, atomic writes."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tileiras.driver.depfile import escape_path, render_depfile, write_depfile
from tileiras.errors import TileirasError

AWKWARD = ["in put.tileir", "we#ird.txt", "cost$1.txt", "a:b.txt", "back\\ slash.txt", "plain.txt",
           "sub dir/x y.txt"]


@pytest.mark.parametrize("path, escaped", [
    ("plain/file.tileir", "plain/file.tileir"),
    ("my dir/k.tileir", "my\\ dir/k.tileir"),
    ("a#b", "a\\#b"),
    ("$HOME", "$$HOME"),
    ("x:y", "x\\:y"),
    ("C:\\kernels\\k.tileir", "C:\\kernels\\k.tileir"),
    ("C:/kernels/a b.tileir", "C:/kernels/a\\ b.tileir"),
    ("D:\\x:y", "D:\\x\\:y"),
    ("a\\ b", "a\\\\\\ b"),
])
def test_escaping(path: str, escaped: str) -> None:
    assert escape_path(path) == escaped


def test_render_lists_each_dependency_once_in_order() -> None:
    text = render_depfile("out dir/k.o", ["b.tileir", "a.tileir", "b.tileir"])
    assert text == "out\\ dir/k.o: \\\n b.tileir \\\n a.tileir\n"


def test_newline_in_path_is_an_error() -> None:
    with pytest.raises(TileirasError):
        render_depfile("k.o", ["bad\nname"])


def test_write_is_atomic_and_complete(tmp_path: Path) -> None:
    target = tmp_path / "k.d"
    target.write_text("old contents")
    write_depfile(str(target), "k.o", ["a b.tileir"])
    assert target.read_text() == "k.o: \\\n a\\ b.tileir\n"
    assert [p.name for p in tmp_path.iterdir()] == ["k.d"]


def make_inputs(root: Path) -> None:
    for dep in AWKWARD:
        path = root / dep
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")


@pytest.mark.skipif(shutil.which("ninja") is None, reason="needs ninja")
def test_ninja_reads_every_path_back(tmp_path: Path) -> None:
    make_inputs(tmp_path)
    write_depfile(str(tmp_path / "out.d"), "out.o", AWKWARD)
    (tmp_path / "build.ninja").write_text(
        "rule gen\n  command = touch out.o\n  depfile = out.d\n  deps = gcc\nbuild out.o: gen\n")
    subprocess.run(["ninja"], cwd=tmp_path, check=True, capture_output=True)
    listed = subprocess.run(["ninja", "-t", "deps"], cwd=tmp_path, check=True, capture_output=True,
                            text=True).stdout.splitlines()
    assert [line.strip() for line in listed[1:] if line.strip()] == AWKWARD


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_make_rebuilds_when_any_awkward_dependency_changes(tmp_path: Path) -> None:
    make_inputs(tmp_path)
    write_depfile(str(tmp_path / "out.d"), "out.o", AWKWARD)
    (tmp_path / "Makefile").write_text("out.o:\n\t@echo rebuilt\n\t@touch out.o\ninclude out.d\n")

    def make() -> str:
        return subprocess.run(["make", "-s"], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    make()
    assert make() == ""  # up to date: make found every dependency (a missing one is an error)
    past = time.time() - 100
    for dep in AWKWARD:
        os.utime(tmp_path / "out.o", (past, past))
        for other in AWKWARD:
            os.utime(tmp_path / other, (past - 10, past - 10))
        os.utime(tmp_path / dep, None)
        assert make() == "rebuilt\n", dep
