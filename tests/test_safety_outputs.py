"""Outputs harm nothing but themselves: every file a command writes must be a regular file (or
nothing yet) and none of its inputs; anything else is refused before any work, with one line,
exit 5 and the target untouched. Root is where this matters most (renaming over /dev/null
succeeds for root), so the cases run as whoever runs the suite, and the unprivileged ones as
`nobody` (tests/safety_users.py)."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from safety_users import as_unprivileged, shared_tmp, unprivileged_python  # noqa: E402,F401

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "tests" / "corpus" / "bytecode" / "ew_float" / "13.4.tileirbc"


def run(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


def tileiras(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run("tileiras.driver.tileiras_main", "--gpu-name=sm_90", *args, cwd=cwd)


# -- what may sit at an output path: name -> maker(dir, input) returning the path -----------------
def _fifo(d: Path, _: Path) -> Path:
    os.mkfifo(d / "fifo")
    return d / "fifo"


def _device(d: Path, _: Path) -> Path:
    """A private copy of /dev/full (root can make one); others get the real one, which they cannot
    replace anyway, so a broken check cannot harm the machine either way."""
    return _char_device(d / "full", 7, "/dev/full")


def _char_device(path: Path, minor: int, system: str) -> Path:
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        return path
    except PermissionError:
        if not os.path.exists(system):
            pytest.skip(f"cannot make a device node and there is no {system}")
        return Path(system)


def _socket(d: Path, _: Path) -> Path:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / "sock"))
    _open_sockets.append(sock)
    return d / "sock"


_open_sockets: list[socket.socket] = []


def _directory(d: Path, _: Path) -> Path:
    (d / "folder").mkdir()
    return d / "folder"


def _the_input(_: Path, source: Path) -> Path:
    return source


def _hard_link(d: Path, source: Path) -> Path:
    os.link(source, d / "hard.tileirbc")
    return d / "hard.tileirbc"


def _symlink_to_input(d: Path, source: Path) -> Path:
    os.symlink(source.name, d / "soft.tileirbc")
    return d / "soft.tileirbc"


def _symlink_to_fifo(d: Path, source: Path) -> Path:
    fifo = _fifo(d, source)
    os.symlink(fifo.name, d / "to-fifo")
    return d / "to-fifo"


TARGETS: dict[str, tuple[Callable[[Path, Path], Path], str]] = {
    "fifo": (_fifo, "it is a FIFO, not a regular file"),
    "device": (_device, "it is a character device, not a regular file"),
    "socket": (_socket, "it is a socket, not a regular file"),
    "directory": (_directory, "it is a directory, not a regular file"),
    "input": (_the_input, "it is the input, which writing would destroy"),
    "hard link to the input": (_hard_link, "it is the same file as the input"),
    "symlink to the input": (_symlink_to_input, "it is the same file as the input"),
    "symlink to a fifo": (_symlink_to_fifo, "it is a FIFO, not a regular file"),
}

# which output of the driver the bad path is given as: name -> arguments (with {bad})
OUTPUTS: dict[str, list[str]] = {
    "-o": ["-o", "{bad}"],
    "--header": ["--emit=obj", "-o", "k.o", "--header", "{bad}"],
    "-MF": ["--emit=ptx", "-o", "k.ptx", "-MD", "-MF", "{bad}"],
}


def _identity(path: Path) -> tuple[int, ...]:
    st = os.lstat(path)
    return st.st_mode, st.st_ino, st.st_dev, st.st_rdev, st.st_size, st.st_mtime_ns


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copy(KERNEL, tmp_path / "k.tileirbc")
    yield tmp_path
    while _open_sockets:
        _open_sockets.pop().close()


@pytest.mark.parametrize("output", OUTPUTS)
@pytest.mark.parametrize("target", TARGETS)
def test_an_output_that_is_not_a_regular_file_or_is_the_input_is_refused(workdir: Path, target: str,
                                                                         output: str) -> None:
    source = workdir / "k.tileirbc"
    make, reason = TARGETS[target]
    bad = make(workdir, source)
    before = {p.name: _identity(p) for p in workdir.iterdir()}
    device_before = _identity(bad)
    kernel_bytes = source.read_bytes()
    result = tileiras(*[a.format(bad=bad) for a in OUTPUTS[output]], str(source), cwd=workdir)
    assert result.returncode == 5, result.stderr
    assert result.stderr.strip() == f"error: refusing to write '{bad}': {reason}" or \
        result.stderr.startswith(f"error: refusing to write '{bad}': {reason}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert _identity(bad)[:4] == device_before[:4]  # untouched: same file, same type
    if workdir in bad.parents:
        assert _identity(bad) == device_before  # same size and time too
    assert source.read_bytes() == kernel_bytes
    assert {p.name: _identity(p) for p in workdir.iterdir()} == before  # nothing written, no temp files


def test_the_null_device_discards_the_output_and_is_never_touched(workdir: Path) -> None:
    """`-o /dev/null` (the null device, wherever its node is) is accepted: nothing is written, and
    the node is neither replaced nor, when a later output fails, removed."""
    null = _char_device(workdir / "null", 3, os.devnull)
    before = _identity(null)
    result = tileiras("-o", str(null), "-MD", "-MF", "k.d", "k.tileirbc", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert _identity(null)[:4] == before[:4]
    assert (workdir / "k.d").read_text().startswith(f"{null}:")

    from tileiras.driver import tileiras_main
    from tileiras.driver.options import parse_args

    class NoMetadata:  # a compile whose header cannot be made: fails after the output is "written"
        inputs_read: list[str] = []
        metadata: dict[str, object] = {}

    opts = parse_args(["--gpu-name=sm_90", "--emit=obj", "-o", str(null), "--header", str(workdir / "k.h"), "k.tileirbc"])
    with pytest.raises(KeyError):
        tileiras_main._write_outputs(opts, NoMetadata(), b"object")
    assert _identity(null)[:4] == before[:4]


def test_side_files_of_a_discarded_output_are_discarded(workdir: Path) -> None:
    """`-o /dev/null -MD` must not create `/dev/null.d` (nor `--emit-metadata` `/dev/null.json`): the
    side files named after a discarded output are discarded too. Run against a private null node, so
    that a broken check writes into the test's folder, never under /dev."""
    from tileiras.output import side_file

    assert side_file(os.devnull, ".d") == os.devnull  # the name only: nothing is written here
    null = _char_device(workdir / "null", 3, os.devnull)
    if workdir not in null.parents:
        pytest.skip("cannot make a private null device node (not root)")
    assert side_file(str(null), ".d") == os.devnull and side_file(str(workdir / "k.cubin"), ".d").endswith("k.cubin.d")
    before = {p.name for p in workdir.iterdir()}
    result = tileiras("-o", str(null), "-MD", "--emit-metadata", "k.tileirbc", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert {p.name for p in workdir.iterdir()} == before  # no null.d, no null.json, no temp files
    # A depfile named with -MF is the user's choice: written, naming the discarded output.
    assert tileiras("-o", str(null), "-MD", "-MF", "k.d", "k.tileirbc", cwd=workdir).returncode == 0
    assert (workdir / "k.d").read_text().startswith(f"{null}:")


def test_two_outputs_naming_one_file_are_refused(workdir: Path) -> None:
    result = tileiras("--emit=obj", "-o", "k.o", "--header", "./k.o", "k.tileirbc", cwd=workdir)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: two outputs name the same file: 'k.o' and './k.o'"
    assert not (workdir / "k.o").exists()


REMARKS_YAML = ["--remarks=all", "--remark-format=yaml", "--remarks-output-file"]


@pytest.mark.parametrize("args,message", [
    (["-o", "k.cubin", *REMARKS_YAML, "k.cubin"], "'k.cubin' and 'k.cubin'"),
    (["--emit=obj", "-o", "k.o", "--header", "k.h", *REMARKS_YAML, "./k.h"], "'./k.h' and 'k.h'"),
], ids=["-o", "--header"])
def test_a_remarks_file_naming_another_output_is_refused(workdir: Path, args: list[str], message: str) -> None:
    """Issue 37, item 9: it was written, then silently replaced by the other output (exit 0)."""
    (workdir / "k.h").write_text("kept")
    result = tileiras(*args, "k.tileirbc", cwd=workdir)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: two outputs name the same file: {message}"
    assert not (workdir / "k.cubin").exists() and not (workdir / "k.o").exists()
    assert (workdir / "k.h").read_text() == "kept"


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1"])
def test_an_output_to_dev_stdout_is_written_as_with_dash(workdir: Path, name: str) -> None:
    """Issue 37, item 9: `-o /dev/stdout | ...` failed with "No such file or directory" on a pipe."""
    dash = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--gpu-name=sm_90", "-o", "-",
                           "k.tileirbc"], capture_output=True, cwd=workdir, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          timeout=120)
    named = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--gpu-name=sm_90", "-o", name,
                            "k.tileirbc"], capture_output=True, cwd=workdir,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert named.returncode == 0, named.stderr
    assert named.stdout == dash.stdout and named.stdout.startswith(b"\x7fELF")
    assert tileiras("-o", name, "-MD", "k.tileirbc", cwd=workdir).returncode == 2  # no side file beside stdout


def test_a_symlinked_output_is_written_through_and_stays_a_link(workdir: Path) -> None:
    (workdir / "real.ptx").write_text("old")
    os.symlink("real.ptx", workdir / "link.ptx")
    result = tileiras("--emit=ptx", "-o", "link.ptx", "-MD", "k.tileirbc", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert (workdir / "link.ptx").is_symlink()
    assert (workdir / "real.ptx").read_text().lstrip().startswith("//")
    assert (workdir / "link.ptx.d").read_text().startswith("link.ptx:")
    assert sorted(p.name for p in workdir.iterdir()) == ["k.tileirbc", "link.ptx", "link.ptx.d", "real.ptx"]


def test_tileir_asm_never_overwrites_its_source(workdir: Path) -> None:
    text = workdir / "k.mlir"
    disasm = run("tileiras.driver.disasm_main", "k.tileirbc", cwd=workdir)
    text.write_text(disasm.stdout)
    result = run("tileiras.driver.tileir_main", "asm", "k.mlir", "-o", "k.mlir", cwd=workdir)
    assert result.returncode == 5
    assert result.stderr.strip() == "error: refusing to write 'k.mlir': it is the input, which writing would destroy"
    assert text.read_text() == disasm.stdout


def test_tileir_header_never_overwrites_its_metadata(workdir: Path) -> None:
    made = tileiras("--emit=ptx", "--emit-metadata", "-o", "k.ptx", "k.tileirbc", cwd=workdir)
    assert made.returncode == 0, made.stderr
    meta = (workdir / "k.ptx.json").read_bytes()
    result = run("tileiras.driver.tileir_main", "header", "--metadata", "k.ptx.json", "-o", "k.ptx.json", cwd=workdir)
    assert result.returncode == 5 and "it is the input" in result.stderr
    assert (workdir / "k.ptx.json").read_bytes() == meta


def test_tileir_header_onto_a_fifo_neither_blocks_nor_replaces_it(workdir: Path) -> None:
    made = tileiras("--emit=ptx", "--emit-metadata", "-o", "k.ptx", "k.tileirbc", cwd=workdir)
    assert made.returncode == 0, made.stderr
    fifo = _fifo(workdir, workdir / "k.tileirbc")
    result = run("tileiras.driver.tileir_main", "header", "--metadata", "k.ptx.json", "-o", "fifo", cwd=workdir)
    assert result.returncode == 5
    assert result.stderr.strip() == "error: refusing to write 'fifo': it is a FIFO, not a regular file"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_tileir_run_never_writes_its_results_over_the_kernel(workdir: Path) -> None:
    kernel = (workdir / "k.tileirbc").read_bytes()
    result = run("tileiras.driver.tileir_main", "run", "k.tileirbc", "--kernel", "k", "--grid", "1", "--out",
                 "k.tileirbc", cwd=workdir)
    assert result.returncode == 5
    assert result.stderr.strip() == "error: refusing to write 'k.tileirbc': it is the input, which writing would destroy"
    assert (workdir / "k.tileirbc").read_bytes() == kernel


def test_build_rules_plan_never_overwrites_its_request(workdir: Path) -> None:
    request = workdir / "request.json"
    request.write_text('{"targets": [{"name": "k", "sources": ["k.tileirbc"], "out_dir": "out"}]}')
    result = run("build_rules", "plan", "--request", "request.json", "-o", "request.json", cwd=workdir)
    assert result.returncode != 0 and "refusing to write 'request.json'" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert request.read_text().startswith('{"targets"')


# -- as an unprivileged user ----------------------------------------------------------------------
def test_unprivileged_user_gets_one_line_for_an_unwritable_folder(shared_tmp: Path) -> None:
    python = unprivileged_python()
    shutil.copy(KERNEL, shared_tmp / "k.tileirbc")
    os.chmod(shared_tmp / "k.tileirbc", 0o644)
    locked = shared_tmp / "locked"
    locked.mkdir(mode=0o755)  # not writable by the user
    result = as_unprivileged(python, ["-m", "tileiras.driver.tileiras_main", "--gpu-name=sm_90", "--no-cache",
                                      "-o", str(locked / "k.o"), "k.tileirbc"], cwd=shared_tmp)
    assert result.returncode == 5, result.stderr
    assert result.stderr.strip() == f"error: cannot write '{locked / 'k.o'}': Permission denied"
    assert list(locked.iterdir()) == []


def test_unprivileged_user_is_refused_a_device_before_any_work(shared_tmp: Path) -> None:
    python = unprivileged_python()
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    shutil.copy(KERNEL, shared_tmp / "k.tileirbc")
    os.chmod(shared_tmp / "k.tileirbc", 0o644)
    before = _identity(Path("/dev/full"))
    result = as_unprivileged(python, ["-m", "tileiras.driver.tileiras_main", "--gpu-name=sm_90", "--no-cache",
                                      "-o", "/dev/full", "k.tileirbc"], cwd=shared_tmp)
    assert result.returncode == 5, result.stderr
    assert result.stderr.strip() == "error: refusing to write '/dev/full': it is a character device, not a regular file"
    assert _identity(Path("/dev/full"))[:4] == before[:4]
