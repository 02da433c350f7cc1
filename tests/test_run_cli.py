"""`tileir run`: arguments from .npz in cuTile's convention, three backends, clear errors."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes as md
import numpy as np
import pytest

from tileiras.driver.tileir_main import main as tileir
from tileiras.runtime.backends import gpu_present

CORPUS = Path(__file__).resolve().parent / "corpus" / "bytecode"
EW_FLOAT = CORPUS / "ew_float" / "13.4.tileirbc"
EW_SCALAR = CORPUS / "ew_scalar" / "13.4.tileirbc"
PRINTS = CORPUS / "print_assert" / "13.4.tileirbc"
RNG = np.random.default_rng(7)


def save(path: Path, arrays: list) -> Path:
    np.savez(path, **{str(i): a for i, a in enumerate(arrays)})
    return path


def ew_float_args(n: int = 200) -> list[np.ndarray]:
    a = RNG.uniform(-4, 4, n).astype(np.float32)
    b = RNG.choice([-3.5, -2.0, 0.5, 1.0, 2.5], n).astype(np.float32)
    c = RNG.uniform(-4, 4, n).astype(np.float32)
    return [a, b, c] + [np.full(n, 9.0, np.float32) for _ in range(7)]


def check_ew_float(out: dict, args: list[np.ndarray]) -> None:
    a, b, c = args[:3]
    fma = (a.astype(np.float64) * b + c).astype(np.float32)
    for k, want in zip(range(3, 10), [a + b, a - b, a * b, a / b, fma, -a, np.abs(a)]):
        np.testing.assert_array_equal(out[str(k)], want, err_msg=f"output {k}")
    for k in range(3):
        np.testing.assert_array_equal(out[str(k)], args[k])


def run_cli(tmp_path: Path, module: Path, kernel: str, grid: str, args: list, backend: str = "interpreter",
            extra: list[str] = ()) -> tuple[int, dict | None]:
    inp, out = save(tmp_path / "in.npz", args), tmp_path / "out.npz"
    code = tileir(["run", str(module), "--kernel", kernel, "--grid", grid, "--args", str(inp), "--out", str(out),
                   "--backend", backend, *extra])
    return code, (dict(np.load(out)) if out.exists() else None)


def test_interpreter_backend_runs_a_ragged_kernel(tmp_path):
    args = ew_float_args(200)                 # 4 blocks of 64: the last one is ragged
    code, out = run_cli(tmp_path, EW_FLOAT, "ew_float_float32", "4", args)
    assert code == 0
    check_ew_float(out, args)


def test_scalar_arguments_are_0d_arrays(tmp_path):
    x = RNG.uniform(-2, 2, 100).astype(np.float16)
    for flag in (True, False):
        args = [x, np.zeros(100, np.float16), np.float16(1.5), np.float16(-0.25), np.bool_(flag)]
        code, out = run_cli(tmp_path, EW_SCALAR, "ew_scalar_float16", "2", args)
        assert code == 0
        want = (np.float16(1.5) * x + np.float16(-0.25)) if flag else (x - np.float16(-0.25))
        np.testing.assert_allclose(out["1"].astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)
        assert out["2"].shape == () and out["2"] == np.float16(1.5)


def test_prints_go_to_stdout(tmp_path, capsys):
    x = np.arange(16, dtype=np.int32) - 4
    code, out = run_cli(tmp_path, PRINTS, "print_assert", "2", [x, np.zeros(16, np.int32)])
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert sorted(lines) == sorted(["block 0 sum -4", "block 0 first -4", "block 1 sum 60", "block 1 first 4"])
    np.testing.assert_array_equal(out["1"], x + 1)


def test_bf16_arrays_round_trip_through_npz(tmp_path):
    """np.savez keeps bf16 only as raw 2-byte records: those are accepted for ptr<bf16>."""
    n = 64
    vals = [RNG.uniform(-4, 4, n).astype(md.bfloat16) for _ in range(3)] + \
           [np.zeros(n, md.bfloat16) for _ in range(7)]
    code, out = run_cli(tmp_path, EW_FLOAT, "ew_float_bfloat16", "1", vals)
    assert code == 0
    assert out["3"].dtype.kind == "V"
    got = out["3"].view(md.bfloat16).astype(np.float32)
    want = (vals[0].astype(np.float32) + vals[1].astype(np.float32)).astype(md.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("args,message", [
    (lambda: ew_float_args()[:9], "provide 27"),
    (lambda: ew_float_args() + [np.zeros(3, np.float32)], "one too many"),
    (lambda: [a.astype(np.float64) for a in ew_float_args()], "dtype float64, the kernel parameter is ptr<f32>"),
    (lambda: [np.float32(1.0)] + ew_float_args()[1:], "argument 0 is a scalar"),
    (lambda: [a.reshape(10, 20) for a in ew_float_args()], "2-d array, but parameters 1..4"),
])
def test_arguments_that_do_not_fit_the_signature_exit_2(tmp_path, capsys, args, message):
    code, out = run_cli(tmp_path, EW_FLOAT, "ew_float_float32", "4", args())
    assert code == 2 and out is None
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv,code,message", [
    (["--grid", "4"], 2, "the following arguments are required: --kernel"),
    (["--kernel", "ew_float_float32", "--grid", "0"], 2, "--grid expects X[,Y[,Z]]"),
    (["--kernel", "ew_float_float32", "--grid", "4,x"], 2, "--grid expects X[,Y[,Z]]"),
    (["--kernel", "nope", "--grid", "4"], 2, "no kernel named 'nope'"),
    (["--kernel", "ew_float_float32", "--grid", "4", "--backend", "cpu"], 2, "invalid choice: 'cpu'"),
    (["--kernel", "ew_float_float32", "--grid", "4", "--gpu-name", "volta"], 2, "invalid --gpu-name"),
])
def test_bad_options_exit_2(capsys, argv, code, message):
    assert tileir(["run", str(EW_FLOAT), *argv]) == code
    assert message in capsys.readouterr().err


def test_bad_inputs_have_their_exit_codes(tmp_path, capsys):
    assert tileir(["run", str(tmp_path / "missing.tileirbc"), "--kernel", "k", "--grid", "1"]) == 1
    junk = tmp_path / "junk.tileirbc"
    junk.write_bytes(b"\x7fTileIR\x00garbage")
    assert tileir(["run", str(junk), "--kernel", "k", "--grid", "1"]) == 3
    bad_keys = tmp_path / "keys.npz"
    np.savez(bad_keys, a=np.zeros(3), b=np.zeros(3))
    assert tileir(["run", str(EW_FLOAT), "--kernel", "ew_float_float32", "--grid", "1", "--args", str(bad_keys)]) == 2
    assert "keys of" in capsys.readouterr().err
    assert tileir(["run", str(EW_FLOAT), "--kernel", "ew_float_float32", "--grid", "1",
                   "--args", str(tmp_path / "none.npz")]) == 2


def test_a_failing_run_exits_5_and_writes_nothing(tmp_path, capsys):
    x = np.arange(16, dtype=np.int32)
    x[3] = 5000                                      # the kernel asserts t < 1000
    code, out = run_cli(tmp_path, PRINTS, "print_assert", "2", [x, np.zeros(16, np.int32)])
    assert code == 5 and out is None
    err = capsys.readouterr().err
    assert "assertion failed: value too large" in err and "tile block (0, 0, 0)" in err


def test_help_lists_the_options(capsys):
    assert tileir(["run", "--help"]) == 0
    assert "--backend" in capsys.readouterr().out


def test_emulator_backend_agrees_with_the_interpreter(tmp_path):
    args = ew_float_args(200)
    code, emulated = run_cli(tmp_path, EW_FLOAT, "ew_float_float32", "4", args, backend="emulator",
                             extra=["--gpu-name", "sm_80"])
    assert code == 0
    check_ew_float(emulated, args)
    x = RNG.uniform(-2, 2, 100).astype(np.float16)
    scalar_args = [x, np.zeros(100, np.float16), np.float16(1.5), np.float16(-0.25), np.bool_(True)]
    code, emulated = run_cli(tmp_path, EW_SCALAR, "ew_scalar_float16", "2", scalar_args, backend="emulator")
    code_i, interpreted = run_cli(tmp_path, EW_SCALAR, "ew_scalar_float16", "2", scalar_args)
    assert code == code_i == 0
    np.testing.assert_allclose(emulated["1"].astype(np.float32), interpreted["1"].astype(np.float32),
                               rtol=1e-3, atol=1e-3)


def test_gpu_backend_says_plainly_when_there_is_no_gpu(tmp_path, capsys):
    if gpu_present():
        pytest.skip("a GPU is present: test_gpu_backend_agrees_with_the_interpreter covers this backend")
    code, out = run_cli(tmp_path, EW_FLOAT, "ew_float_float32", "4", ew_float_args(), backend="gpu")
    assert code == 5 and out is None
    assert "no GPU is present" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_present(), reason="no CUDA GPU present (cuda-bindings and a driver are needed)")
def test_gpu_backend_agrees_with_the_interpreter(tmp_path):
    args = ew_float_args(200)
    code, out = run_cli(tmp_path, EW_FLOAT, "ew_float_float32", "4", args, backend="gpu")
    assert code == 0
    a, b, c = args[:3]
    np.testing.assert_array_equal(out["3"], a + b)
    np.testing.assert_allclose(out["6"], a / b, rtol=2e-7)


LIST_SUM = CORPUS / "list_sum" / "13.4.tileirbc"


@pytest.mark.parametrize("backend", ["interpreter", "emulator"])
def test_a_list_argument_is_keys_n_dot_m(tmp_path, backend):
    """Keys "0.0", "0.1", ... are the arrays of list argument 0; they come back the same way."""
    arrs = [RNG.uniform(-1, 1, n).astype(np.float32) for n in (64, 64, 80)]
    inp, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inp, **{f"0.{j}": a for j, a in enumerate(arrs)}, **{"1": np.zeros(64, np.float32)})
    code = tileir(["run", str(LIST_SUM), "--kernel", "list_sum", "--grid", "2", "--args", str(inp),
                   "--out", str(out), "--backend", backend])
    assert code == 0
    got = dict(np.load(out))
    assert sorted(got) == ["0.0", "0.1", "0.2", "1"]
    want = arrs[0] + arrs[1] + arrs[2][:64]
    np.testing.assert_allclose(got["1"], want, rtol=1e-6)
    for j, a in enumerate(arrs):
        np.testing.assert_array_equal(got[f"0.{j}"], a)


@pytest.mark.parametrize("keys, message", [
    ({"0.0": 1, "0": 1, "1": 1}, "both as an array and as a list"),
    ({"0.1": 1, "1": 1}, "must have keys 0.0..0.0"),
    ({"0": 1, "2": 1}, "argument 1 is missing"),
    ({"0.x": 1}, "keys of"),
])
def test_bad_list_keys_are_usage_errors(tmp_path, capsys, keys, message):
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{k: np.zeros(4, np.float32) for k in keys})
    assert tileir(["run", str(LIST_SUM), "--kernel", "list_sum", "--grid", "1", "--args", str(bad)]) == 2
    assert message in capsys.readouterr().err


def compiled_ptx(tmp_path: Path, module: Path, gpu: str) -> str:
    from tileiras.driver.tileiras_main import main as tileiras

    out = tmp_path / "kernel.ptx"
    assert tileiras(["--emit=ptx", "--gpu-name", gpu, str(module), "-o", str(out)]) == 0
    return out.read_text()


def test_the_emulator_runs_a_given_ptx_and_checks_races_unless_told_not_to(tmp_path, capsys):
    import re

    args = ew_float_args(200)
    ptx = tmp_path / "edited.ptx"
    ptx.write_text(compiled_ptx(tmp_path, EW_FLOAT, "sm_80"))
    code, out = run_cli(tmp_path, EW_FLOAT, "ew_float_float32", "4", args, backend="emulator",
                        extra=["--ptx", str(ptx)])
    assert code == 0
    check_ew_float(out, args)
    # every block takes block 0's elements: the blocks store the same bytes, a race between them
    ptx.write_text(re.sub(r"mov\.u32\s+(%r\d+), %ctaid\.x;", r"mov.u32 \1, 0;", ptx.read_text()))
    capsys.readouterr()
    (tmp_path / "out.npz").unlink()
    code, out = run_cli(tmp_path, EW_FLOAT, "ew_float_float32", "4", args, backend="emulator",
                        extra=["--ptx", str(ptx)])
    err = capsys.readouterr().err
    assert code == 5 and out is None
    assert "data race between CTAs (write-after-write)" in err and "Traceback" not in err
    code, out = run_cli(tmp_path, EW_FLOAT, "ew_float_float32", "4", args, backend="emulator",
                        extra=["--ptx", str(ptx), "--no-race-check"])
    assert code == 0 and not np.array_equal(out["3"], args[0] + args[1])


@pytest.mark.parametrize("extra, code, message", [
    (["--ptx", "k.ptx"], 2, "--ptx needs --backend emulator"),
    (["--no-race-check"], 2, "--no-race-check needs --backend emulator"),
    (["--ptx", "missing.ptx", "--backend", "emulator"], 4, "unable to read PTX file 'missing.ptx'"),
])
def test_emulator_options_are_checked(tmp_path, capsys, monkeypatch, extra, code, message):
    monkeypatch.chdir(tmp_path)
    assert tileir(["run", str(EW_FLOAT), "--kernel", "ew_float_float32", "--grid", "1", *extra]) == code
    assert message in capsys.readouterr().err
