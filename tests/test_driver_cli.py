"""The `tileiras` driver: NVIDIA's option surface, exit codes and messages,
output kinds, no partial outputs, line info, and the cache's reuse rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VADD = ROOT / "tests" / "corpus" / "bytecode" / "ew_float" / "13.4.tileirbc"


def tileiras(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


@pytest.mark.parametrize("args,code,message", [
    ([], 1, "error: no input file provided"),
    (["--bogus", "x"], 1, "tileiras: Unknown command line argument '--bogus'.  Try: 'tileiras --help'"),
    (["--gpu-name", "sm_75", "x"], 1, "tileiras: for the --gpu-name option: Cannot find option named 'sm_75'!"),
    (["--host-os=mac", "x"], 1, "tileiras: for the --host-os option: Cannot find option named 'mac'!"),
    (["--sanitize=foo", "x"], 1, "tileiras: for the --sanitize option: Cannot find option named 'foo'!"),
    (["-o"], 1, "tileiras: for the -o option: requires a value!"),
    (["--opt-level=x", "y"], 1, "tileiras: for the --opt-level option: 'x' value invalid for integer argument!"),
    (["a", "b"], 1, "tileiras: Too many positional arguments specified!"),
    (["missing.tileirbc"], 1, "error: unable to read input file 'missing.tileirbc': No such file or directory"),
    (["tests"], 1, "error: unable to read input file 'tests': Is a directory"),
])
def test_command_line_errors_match_nvidia(args: list[str], code: int, message: str) -> None:
    result = tileiras(*args)
    assert result.returncode == code, result.stderr
    assert result.stderr.splitlines()[0].startswith(message)  # NVIDIA's words first; ours may add the valid values
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args,message", [
    (["--gpu-name", "sm_90", "-O4"], "error: invalid optimization level: 4"),
    (["--gpu-name", "sm_90", "-g"], "error: optimized debugging is currently not supported, change the "
                                    "optimization level to 0 or disable full debug info"),
    (["--gpu-name", "sm_90", "--gpu-name", "sm_100", "--emit=ptx"], "error: --emit=ptx takes exactly one --gpu-name"),
])
def test_invalid_option_values_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "out.o"
    result = tileiras(*args, str(VADD), "-o", str(out))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(message)
    assert not out.exists()


@pytest.mark.parametrize("content,hint", [
    (b"hello world\n", ""),
    (b"", ""),
    (b"ML\xefR\x00\x01\x02", " (it looks like MLIR bytecode instead)"),
])
def test_not_tileir_bytecode_exits_3(tmp_path: Path, content: bytes, hint: str) -> None:
    bad = tmp_path / "bad.tileirbc"
    bad.write_bytes(content)
    result = tileiras("--gpu-name", "sm_90", str(bad), "-o", str(tmp_path / "x.o"))
    assert result.returncode == 3, result.stderr
    assert result.stderr.strip() == f"error: input '{bad}' does not correspond to Tile IR bytecode{hint}"
    assert list(tmp_path.iterdir()) == [bad]


def test_truncated_bytecode_fails_cleanly_without_output(tmp_path: Path) -> None:
    bad = tmp_path / "trunc.tileirbc"
    bad.write_bytes(VADD.read_bytes()[:40])
    out = tmp_path / "out.cubin"
    result = tileiras("--gpu-name", "sm_90", str(bad), "-o", str(out), "--no-cache")
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith(f"{bad}: error:")  # names the file
    assert not out.exists()


def test_list_versions_and_version() -> None:
    assert tileiras("--list-versions").stdout.split() == ["13.1", "13.2", "13.3", "13.4", "13.5"]
    assert "tileiras" in tileiras("--version").stdout


EM_CUDA, EM_X86_64 = 190, 62


@pytest.mark.parametrize("name,emit,magic,machine", [
    # as NVIDIA's: a cubin whatever the output is called
    ("k.ptx", None, b"\x7fELF", EM_CUDA), ("k.o", None, b"\x7fELF", EM_CUDA), ("k.ll", None, b"\x7fELF", EM_CUDA),
    # our other outputs, chosen explicitly
    ("k.ptx", "ptx", b"//", None), ("k.ll", "llvm", b"target", None), ("k.bin", "cubin", b"\x7fELF", EM_CUDA),
    ("k.fatbin", "fatbin", b"\x50\xed\x55\xba", None), ("k.o", "obj", b"\x7fELF", EM_X86_64),
])
def test_output_is_a_cubin_unless_emit_says_otherwise(tmp_path: Path, name: str, emit: str | None, magic: bytes,
                                                      machine: int | None) -> None:
    out = tmp_path / name
    args = ["--gpu-name", "sm_90", str(VADD), "-o", str(out), "--no-cache"] + ([f"--emit={emit}"] if emit else [])
    result = tileiras(*args)
    assert result.returncode == 0, result.stderr
    data = out.read_bytes()
    assert data.startswith(magic)
    if machine is not None:
        assert int.from_bytes(data[18:20], "little") == machine


def test_default_output_is_elf_o_cubin(tmp_path: Path) -> None:
    result = tileiras("--gpu-name", "sm_90", str(VADD), "--no-cache", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = (tmp_path / "elf.o").read_bytes()
    assert data[:4] == b"\x7fELF" and int.from_bytes(data[18:20], "little") == EM_CUDA  # NVIDIA's default


def test_lineinfo_emits_loc_from_module_locations(tmp_path: Path) -> None:
    plain, lined = tmp_path / "a.ptx", tmp_path / "b.ptx"
    assert tileiras("--gpu-name", "sm_90", str(VADD), "-o", str(plain), "--emit=ptx", "--no-cache").returncode == 0
    assert tileiras("--gpu-name", "sm_90", "--lineinfo", str(VADD), "-o", str(lined), "--emit=ptx",
                    "--no-cache").returncode == 0
    assert ".loc" not in plain.read_text()
    text = lined.read_text()
    assert "\t.loc\t" in text and ".file" in text and "elementwise.py" in text
    assert tileiras("--gpu-name", "sm_90", "--lineinfo", str(VADD), "-o", str(tmp_path / "c.cubin"),
                    "--no-cache").returncode == 0


def test_device_debug_at_O0_builds_a_debug_cubin(tmp_path: Path) -> None:
    out = tmp_path / "g.cubin"
    result = tileiras("--gpu-name", "sm_90", "-g", "-O0", str(VADD), "-o", str(out), "--no-cache")
    assert result.returncode == 0, result.stderr
    assert b".debug_info" in out.read_bytes() or b".nv_debug" in out.read_bytes()


def test_several_targets_in_one_fatbin(tmp_path: Path) -> None:
    from tileiras.codegen.fatbin import parse_fatbin

    out = tmp_path / "k.fatbin"
    result = tileiras("--gpu-name", "sm_80", "--gpu-name", "sm_90", "--gpu-name", "sm_100", str(VADD),
                      "-o", str(out), "--emit=fatbin", "--no-cache")
    assert result.returncode == 0, result.stderr
    entries = parse_fatbin(out.read_bytes())
    kinds = sorted((e.kind, e.sm) for e in entries)
    assert ("elf", 80) in kinds and ("elf", 90) in kinds and ("elf", 100) in kinds
    assert ("ptx", 100) in kinds  # the newest target's PTX rides along for JIT


def test_header_and_metadata_side_outputs(tmp_path: Path) -> None:
    out = tmp_path / "k.o"
    result = tileiras("--gpu-name", "sm_90", str(VADD), "-o", str(out), "--emit=obj", "--header",
                      str(tmp_path / "k.h"), "--emit-metadata", "-MD", "--no-cache")
    assert result.returncode == 0, result.stderr
    header = (tmp_path / "k.h").read_text()
    assert "ew_float_float32_launch(CUstream stream" in header
    assert (tmp_path / "k.o.json").read_text().startswith("{")
    depfile = (tmp_path / "k.o.d").read_text()
    assert str(VADD) in depfile and depfile.startswith(str(out))


def test_failed_compile_leaves_no_outputs(tmp_path: Path) -> None:
    """An unsupported feature is a compile error (exit 5): no output, header or depfile appears."""
    src = ROOT / "tests" / "corpus" / "bytecode" / "cast_f8" / "13.4.tileirbc"
    result = tileiras("--gpu-name", "sm_80", str(src), "-o", str(tmp_path / "k.o"), "--emit=obj", "--header",
                      str(tmp_path / "k.h"), "-MD", "--no-cache")
    assert result.returncode == 5, result.stderr
    assert "requires sm_89 or newer; the target is sm_80" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_cache_reuses_ptx_and_survives_a_corrupt_entry(tmp_path: Path) -> None:
    env = {"TILEIRAS_CACHE_DIR": str(tmp_path / "cache")}
    first, second = tmp_path / "a.cubin", tmp_path / "b.cubin"
    assert tileiras("--gpu-name", "sm_90", str(VADD), "-o", str(first), env=env).returncode == 0
    timed = tileiras("--gpu-name", "sm_90", str(VADD), "-o", str(second), "--time-passes", env=env)
    assert timed.returncode == 0
    assert "lower to LLVM IR" not in timed.stderr and "ptxas" not in timed.stderr  # both stages were hits
    assert first.read_bytes() == second.read_bytes()
    for entry in (tmp_path / "cache").rglob("*"):
        if entry.is_file() and entry.name != "tool-versions.json":
            entry.write_bytes(entry.read_bytes()[:10])  # a killed writer's leftovers
    third = tmp_path / "c.cubin"
    assert tileiras("--gpu-name", "sm_90", str(VADD), "-o", str(third), env=env).returncode == 0
    assert third.read_bytes() == first.read_bytes()


def test_an_ir_dump_runs_the_passes_even_when_the_cache_holds_the_result(tmp_path: Path) -> None:
    """--print-ir-after-all asks to see the passes: a warm cache must not turn it into silence."""
    env = {"TILEIRAS_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "a.ptx"
    dumps = [tileiras("--gpu-name", "sm_90", str(VADD), "-o", str(out), "--emit=ptx", "--print-ir-after-all",
                      env=env) for _ in range(2)]
    assert tileiras("--gpu-name", "sm_90", str(VADD), "-o", str(out), "--emit=ptx", env=env).returncode == 0
    for dump in dumps:
        assert dump.returncode == 0, dump.stderr
        assert "IR Dump After" in dump.stderr and "nv_tileas" in dump.stderr


def test_time_passes_times_each_lowering_pass(tmp_path: Path) -> None:
    timed = tileiras("--gpu-name", "sm_90", str(VADD), "-o", str(tmp_path / "a.ptx"), "--emit=ptx", "--time-passes",
                     "--no-cache")
    assert timed.returncode == 0, timed.stderr
    lines = [line.split("s  ", 1)[1] for line in timed.stderr.splitlines() if "s  " in line]
    passes = [line for line in lines if line.endswith("(sm_90)")]
    # the canonical form (its passes, in rounds to a fixed point), nv_tileaa (tiles split over a cluster, views in
    # tensor order, the level's canonical form, facts), warps, big tiles in loops and long rows in chunks, then layout assignment and
    # nv_tileas (its schedule decisions last), then token order and LLVM IR
    canonical = [f"{name} (sm_90)" for name in ("canonicalize", "unroll-windows", "simplify-tokens", "licm", "cse",
                                                "dce", "canonical-order")]
    rounds = 0
    while passes[:len(canonical)] == canonical:
        passes, rounds = passes[len(canonical):], rounds + 1
    assert rounds >= 1
    assert passes == [f"{name} (sm_90)" for name in (
        "split-over-cluster", "order-views", "canonicalize-nv_tileaa", "infer-facts", "verify-nv_tileaa",
        "loop-tiles", "chunk-rows", "assign-layouts",
        "materialize-layouts", "fuse-conversions",
        "verify-nv_tileas", "shared-buffer-lifetimes", "plan-pipelines", "plan-warp-roles", "plan-shared-memory",
        "token-order",
        "lower to LLVM IR")]


def test_ptxas_only_change_reuses_cached_ptx(tmp_path: Path) -> None:
    env = {"TILEIRAS_CACHE_DIR": str(tmp_path / "cache")}
    assert tileiras("--gpu-name", "sm_90", str(VADD), "-o", str(tmp_path / "a.cubin"), env=env).returncode == 0
    # the PTX step is keyed on the module; a cubin for another opt level still re-runs LLVM,
    # but assembling the same PTX again is a hit for the PTX stage
    timed = tileiras("--gpu-name", "sm_90", str(VADD), "-o", str(tmp_path / "b.ptx"), "--emit=ptx", "--time-passes",
                     env=env)
    assert "lower to LLVM IR" not in timed.stderr


def test_location_only_change_is_a_cache_hit_without_lineinfo(tmp_path: Path) -> None:
    from tileiras.bytecode.sections import content_digest
    from tileiras.bytecode.encoding import SEC_DEBUG
    from tileiras.bytecode.reader import _sections

    data = VADD.read_bytes()
    start, end = _sections(data)[SEC_DEBUG]
    # flip bytes inside the debug section only: the code is unchanged, the locations are not
    moved = bytearray(data)
    moved[start + (end - start) // 2] ^= 0x01
    assert content_digest(bytes(moved), keep_locations=False) == content_digest(data, keep_locations=False)
    assert content_digest(bytes(moved), keep_locations=True) != content_digest(data, keep_locations=True)


def test_scan_deps_lists_what_the_compile_reads(tmp_path: Path) -> None:
    import json

    lib = tmp_path / "lib.tileirbc"
    lib.write_bytes(VADD.read_bytes())
    result = subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", "scan-deps", str(VADD), "-l",
                             str(lib)], capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["dependencies"] == [str(VADD), str(lib)]
    depfile = tmp_path / "k.d"
    assert tileiras("--gpu-name", "sm_90", str(VADD), "-o", str(tmp_path / "k.ptx"), "--emit=ptx", "-MD", "-MF",
                    str(depfile), "--no-cache").returncode == 0
    assert str(VADD) in depfile.read_text()
    missing = subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", "scan-deps", "nope.tileirbc"],
                             capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert missing.returncode == 1 and missing.stderr.startswith("error: unable to read input file")
