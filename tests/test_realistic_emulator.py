"""Every realistic configuration (tests/realistic/) runs on the PTX emulator, race checker on,
and agrees with the interpreter (issue 14, item 6).

Each configuration's own bytecode (``bytecode/<name>.tileirbc``, the module the benchmarks
compile) is launched at emulator-sized array shapes (``configs.small``: same tile sizes and
constants, shapes that keep the bytecode's divisibility facts) with the same random inputs on
the interpreter and, compiled by our tileiras to PTX for sm_80, sm_90, sm_100 and sm_120, on the
emulator (mma.sync with ldmatrix, wgmma, tcgen05 with tensor memory, sm_120's own path; TMA and
cp.async pipelines, warp-specialized or not).
Every array is compared afterwards (outputs start from random contents, so a stray write or a
missing one shows too). ``configs.ragged`` launches the kernels that define boundary results
at shapes with partial last tiles, so the masked loads and stores run as well.

Default: SAMPLE_NAMES (one configuration per code path) and three ragged launches, on every
target. ``-m sweep``: every configuration and every ragged launch on every target.
"""

from __future__ import annotations

import functools
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
REALISTIC = ROOT / "tests" / "realistic"
sys.path.insert(0, str(REALISTIC))
import configs  # noqa: E402
import derived_bounds  # noqa: E402
import generate  # noqa: E402
from derived_bounds import Derived  # noqa: E402

TARGETS = ("sm_80", "sm_90", "sm_100", "sm_120")
CONFIGS = {c.name: c for c in configs.all_configs()}
# The default sample: one configuration per distinct code path of the tile layer, about a
# minute in all on 2 shared cores (the whole sweep takes about 6 minutes): wgmma (sm_90) and
# ldmatrix+mma.sync (sm_80) f16 matmul, int8 with a 256-wide tile, tf32 rounding, fp8 (sm_89+),
# causal flash attention (P@V from registers), a whole-row norm, multi-row softmax, a chunked
# row reduction, a transpose through shared memory and a 3-D elementwise kernel.
SAMPLE_NAMES = ("mm_f16_128x128x64", "mm_i8_128x256x64", "mm_tf32_64x64x32", "mm_e4m3_64x64x32",
                "fa_f16_q64k64d64_causal", "layernorm_f16_n4096", "softmax_f16_n1024_r4",
                "row_sum_f32_16x512", "transpose_f32_64x64", "rope_bf16_s4h32d128")


def _pairs(names) -> list[tuple[str, str]]:
    return [(n, g) for n in names for g in TARGETS if g in CONFIGS[n].targets]


SAMPLE = _pairs(SAMPLE_NAMES)
FULL = [p for p in _pairs(CONFIGS) if p not in SAMPLE]


def _ids(pairs) -> list[str]:
    return [f"{n}-{g}" for n, g in pairs]


# -- inputs ---------------------------------------------------------------------------------
def _np_dtype(name: str) -> np.dtype:
    import ml_dtypes

    return np.dtype({"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32,
                     "int8": np.int8, "int32": np.int32,
                     "float8_e4m3fn": ml_dtypes.float8_e4m3fn}[name])


def _random(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype in ("int8", "int32"):          # the whole int8 range: int32 sums of 2*TK products stay exact
        return rng.integers(-128, 128, shape).astype(_np_dtype(dtype))
    return rng.standard_normal(shape).astype(_np_dtype(dtype))


def _arguments(config: configs.Config) -> list[np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(config.name.encode()))
    args = []
    for p in config.params:
        if isinstance(p, configs.Arr):
            args.append(_random(rng, p.dtype, p.shape))
        elif isinstance(p, configs.Scalar):
            args.append(np.array(p.value, dtype=_np_dtype(p.dtype)))
    return args


# -- running --------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _module(name: str):
    from tileiras.frontend import load_module

    path = REALISTIC / "bytecode" / f"{name}.tileirbc"
    return load_module(path.read_bytes(), path.name), path.read_bytes()


# launch recipes (tests/realistic/configs.py): tile-multiple shapes, and shapes with partial
# last tiles (masked boundary loads and stores) where the kernel defines a result for them
RECIPES = {"small": configs.small, "ragged": configs.ragged}


def _launch(name: str, recipe: str) -> configs.Config:
    return RECIPES[recipe](CONFIGS[name])


def _run(name: str, recipe: str, backend: str, gpu: str | None = None) -> list[np.ndarray]:
    from tileiras.runtime import run_arrays

    small = _launch(name, recipe)
    module, source = _module(name)
    return run_arrays(module, name, small.grid, _arguments(small), backend=backend, gpu_name=gpu,
                      source=source, filename=f"{name}.tileirbc", check_races=backend == "emulator")


@functools.lru_cache(maxsize=None)
def _interpreted(name: str, recipe: str) -> tuple[np.ndarray, ...]:
    return tuple(_run(name, recipe, "interpreter"))


# -- comparing ------------------------------------------------------------------------------
# Allowed |emulator - interpreter| per element for the kernels without a derived bound (elementwise kernels,
# copies; see `accumulations`), as (rtol, atol_of_max): rtol * |ref| +
# atol_of_max * max|ref| over the array. Both backends accumulate in f32 (i32 for int8) with
# exactly representable products, but in different orders (mma fragments, warp shuffles and
# shared-memory trees against numpy's pairwise sums), and the PTX uses the hardware's
# approximate ex2/rsqrt/rcp (2 ulp of f32) where the interpreter is exact.
TOLERANCE: dict[str, tuple[float, float]] = {
    # integer results (int8 mma with i32 accumulation, copies): exact
    "int32": (0.0, 0.0), "int8": (0.0, 0.0),
    # an f32 sum of n terms in another order differs by about sqrt(n) ulp of the largest partial
    # sum; n <= 2048 (a 1024-wide chunk sum or 2*TK products) gives < 2^-17 of the row's scale
    # (tf32 operands are rounded to tf32 in both before the mma; the match shows the same rounding)
    "float32": (2.0 ** -20, 2.0 ** -17),
    # f32 values that differ in their last bits may round to neighbouring f16 values: one f16 ulp
    # (2^-10 relative); attention's P is rounded to f16 before P@V, where one ulp of a p times
    # |v| <= 4 reaches 2^-11 * 4 of the output scale
    "float16": (2.0 ** -10, 2.0 ** -9),
    # the same with bf16's 8-bit significand: one ulp is 2^-7 relative
    "bfloat16": (2.0 ** -7, 2.0 ** -6),
}
# Measured over the sweep: the largest difference is 0.13 of its allowance (f16 matmul), so a
# wrong element, a lost K step or a misplaced fragment (differences of O(|ref|)) always shows.
# fp8 (e4m3) inputs give f16 outputs: exact here, their products being few-bit.


# The kernels that sum K products (or K values) into an output: their outputs are compared within the bound of
# that K-term accumulation (tests/accumulation.py), not a fixed tolerance. output dtype -> its unit's name
UNIT_NAME = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int32": "s32"}


def accumulations(config: configs.Config, args: list[np.ndarray],
                  gpu: str = "") -> dict[str, tuple[np.ndarray, int, str] | Derived]:
    """Per output of an accumulating kernel (matmul, bmm, split-K, row sum): (the magnitudes its error is
    proportional to, |a| @ |b| or sum |x|, shaped like the output; the number of terms K; the accumulator's unit
    name on `gpu`: fp8 on sm_90 accumulates narrower than f32). Norms, softmax and attention: the bound derived
    from their inputs (tests/derived_bounds.py). The other kernels (elementwise ones, copies) keep TOLERANCE."""
    from accumulation import accumulator

    named = dict(zip([p.name for p in config.params if isinstance(p, (configs.Arr, configs.Scalar))], args))
    f = lambda x: np.abs(x.astype(np.float64))  # noqa: E731
    fp8 = "e4m3" if any(p.dtype == "float8_e4m3fn" for p in config.arrays) else ""
    acc = "s32" if any(p.dtype == "int8" for p in config.arrays) else accumulator("f32", fp8, gpu)
    if config.kernel in ("matmul", "bmm"):
        a, b = f(named["a"]), f(named["b"])
        return {"c": (a @ b, a.shape[-1], acc)}
    if config.kernel == "splitk_matmul":
        a, b = f(named["a"]), f(named["b"])
        split, tk = (configs._const(config, n) for n in ("SPLIT", "TK"))
        mine = (np.arange(a.shape[1]) // tk) % split          # the split each K index is summed in
        mag = np.stack([a[:, mine == s] @ b[mine == s] for s in range(split)])
        return {"partial": (mag, int(max((mine == s).sum() for s in range(split))), acc)}
    if config.kernel == "row_sum":
        x = f(named["x"])
        return {"y": (x.sum(axis=1), x.shape[1], acc)}
    eps = float(named["eps"]) if "eps" in named else 0.0
    if config.kernel in ("layernorm", "layernorm_chunked"):
        return {"y": derived_bounds.layernorm(named["x"], named["w"], named["b"], eps)}
    if config.kernel == "rmsnorm":
        return {"y": derived_bounds.rmsnorm(named["x"], named["w"], eps)}
    if config.kernel == "softmax":
        return {"y": derived_bounds.softmax(named["x"])}
    if config.kernel == "attention_fwd":
        bq, bk, causal = (configs._const(config, n) for n in ("BQ", "BK", "CAUSAL"))
        unit = derived_bounds.OUT_UNIT[next(p.dtype for p in config.arrays if p.name == "v")][0]
        return {"o": derived_bounds.attention(named["q"], named["k"], named["v"], float(named["qk_scale"]), bq, bk,
                                              bool(causal), unit)}
    return {}


def _mismatch(name: str, dtype: str, output: bool, got: np.ndarray, ref: np.ndarray,
              accumulated: tuple[np.ndarray, int, str] | Derived | None = None) -> str | None:
    """None when `got` matches `ref` (an output within the bound of its accumulation, `accumulated` as
    `accumulations` gives it, else within the dtype's tolerance; an input bit for bit, which neither backend
    may write), else a report of the elements that differ."""
    if got.shape != ref.shape:
        return f"{name}: shape {got.shape} != {ref.shape}"
    if not output:
        width = got.dtype.itemsize      # (bytes per element: -1 cannot be inferred for an empty array)
        same = got.view(np.uint8).reshape(*got.shape, width) == ref.view(np.uint8).reshape(*ref.shape, width)
        same = same.all(axis=-1)
        if same.all():
            return None
        return f"{name} (input, {dtype}): {int((~same).sum())} elements overwritten, first at {np.argwhere(~same)[0]}"
    g, r = got.astype(np.float64), ref.astype(np.float64)
    nan_g, nan_r = np.isnan(g), np.isnan(r)
    finite = np.where(np.isfinite(r), np.abs(r), 0.0)
    if isinstance(accumulated, Derived):
        limit = accumulated.apart(finite, dtype)
        allowed = f"the bound derived for {accumulated.what}, up to {float(limit.max()):.3g}"
    elif accumulated is not None and dtype in UNIT_NAME:
        from accumulation import apart

        mag, k, acc = accumulated
        limit = apart(finite, mag, k, acc, UNIT_NAME[dtype])
        allowed = f"the bound of a {k}-term {acc} accumulation, up to {float(limit.max()):.3g}"
    else:
        rtol, atol_max = TOLERANCE[dtype]
        limit = rtol * finite + atol_max * (finite.max() if finite.size else 0.0)
        allowed = f"limit {rtol:g}*|ref| + {atol_max:g}*{finite.max():.3g}"
    with np.errstate(invalid="ignore"):
        bad = (nan_g != nan_r) | (~nan_r & ~(np.abs(g - r) <= limit) & (g != r))
    if not bad.any():
        return None
    where = np.argwhere(bad)
    rows = [f"  [{', '.join(map(str, ix))}] emulator {float(g[tuple(ix)])!r} interpreter {float(r[tuple(ix)])!r}"
            for ix in where[:8]]
    return (f"{name} ({dtype}): {int(bad.sum())} of {bad.size} elements differ "
            f"(max |diff| {np.nanmax(np.abs(g - r)):.3g}, {allowed}); "
            f"first at:\n" + "\n".join(rows))


def _check(name: str, gpu: str, recipe: str = "small") -> None:
    small = _launch(name, recipe)
    ref = _interpreted(name, recipe)
    initial = _arguments(small)
    for p, before, after in zip([p for p in small.params if not isinstance(p, configs.Const)], initial, ref):
        if isinstance(p, configs.Arr) and p.output:     # the launch writes it: the comparison means something
            assert not np.array_equal(before.view(np.uint8), after.view(np.uint8)), f"{name}: {p.name} never written"
    got = _run(name, recipe, "emulator", gpu)
    passed = [p for p in small.params if not isinstance(p, configs.Const)]   # what run_arrays returns
    bounds = accumulations(small, initial, gpu)
    reports = [_mismatch(p.name, p.dtype, p.output, np.asarray(g), np.asarray(r), bounds.get(p.name))
               for p, g, r in zip(passed, got, ref) if isinstance(p, configs.Arr)]
    reports = [r for r in reports if r]
    assert not reports, f"{name} ({recipe}) on {gpu}: emulator and interpreter differ\n" + "\n".join(reports)


def test_small_launches_keep_the_bytecodes_specialization() -> None:
    """The small shapes satisfy every fact the bytecode was specialized with (divisibility of
    dimensions and strides, contiguity), the launch stays inside the arrays, and the grid has
    more than one block where the real one does."""
    for (name, config), recipe in ((c, r) for c in CONFIGS.items() for r in RECIPES.values()):
        small = recipe(config)
        if small is None:
            continue
        assert small.grid and all(g >= 1 for g in small.grid), name
        for real, tiny in zip(config.arrays, small.arrays):
            assert (real.name, real.dtype) == (tiny.name, tiny.dtype)
            assert generate.array_constraint(tiny) == generate.array_constraint(real), (name, real.name)
            assert tiny.nbytes <= 64 << 20, (name, tiny.name, tiny.shape)
        assert [p for p in config.params if not isinstance(p, configs.Arr)] == \
            [p for p in small.params if not isinstance(p, configs.Arr)], name
        assert np.prod(small.grid) > 1, name


@pytest.mark.parametrize("name, steps", [("mm_f16_128x128x64", 8), ("mm_tf32_64x64x32", 16),
                                         ("splitk_f16_128x128x64_s4", 8)])
def test_an_output_one_term_off_is_reported_at_the_launches_k(name: str, steps: int) -> None:
    """A matmul output is compared within the bound of its K-term accumulation (tests/accumulation.py): at the
    K of the mutation launches (steps K tiles a CTA: 512 for the f16 and split-K ones, 16 x 32 for tf32), one
    product of typical size (the median |a_ik b_kj| of that output) left out is reported, while every output
    moved by less than the bound passes; and the bound grows with K."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import mutations

    config = mutations.launch(name, steps)
    args = _arguments(config)
    named = dict(zip([p.name for p in config.params if isinstance(p, configs.Arr)], args))
    out = next(p for p in config.params if isinstance(p, configs.Arr) and p.output)
    a, b = named["a"].astype(np.float64), named["b"].astype(np.float64)
    mag, k, acc = accumulations(config, args)[out.name]
    if name.startswith("splitk"):
        split, tk = configs._const(config, "SPLIT"), configs._const(config, "TK")
        mine = (np.arange(a.shape[1]) // tk) % split
        exact = np.stack([a[:, mine == s] @ b[mine == s] for s in range(split)])
        terms = a[3, mine == 1] * b[mine == 1, 5]
        at = (1, 3, 5)
    else:
        exact = a @ b
        terms = a[3] * b[:, 5]
        at = (3, 5)
    assert k >= 256, k
    ref = exact.astype(np.float32).astype(_np_dtype(out.dtype))
    bound = apart_of(ref, mag, k, acc, out.dtype)
    assert _mismatch(out.name, out.dtype, True, ref, ref, (mag, k, acc)) is None
    near = (exact + 0.5 * bound * np.sign(exact)).astype(np.float32).astype(ref.dtype)
    assert _mismatch(out.name, out.dtype, True, near, ref, (mag, k, acc)) is None
    median = terms[np.argsort(np.abs(terms))[terms.size // 2]]
    wrong = ref.copy()
    wrong[at] = np.float32(exact[at] - median).astype(ref.dtype)
    report = _mismatch(out.name, out.dtype, True, wrong, ref, (mag, k, acc)) or ""
    assert f"[{', '.join(map(str, at))}]" in report and f"{k}-term" in report, report
    assert (apart_of(ref, 2 * mag, 2 * k, acc, out.dtype) > bound).all()


def _layernorm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float, stats: np.ndarray) -> np.ndarray:
    mean = stats.mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(((stats - mean) ** 2).mean(axis=1, keepdims=True) + eps) * w + b


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_a_norm_output_slightly_off_is_reported_within_its_derived_bound() -> None:
    """A layer norm's outputs are compared within the bound derived from its inputs (tests/derived_bounds.py), not
    the fixed f16 tolerance: at the small launch of layernorm_f16_n4096, row 3 normalized with 8 of its elements
    (one 16-byte vector) read as 0 in the mean and variance is reported, which the fixed tolerance (its 2^-9 of
    the largest output) lets pass; outputs moved by less than the bound pass; and the bound grows with N."""
    small = _launch("layernorm_f16_n4096", "small")
    args = _arguments(small)
    x, w, b = (a.astype(np.float64) for a in args[:3])
    eps = float(args[4])
    exact = _layernorm(x, w, b, eps, x)
    ref = exact.astype(np.float16)
    derived = accumulations(small, args)["y"]
    assert isinstance(derived, Derived)
    assert _mismatch("y", "float16", True, ref, ref, derived) is None
    near = (exact + 0.45 * 2 * derived.error * np.sign(exact)).astype(np.float16)
    assert _mismatch("y", "float16", True, near, ref, derived) is None
    stats = x.copy()
    stats[3, 1024:1032] = 0.0
    wrong = ref.copy()
    wrong[3] = _layernorm(x, w, b, eps, stats)[3].astype(np.float16)
    report = _mismatch("y", "float16", True, wrong, ref, derived) or ""
    assert "first at:\n  [3, " in report and "layer norm of 4096-term rows" in report, report
    assert _mismatch("y", "float16", True, wrong, ref) is None       # the fixed tolerance missed it
    wider = derived_bounds.layernorm(np.concatenate([args[0]] * 2, axis=1), np.concatenate([args[1]] * 2),
                                     np.concatenate([args[2]] * 2), eps)
    assert (wider.error[:, :x.shape[1]] > derived.error).all()


def test_a_softmax_output_slightly_off_is_reported_within_its_derived_bound() -> None:
    """A softmax's outputs are compared within the bound derived from its inputs: at the small launch of
    softmax_f16_n1024_r4, the smallest output of row 3 with its exp 1% off (an exp a few bits short) is reported,
    which the fixed f16 tolerance lets pass; outputs moved by less than the bound pass."""
    small = _launch("softmax_f16_n1024_r4", "small")
    args = _arguments(small)
    x = args[0].astype(np.float64)
    exact = _softmax(x)
    ref = exact.astype(np.float16)
    derived = accumulations(small, args)["y"]
    assert isinstance(derived, Derived)
    near = (exact + 0.45 * 2 * derived.error * np.sign(exact)).astype(np.float16)
    assert _mismatch("y", "float16", True, near, ref, derived) is None
    j = int(np.argmin(exact[3]))
    wrong = ref.copy()
    wrong[3, j] = np.float16(exact[3, j] * 1.01)
    report = _mismatch("y", "float16", True, wrong, ref, derived) or ""
    assert f"[3, {j}]" in report and "softmax of 1024-term rows" in report, report
    assert _mismatch("y", "float16", True, wrong, ref) is None


def test_an_attention_output_slightly_off_is_reported_within_its_derived_bound() -> None:
    """An attention's outputs are compared within the bound derived from its inputs: at the mutation launch of
    fa_f16_q64k64d64_causal (8 key blocks, 512 keys), query rows 100 to 500 of head 0 each computed without their
    diagonal key (a causal mask off by one) are reported, which the fixed f16 tolerance lets pass; outputs moved
    by less than the bound pass."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import mutations

    config = mutations.launch("fa_f16_q64k64d64_causal", 8)
    args = _arguments(config)
    q, k, v = (a[0].astype(np.float64) for a in args[:3])
    scale = float(args[4])
    derived = accumulations(config, args)["o"]
    assert isinstance(derived, Derived)

    def row(i: int, last: int) -> np.ndarray:        # query i over keys 0 .. last - 1
        s = q[i] @ k[:last].T * scale
        p = np.exp(s - s.max())
        return p @ v[:last] / p.sum()

    exact = np.stack([row(i, i + 1) for i in range(q.shape[0])])
    ref = args[3].copy()
    ref[0] = exact.astype(np.float16)
    spread = 0.45 * 2 * derived.error[0] * np.sign(exact)
    near = ref.copy()
    near[0] = (exact + spread).astype(np.float16)
    assert _mismatch("o", "float16", True, near, ref, derived) is None
    for i in (100, 200, 300, 400, 500):
        wrong = ref.copy()
        wrong[0, i] = row(i, i).astype(np.float16)
        report = _mismatch("o", "float16", True, wrong, ref, derived) or ""
        assert f"[0, {i}, " in report and "attention over 512 keys" in report, report
        assert _mismatch("o", "float16", True, wrong, ref) is None


def apart_of(ref: np.ndarray, mag: np.ndarray, k: int, acc: str, dtype: str) -> np.ndarray:
    from accumulation import apart

    return apart(np.abs(ref.astype(np.float64)), mag, k, acc, UNIT_NAME[dtype])


def test_the_comparison_reports_wrong_elements_and_stray_writes() -> None:
    """The comparison itself: within tolerance passes; one wrong element, a NaN where the
    interpreter has a number, or one changed bit of an input fails, naming the element."""
    ref = np.random.default_rng(1).standard_normal((64, 128)).astype(np.float16)
    assert _mismatch("y", "float16", True, ref, ref) is None
    near = ref.copy()
    near[3, 5] = np.nextafter(ref[3, 5], np.float16(np.inf))     # one f16 ulp: rounding order
    assert _mismatch("y", "float16", True, near, ref) is None
    wrong = ref.copy()
    wrong[7, 9] += np.float16(0.25)
    assert "[7, 9]" in (_mismatch("y", "float16", True, wrong, ref) or "")
    wrong[7, 9], wrong[1, 2] = ref[7, 9], np.float16(np.nan)
    assert "[1, 2]" in (_mismatch("y", "float16", True, wrong, ref) or "")
    ints = np.arange(64, dtype=np.int32)
    assert _mismatch("c", "int32", True, ints + (ints == 9), ints) is not None   # integers: exact
    stray = ref.copy()
    stray.view(np.uint16)[10, 11] ^= 1
    assert "overwritten" in (_mismatch("x", "float16", False, stray, ref) or "")


@pytest.mark.parametrize("name,gpu", SAMPLE, ids=_ids(SAMPLE))
def test_emulator_matches_interpreter(name: str, gpu: str) -> None:
    _check(name, gpu)


@pytest.mark.sweep
@pytest.mark.parametrize("name,gpu", FULL, ids=_ids(FULL))
def test_emulator_matches_interpreter_sweep(name: str, gpu: str) -> None:
    _check(name, gpu)


RAGGED_SAMPLE = _pairs(("mm_f16_128x128x64", "transpose_f16_64x128", "row_max_f16_32x256"))
RAGGED_FULL = [p for p in _pairs(n for n, c in CONFIGS.items() if configs.ragged(c)) if p not in RAGGED_SAMPLE]


@pytest.mark.parametrize("name,gpu", RAGGED_SAMPLE, ids=_ids(RAGGED_SAMPLE))
def test_emulator_matches_interpreter_on_partial_tiles(name: str, gpu: str) -> None:
    _check(name, gpu, "ragged")


@pytest.mark.sweep
@pytest.mark.parametrize("name,gpu", RAGGED_FULL, ids=_ids(RAGGED_FULL))
def test_emulator_matches_interpreter_on_partial_tiles_sweep(name: str, gpu: str) -> None:
    _check(name, gpu, "ragged")
