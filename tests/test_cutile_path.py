"""cuTile Python's own compile path through our tileiras, with NVIDIA's tileiras wheel absent.

In an environment built by cutile_env (cuTile and this checkout, no nvidia-cuda-tileiras),
cuTile picks our `tileiras` from PATH, probes the newest bytecode version with an empty module
for sm_120, then compiles each kernel with `--remark-format=yaml --remarks=all
--remarks-output-file=...` and keeps the remarks in its cache; with CUDA_TILE_DUMP_TILEIR set it
also runs `tileirdisasm` (beside `tileiras`) for the text form. `export_kernel(...,
output_format="cubin")` for corpus kernels on sm_80, sm_90, sm_100 and sm_120: every cubin is a
valid cubin for its target holding the kernel's entries, every remarks file reads as remark YAML.
By default a sample of kernels; the whole corpus with CUTILE_CORPUS_FULL=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import sass  # noqa: E402
from cutile_env import make_env  # noqa: E402
from remark_yaml import load_remarks  # noqa: E402

GPUS = ("sm_80", "sm_90", "sm_100", "sm_120")
SAMPLE = ("matmul", "softmax")
EM_CUDA = 190
# (kernel, target) cuTile exports but the compiler must refuse, with what our message says; NVIDIA's
# tileiras refuses the committed bytecode of the same kernel for the same target too (checked)
COMPILER_REFUSALS: dict[tuple[str, str], str] = {
    ("cast_e5m3", "sm_120"): "fnv8E5M3FNU requires sm_107",
}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Path]:
    where = tmp_path_factory.mktemp("cutile-env")
    py, variables = make_env(where / "venv")
    variables = {**variables, "CUDA_TILE_CACHE_DIR": str(where / "cutile-cache"),
                 "CUDA_TILE_DUMP_TILEIR": str(where / "dumps"), "TILEIRAS_CACHE_DIR": str(where / "tileiras-cache"),
                 "CUDA_TILE_TEMP_DIR": str(where)}
    return py, variables, where


def run_in(env: tuple[Path, dict[str, str], Path], *args: str) -> subprocess.CompletedProcess:
    py, variables, _ = env
    return subprocess.run([str(py), *args], capture_output=True, text=True, env=variables, timeout=3600)


def test_cutile_picks_our_tileiras_without_nvidias_wheel(env: tuple[Path, dict[str, str], Path]) -> None:
    probe = run_in(env, "-c", """
import importlib.metadata, json, tempfile
from cuda.tile._compile import _find_compiler_bin, _find_tileirdisasm_bin, _tileiras_supports_remarks
try:
    importlib.metadata.version("nvidia-cuda-tileiras")
    wheel = True
except importlib.metadata.PackageNotFoundError:
    wheel = False
print(json.dumps({"wheel": wheel, "tileiras": _find_compiler_bin().path, "disasm": _find_tileirdisasm_bin(),
                  "remarks": _tileiras_supports_remarks(tempfile.mkdtemp())}))
""")
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    bin_dir = env[0].parent
    assert found["wheel"] is False
    assert found["tileiras"] == str(bin_dir / "tileiras") and found["disasm"] == str(bin_dir / "tileirdisasm")
    # cuTile's probe (an empty module, --gpu-name sm_120, newest version first) found 13.4 or newer: it asks
    # for remarks
    assert found["remarks"] is True


def _export(env: tuple[Path, dict[str, str], Path], kernels: tuple[str, ...]) -> list[dict]:
    out = env[2] / "cubins"
    out.mkdir(exist_ok=True)
    result = run_in(env, str(ROOT / "tests" / "cutile_export_corpus.py"), str(out), ",".join(GPUS), *kernels)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["compiler"] == str(env[0].parent / "tileiras")
    return report["results"]


def _check(env: tuple[Path, dict[str, str], Path], results: list[dict]) -> None:
    failed = [f"{r['kernel']} {r['gpu']}: {r['message']}" for r in results if r["status"] == "failed"
              and COMPILER_REFUSALS.get((r["kernel"], r["gpu"]), "\0") not in r["message"]]
    assert not failed, "cuTile -> our tileiras failed:\n" + "\n".join(failed)
    nvidia = sass.fs.oracle("tileiras")
    for r in results:
        if r["status"] == "failed" and nvidia is not None:
            src = ROOT / "tests" / "corpus" / "bytecode" / r["kernel"] / "13.4.tileirbc"
            theirs = subprocess.run([nvidia, str(src), "--gpu-name", r["gpu"], "-o", os.devnull],
                                    capture_output=True, text=True)
            assert theirs.returncode == 5, f"NVIDIA's tileiras compiles {r['kernel']} for {r['gpu']}; ours refuses"
    ok = [r for r in results if r["status"] == "ok"]
    assert ok
    for r in results:
        if r["status"] == "refused":  # cuTile's own refusal (a type the target lacks), before any compiler
            assert "not supported on" in r["message"] or "requires" in r["message"], r
    dumps = list((env[2] / "dumps").glob("*.tileir"))
    for r in ok:
        data = Path(r["cubin"]).read_bytes()
        assert data[:4] == b"\x7fELF" and int.from_bytes(data[18:20], "little") == EM_CUDA, r["kernel"]
        assert (int.from_bytes(data[48:52], "little") >> 8) & 0xFF == int(r["gpu"][3:]), (r["kernel"], r["gpu"])
        functions = sass.functions(Path(r["cubin"]))  # NVIDIA's cuobjdump reads it
        assert functions, r["kernel"]
        remarks = load_remarks(r["remarks"] or "")
        assert remarks, f"{r['kernel']} {r['gpu']}: no remarks"
        assert {doc["Function"] for doc in remarks} <= set(functions)
        assert "Failed to disassemble" not in r["stderr"], r["stderr"]
        assert any(d.name.startswith(f"{r['kernel']}.") for d in dumps), r["kernel"]
    for dump in dumps:
        assert dump.read_text().startswith("entry @"), dump  # tileirdisasm's text, as NVIDIA's prints it


def test_export_kernel_through_our_tileiras(env: tuple[Path, dict[str, str], Path]) -> None:
    """A sample by default; every corpus kernel with CUTILE_CORPUS_FULL=1 (about 290 exports)."""
    _check(env, _export(env, () if os.environ.get("CUTILE_CORPUS_FULL") == "1" else SAMPLE))


def test_tileirdisasm_beside_tileiras_takes_preview_flags(env: tuple[Path, dict[str, str], Path]) -> None:
    """cuTile runs `tileirdisasm FILE --preview=F...` for its text dumps."""
    disasm = env[0].parent / "tileirdisasm"
    src = ROOT / "tests" / "corpus" / "bytecode" / "softmax" / "13.4.tileirbc"
    plain = subprocess.run([str(disasm), str(src)], capture_output=True, text=True, env=env[1])
    preview = subprocess.run([str(disasm), str(src), "--preview=simt"], capture_output=True, text=True, env=env[1])
    bogus = subprocess.run([str(disasm), str(src), "--preview=bogus"], capture_output=True, text=True, env=env[1])
    assert plain.returncode == 0 and preview.returncode == 0, preview.stderr
    assert preview.stdout == plain.stdout and plain.stdout.startswith("entry @softmax_float32(")
    assert bogus.returncode == 1 and "unknown preview feature 'bogus'" in bogus.stderr
