"""Every option of NVIDIA's tileiras 13.5, checked against NVIDIA's tool itself.

Two checks: our option table (tileiras/driver/options.py) lists exactly NVIDIA's options with
the same spellings, value kinds and values (read from `tileiras --help-hidden`), and a table of
command lines, one or more per option, gives the same exit code and the same files (output,
remarks file, stdout) with both compilers on a real kernel.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import frontend_samples as fs  # noqa: E402

NVIDIA = fs.oracle("tileiras")
KERNEL = ROOT / "tests" / "corpus" / "bytecode" / "ew_float" / "13.4.tileirbc"
pytestmark = pytest.mark.skipif(NVIDIA is None, reason="NVIDIA's tileiras (nvidia-cuda-tileiras) is not installed")

EM_CUDA = 190

# (id, argv with {K} kernel, {O} output, {R} remarks file, {B} random bytes, {A} an ACF file, {D} a directory,
#  what to compare besides the exit code: "out" output file, "rem" remarks file, "stdout" stdout non-empty,
#  "cwdrem" the default remarks file in the working directory, "arch" the cubin's target, "msg" the first
#  line of stderr starts with NVIDIA's)
CASES: list[tuple[str, list[str], tuple[str, ...]]] = [
    ("no-input", [], ("stdout", "msg")),
    ("help", ["--help"], ("stdout",)),
    ("h", ["-h"], ("stdout",)),
    ("help-hidden", ["--help-hidden"], ("stdout",)),
    ("help-list", ["--help-list"], ("stdout",)),
    ("help-list-hidden", ["--help-list-hidden"], ("stdout",)),
    ("version", ["--version"], ("stdout",)),
    ("list-versions", ["--list-versions"], ("stdout",)),
    ("print-options", ["--print-options", "{K}", "--gpu-name", "sm_90", "-o", "{O}"], ("out",)),
    ("print-all-options", ["--print-all-options", "{K}", "--gpu-name", "sm_90", "-o", "{O}"], ("out",)),
    ("gpu-name", ["{K}", "--gpu-name", "sm_90", "-o", "{O}"], ("out", "arch")),
    ("gpu-name=", ["{K}", "--gpu-name=sm_80", "-o", "{O}"], ("out", "arch")),
    ("arch", ["{K}", "--arch", "sm_120", "-o", "{O}"], ("out", "arch")),
    ("gpu-name-last-wins", ["{K}", "--gpu-name", "sm_90", "--gpu-name", "sm_100", "-o", "{O}"], ("out", "arch")),
    ("gpu-name-unknown", ["{K}", "--gpu-name", "sm_999", "-o", "{O}"], ("out", "msg")),
    ("gpu-name-missing", ["{K}", "-o", "{O}"], ("out",)),
    ("O0", ["{K}", "--gpu-name", "sm_90", "-O0", "-o", "{O}"], ("out",)),
    ("O1", ["{K}", "--gpu-name", "sm_90", "-O1", "-o", "{O}"], ("out",)),
    ("O2", ["{K}", "--gpu-name", "sm_90", "-O2", "-o", "{O}"], ("out",)),
    ("O3", ["{K}", "--gpu-name", "sm_90", "-O3", "-o", "{O}"], ("out",)),
    ("O4", ["{K}", "--gpu-name", "sm_90", "-O4", "-o", "{O}"], ("out", "msg")),
    ("O-separate", ["{K}", "--gpu-name", "sm_90", "-O", "2", "-o", "{O}"], ("out",)),
    ("opt-level", ["{K}", "--gpu-name", "sm_90", "--opt-level", "1", "-o", "{O}"], ("out",)),
    ("opt-level=", ["{K}", "--gpu-name", "sm_90", "--opt-level=2", "-o", "{O}"], ("out",)),
    ("opt-level-bad", ["{K}", "--gpu-name", "sm_90", "--opt-level=x", "-o", "{O}"], ("out",)),
    ("device-debug-O3", ["{K}", "--gpu-name", "sm_90", "--device-debug", "-o", "{O}"], ("out",)),
    ("g-O0", ["{K}", "--gpu-name", "sm_90", "-g", "-O0", "-o", "{O}"], ("out",)),
    ("device-debug-O0", ["{K}", "--gpu-name", "sm_90", "--device-debug", "--opt-level=0", "-o", "{O}"], ("out",)),
    ("lineinfo", ["{K}", "--gpu-name", "sm_90", "--lineinfo", "-o", "{O}"], ("out",)),
    ("host-arch", ["{K}", "--gpu-name", "sm_90", "--host-arch=aarch64", "-o", "{O}"], ("out",)),
    ("host-arch-bad", ["{K}", "--gpu-name", "sm_90", "--host-arch=mips", "-o", "{O}"], ("out",)),
    ("host-os", ["{K}", "--gpu-name", "sm_90", "--host-os", "windows", "-o", "{O}"], ("out",)),
    ("host-os-bad", ["{K}", "--gpu-name", "sm_90", "--host-os=beos", "-o", "{O}"], ("out",)),
    ("l-without-simt", ["{K}", "--gpu-name", "sm_90", "-l", "missing.lib", "-o", "{O}"], ("out", "msg")),
    ("l-missing", ["{K}", "--gpu-name", "sm_90", "--preview=simt", "-l", "missing.lib", "-o", "{O}"],
     ("out", "msg")),
    ("l-directory", ["{K}", "--gpu-name", "sm_90", "--preview=simt", "-l", "{D}", "-o", "{O}"], ("out", "msg")),
    ("l-glued", ["{K}", "--gpu-name", "sm_90", "--preview=simt", "-l{D}", "-o", "{O}"], ("out",)),
    ("output-file", ["{K}", "--gpu-name", "sm_90", "--output-file={O}"], ("out",)),
    ("o-glued", ["{K}", "--gpu-name", "sm_90", "-o{O}"], ("out",)),
    ("o-any-name-is-a-cubin", ["{K}", "--gpu-name", "sm_90", "-o", "{O}.o"], ("out.o",)),
    ("o-stdout", ["{K}", "--gpu-name", "sm_90", "-o", "-"], ("stdout", "elf-stdout")),
    ("o-missing-value", ["{K}", "--gpu-name", "sm_90", "-o"], ()),
    ("preview", ["{K}", "--gpu-name", "sm_90", "--preview=simt", "-o", "{O}"], ("out",)),
    ("preview-bogus", ["{K}", "--gpu-name", "sm_90", "--preview=bogus", "-o", "{O}"], ("out", "msg")),
    ("preview-list-bogus", ["{K}", "--gpu-name", "sm_90", "--preview=simt,bogus", "-o", "{O}"], ("out", "msg")),
    ("sanitize", ["{K}", "--gpu-name", "sm_90", "--sanitize=memcheck", "-o", "{O}"], ("out",)),
    ("sanitize-bad", ["{K}", "--gpu-name", "sm_90", "--sanitize=thread", "-o", "{O}"], ("out",)),
    ("apply-controls", ["{K}", "--gpu-name", "sm_90", "--apply-controls={A}", "-o", "{O}"], ("out",)),
    ("remarks-command-line", ["{K}", "--gpu-name", "sm_90", "--remarks=all", "-o", "{O}"], ("out", "stdout")),
    ("remark-format-command-line", ["{K}", "--gpu-name", "sm_90", "--remark-format=command-line",
                                    "--remarks=memory", "-o", "{O}"], ("out", "stdout")),
    ("remark-format-yaml-alone", ["{K}", "--gpu-name", "sm_90", "--remark-format=yaml", "-o", "{O}"],
     ("out", "cwdrem")),
    ("remarks-yaml-default-file", ["{K}", "--gpu-name", "sm_90", "--remark-format=yaml", "--remarks=all",
                                   "-o", "{O}"], ("out", "cwdrem")),
    ("remarks-output-file", ["{K}", "--gpu-name", "sm_90", "--remark-format=yaml", "--remarks=all",
                             "--remarks-output-file={R}", "-o", "{O}"], ("out", "rem")),
    ("remarks-output-file-bad", ["{K}", "--gpu-name", "sm_90", "--remark-format=yaml", "--remarks=all",
                                 "--remarks-output-file=/nonexistent/dir/r.yaml", "-o", "{O}"], ("out", "msg")),
    ("remarks-none", ["{K}", "--gpu-name", "sm_90", "--remark-format=yaml", "--remarks=none",
                      "--remarks-output-file={R}", "-o", "{O}"], ("out", "rem")),
    ("remarks-bad", ["{K}", "--gpu-name", "sm_90", "--remarks=bogus", "-o", "{O}"], ("out", "msg")),
    *[(f"remarks-{kind}", ["{K}", "--gpu-name", "sm_90", "--remark-format=yaml", f"--remarks-{kind}={what}",
                           "--remarks-output-file={R}", "-o", "{O}"], ("out", "rem"))
      for kind, what in (("passed", "memory"), ("missed", "all"), ("failed", "tensorcore"), ("analysis", "all"))],
    ("remarks-passed-bad", ["{K}", "--gpu-name", "sm_90", "--remarks-passed=most", "-o", "{O}"], ("out",)),
    ("remark-format-bad", ["{K}", "--gpu-name", "sm_90", "--remark-format=json", "-o", "{O}"], ("out",)),
    ("unknown-option", ["{K}", "--bogus", "-o", "{O}"], ("out",)),
    ("flag-with-value", ["{K}", "--gpu-name", "sm_90", "--lineinfo=1", "-o", "{O}"], ("out",)),
    ("two-inputs", ["{K}", "{K}", "--gpu-name", "sm_90", "-o", "{O}"], ("out",)),
    ("missing-input", ["missing.tileirbc", "--gpu-name", "sm_90", "-o", "{O}"], ("out",)),
    ("directory-input", ["{D}", "--gpu-name", "sm_90", "-o", "{O}"], ("out",)),
    ("not-tileir", ["{B}", "--gpu-name", "sm_90", "-o", "{O}"], ("out",)),
]


def _run(tool: list[str], args: list[str], work: Path) -> tuple[subprocess.CompletedProcess, dict[str, object]]:
    work.mkdir()
    (work / "acf.txt").write_text("a control file\n")
    (work / "random.bin").write_bytes(bytes(range(7, 256, 3)) * 4)
    (work / "dir").mkdir()
    subst = {"{K}": str(KERNEL), "{O}": str(work / "out.cubin"), "{R}": str(work / "r.yaml"),
             "{B}": str(work / "random.bin"), "{A}": str(work / "acf.txt"), "{D}": str(work / "dir")}
    argv = []
    for arg in args:
        for key, value in subst.items():
            arg = arg.replace(key, value)
        argv.append(arg)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([*tool, *argv], capture_output=True, cwd=work, env=env, timeout=300)
    out = work / "out.cubin"
    facts: dict[str, object] = {
        "out": out.exists(), "out.o": (work / "out.cubin.o").exists(), "rem": (work / "r.yaml").exists(),
        "cwdrem": (work / "tileir_remarks.yaml").exists(), "stdout": bool(result.stdout.strip()),
        "elf-stdout": result.stdout[:4] == b"\x7fELF" and int.from_bytes(result.stdout[18:20], "little") == EM_CUDA,
    }
    if out.exists():
        data = out.read_bytes()
        facts["arch"] = data[48:52]  # e_flags: the SM the cubin is for
        assert int.from_bytes(data[18:20], "little") == EM_CUDA
    if (work / "out.cubin.o").exists():
        assert int.from_bytes((work / "out.cubin.o").read_bytes()[18:20], "little") == EM_CUDA
    return result, facts


@pytest.mark.parametrize("case,args,compare", CASES, ids=[c[0] for c in CASES])
def test_option_behaves_as_nvidia(tmp_path: Path, case: str, args: list[str], compare: tuple[str, ...]) -> None:
    theirs, their_facts = _run([NVIDIA], args, tmp_path / "nvidia")
    ours, our_facts = _run([sys.executable, "-m", "tileiras"], args, tmp_path / "ours")
    err = ours.stderr.decode(errors="replace")
    assert ours.returncode == theirs.returncode, (case, err, theirs.stderr.decode(errors="replace"))
    assert "Traceback" not in err
    their_err = theirs.stderr.decode(errors="replace")
    for what in compare:
        if what == "msg":
            assert err.splitlines()[0].startswith(their_err.splitlines()[0]), (err, their_err)
        else:
            assert our_facts[what] == their_facts[what], (case, what, err)
    if ours.returncode != 0:
        assert err.strip(), "a failure always says why"


@pytest.mark.parametrize("flag", ["--help", "--help-hidden", "--help-list", "--help-list-hidden"])
def test_help_lists_every_nvidia_option_in_nvidia_words(flag: str) -> None:
    """Our help has every row of NVIDIA's (spelling, value names, choices, text), in its order, and
    our own options only under their own heading after it."""
    from tileiras.driver.options import help_text

    ours = help_text(hidden="hidden" in flag, as_list="list" in flag).split("\nBuild-system options")[0]
    theirs_lines = subprocess.run([NVIDIA, flag], capture_output=True, text=True).stdout.splitlines()[1:]
    assert [line.rstrip() for line in ours.splitlines()[1:] if line.strip()] == \
        [line.rstrip() for line in theirs_lines if line.strip()]


def test_option_table_matches_nvidia_spellings_and_values() -> None:
    from tileiras.driver.options import OPTIONS

    theirs: dict[str, set[str]] = {}
    current = ""
    text = subprocess.run([NVIDIA, "--help-hidden"], capture_output=True, text=True).stdout
    for line in text.splitlines():
        if m := re.match(r"^  (-{1,2}[\w-]+)", line):
            current = m.group(1)
            theirs[current] = set()
        elif m := re.match(r"^    =([\w-]+)", line):
            theirs[current].add(m.group(1))
    ours = {name: {value for value, _ in spec.choices} for spec in OPTIONS if spec.group != "extension"
            for name in spec.names[:1]}
    aliases = {name for spec in OPTIONS if spec.group != "extension" for name in spec.names[1:]}
    assert set(ours) | aliases == set(theirs)
    for name, values in ours.items():
        assert values == theirs[name], name
