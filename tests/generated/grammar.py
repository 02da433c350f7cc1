"""The grammar of realistic kernel variants: one table per kernel template (its axes and the
values real kernels use), one table of rules that exclude what no real kernel does, and a
seeded sampler.

    sample(seed=0, count=50)   -> [Variant, ...]   (the same list for the same seed, and a prefix
                                                     of the list for a larger count)

A Variant's name encodes every choice (``gemm-f16-rc-128x128x64-zero-tiles-bias-aligned-h0-v13.4``),
so a name read from a report is enough to rebuild it (``parse``). The axes every template shares
say how the arrays are specialized (``facts``: cuTile's launcher facts of aligned shapes, facts of
ragged shapes, or none), which optimization hints the kernel passes (``hints``) and which bytecode
version it is exported at (``version``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

VERSIONS: tuple[str, ...] = ("13.1", "13.2", "13.3", "13.4")   # what cuTile 1.7 exports
FACTS: tuple[str, ...] = ("aligned", "ragged", "none")
# cuTile's kernel hints as real launchers pass them (TileGym: occupancy, num_ctas by target;
# load latency; worker warps for register-heavy row kernels)
HINTS: dict[str, dict[str, Any]] = {
    "h0": {},
    "occ2": {"occupancy": 2},
    "ctas2": {"num_ctas": 2},
    "lat3": {"latency": 3},              # passed to the kernel's loads (ct.load latency=)
    "ww8": {"num_worker_warps": 8},
}


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[Any, ...]
    fmt: str = "{}"                      # how a value reads in the variant's name


@dataclass(frozen=True)
class Template:
    name: str                            # a kernel template of kernels.py
    family: str                          # the report's family: matmul, attention, row, elementwise
    axes: tuple[Axis, ...]
    layout: str = ""                     # how axis tokens join in the name: "{dtype}-{tm}x{tn}..." (default: "-")
    weight: int = 1                      # relative frequency in a sample


@dataclass(frozen=True)
class Rule:
    """Excludes the variants of `templates` for which `when` holds, because `why`."""
    templates: tuple[str, ...]
    why: str
    when: Callable[[dict[str, Any]], bool]


def _common() -> tuple[Axis, ...]:
    return (Axis("facts", FACTS), Axis("hints", tuple(HINTS)), Axis("version", VERSIONS, "v{}"))


POW2_16_256 = (16, 32, 64, 128, 256)
FLOAT = ("f16", "bf16", "f32")
ROW_COLS = (1024, 2048, 4096, 8192, 16384, 32768)

TEMPLATES: dict[str, Template] = {t.name: t for t in (
    # ---- matmul family: C = epilogue(A @ B), operands row- or column-major
    Template("gemm", "matmul", (
        Axis("dtype", ("f16", "bf16", "tf32", "f32", "e4m3", "i8", "mxfp8", "nvfp4")),
        Axis("major", ("rr", "rc", "cr", "cc")),           # A's and B's storage: r = K last in A / N last in B
        Axis("tm", POW2_16_256), Axis("tn", POW2_16_256), Axis("tk", (16, 32, 64, 128)),
        Axis("padding", ("zero", "undef")),
        Axis("schedule", ("tiles", "persistent", "splitk", "splitr")),   # splitr: split-K over contiguous ranges
        Axis("epilogue", ("none", "bias", "relu", "gelu", "scale", "residual", "alphabeta", "cast", "subtile")),
        *_common()), "{dtype}-{major}-{tm}x{tn}x{tk}-{padding}-{schedule}-{epilogue}", weight=6),
    Template("bmm", "matmul", (
        Axis("dtype", ("f16", "bf16", "tf32", "e4m3")), Axis("major", ("rr", "rc")),
        Axis("tm", (64, 128, 256)), Axis("tn", (64, 128, 256)), Axis("tk", (32, 64, 128)),
        Axis("epilogue", ("none", "scale", "cast")), *_common()),
        "{dtype}-{major}-{tm}x{tn}x{tk}-{epilogue}", weight=2),
    Template("group_gemm", "matmul", (
        Axis("dtype", ("f16", "bf16")), Axis("major", ("rr", "rc")), Axis("groups", (2, 4)),
        Axis("tm", (64, 128)), Axis("tn", (64, 128, 256)), Axis("tk", (32, 64)), *_common()),
        "{dtype}-{major}-g{groups}-{tm}x{tn}x{tk}", weight=1),
    # ---- attention family: flash attention forward / decode / MLA decode / backward (dQ)
    Template("attn_fwd", "attention", (
        Axis("dtype", ("f16", "bf16", "e4m3")), Axis("d", (64, 128, 256), "d{}"),
        Axis("mask", ("full", "causal", "window")), Axis("gqa", (1, 4, 8), "g{}"),
        Axis("bq", (64, 128)), Axis("bk", (32, 64, 128)), *_common()),
        "{dtype}-{d}-{mask}-{gqa}-{bq}x{bk}", weight=4),
    Template("attn_decode", "attention", (
        Axis("dtype", ("f16", "bf16")), Axis("d", (64, 128, 256), "d{}"), Axis("gqa", (1, 4, 8, 16), "g{}"),
        Axis("bk", (32, 64, 128)), Axis("mask", ("full", "window")), *_common()),
        "{dtype}-{d}-{gqa}-{bk}-{mask}", weight=2),
    Template("mla_decode", "attention", (
        Axis("dtype", ("f16", "bf16")), Axis("heads", (16, 32, 64), "h{}"), Axis("bk", (32, 64)), *_common()),
        "{dtype}-{heads}-{bk}", weight=1),
    Template("attn_bwd_dq", "attention", (
        Axis("dtype", ("f16", "bf16")), Axis("d", (64, 128), "d{}"), Axis("mask", ("full", "causal")),
        Axis("bq", (64, 128)), Axis("bk", (32, 64)), *_common()),
        "{dtype}-{d}-{mask}-{bq}x{bk}", weight=1),
    # ---- row kernels: whole rows or chunks of them, several rows per CTA, persistent or not
    Template("row", "row", (
        Axis("op", ("layernorm", "rmsnorm", "softmax", "logsumexp", "sum", "max", "cumsum", "cross_entropy")),
        Axis("dtype", FLOAT), Axis("cols", ROW_COLS, "n{}"), Axis("rows", (1, 2, 4, 8), "r{}"),
        Axis("chunk", (0, 1024, 4096), "c{}"),              # 0: the whole row in one tile
        Axis("persistent", ("grid", "persist")), *_common()),
        "{op}-{dtype}-{cols}-{rows}-{chunk}-{persistent}", weight=5),
    Template("rope", "row", (
        Axis("dtype", ("f16", "bf16", "f32")), Axis("d", (64, 128), "d{}"), Axis("heads", (8, 32), "h{}"),
        Axis("positions", (1, 4, 16), "s{}"), *_common()),
        "{dtype}-{d}-{heads}-{positions}", weight=1),
    # ---- elementwise, gather/scatter, MoE routing
    Template("eltwise", "elementwise", (
        Axis("op", ("add", "swiglu", "gelu_bias", "scale_cast")), Axis("dtype", FLOAT),
        Axis("tile", ((1024,), (4096,), (16, 256), (64, 128), (8, 1024)), "t{}"), *_common()),
        "{op}-{dtype}-{tile}", weight=2),
    Template("gather", "elementwise", (
        Axis("op", ("embedding", "index_add", "scatter_rows")), Axis("dtype", ("f16", "bf16", "f32")),
        Axis("rows", (8, 32, 64), "r{}"), Axis("cols", (128, 512, 2048), "n{}"), *_common()),
        "{op}-{dtype}-{rows}-{cols}", weight=2),
    Template("moe_route", "elementwise", (
        Axis("experts", (8, 16, 64, 128), "e{}"), Axis("topk", (1, 2, 4, 8), "k{}"),
        Axis("tokens", (16, 64), "t{}"), Axis("dtype", ("f16", "bf16", "f32")), *_common()),
        "{dtype}-{experts}-{topk}-{tokens}", weight=1),
)}

_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "e4m3": 8, "i8": 8, "mxfp8": 8, "nvfp4": 4}
_BLOCK_SCALED = ("mxfp8", "nvfp4")


def _gemm_smem(c: dict) -> int:
    """Bytes of one stage of A and B tiles."""
    return (c["tm"] + c["tn"]) * c["tk"] * _BITS[c["dtype"]] // 8


# Every rule says why a real kernel would not be written so; a sample never holds a variant a rule
# excludes (tests/test_generated.py checks the table, not each if).
RULES: tuple[Rule, ...] = (
    Rule(("gemm", "bmm", "group_gemm"), "a K tile narrower than one tensor-core K step (32 bytes)",
         lambda c: c["tk"] * _BITS[c["dtype"]] < 256),
    Rule(("gemm", "bmm", "group_gemm"), "one stage of operand tiles over 64 KiB: no pipeline fits",
         lambda c: _gemm_smem(c) > 64 * 1024),
    Rule(("gemm", "bmm", "group_gemm"), "an accumulator over 128x256 f32 (more than the register file of 2 warpgroups)",
         lambda c: c["tm"] * c["tn"] > 128 * 256),
    Rule(("gemm",), "an output tile under 32x64: no one tiles a GEMM so thin in both dimensions",
         lambda c: c["tm"] * c["tn"] < 32 * 64),
    Rule(("gemm",), "block-scaled operands are K-major with 2-D scales, tiles of at least 64, one tile per CTA "
         "and zero padding (cuTile's mma_scaled sample)",
         lambda c: c["dtype"] in _BLOCK_SCALED and (c["major"] != "rr" or min(c["tm"], c["tn"]) < 64
                                                      or c["tk"] < 64 or c["schedule"] != "tiles"
                                                      or c["padding"] != "zero")),
    Rule(("gemm",), "mma_scaled needs bytecode 13.3 or later",
         lambda c: c["dtype"] in _BLOCK_SCALED and c["version"] < "13.3"),
    Rule(("gemm",), "integer and block-scaled epilogues keep to scale/cast (no activation on raw sums)",
         lambda c: c["dtype"] in ("i8", *_BLOCK_SCALED) and c["epilogue"] not in ("none", "scale", "cast")),
    Rule(("gemm",), "split-K adds f32 partials with atomics: the epilogue runs in a second kernel",
         lambda c: c["schedule"] in ("splitk", "splitr") and c["epilogue"] != "none"),
    Rule(("gemm", "bmm", "group_gemm"), "a ragged K needs zero padding for a correct sum",
         lambda c: c["facts"] == "ragged" and c.get("padding", "zero") != "zero"),
    Rule(("gemm",), "a sub-tiled store splits a wide N tile",
         lambda c: c["epilogue"] == "subtile" and c["tn"] < 64),
    Rule(("attn_fwd",), "fp8 attention is a forward kernel without GQA at head dims up to 128",
         lambda c: c["dtype"] == "e4m3" and (c["gqa"] != 1 or c["d"] > 128)),
    Rule(("attn_fwd", "attn_bwd_dq"), "Q, K and V tiles over 96 KiB",
         lambda c: (c["bq"] + 2 * c["bk"]) * c["d"] * 2 > 96 * 1024),
    Rule(("attn_fwd", "attn_bwd_dq"), "a K block longer than the Q block on a causal diagonal",
         lambda c: c["mask"] != "full" and c["bk"] > c["bq"]),
    Rule(("attn_decode",), "a decode KV block of 128 at head dim 256 (over the register file)",
         lambda c: c["d"] == 256 and c["bk"] == 128),
    Rule(("row",), "a whole-row tile over 16K f32 elements (register file of one CTA)",
         lambda c: c["chunk"] == 0 and c["rows"] * c["cols"] > 16384),
    Rule(("row",), "a chunk as wide as the row is the whole-row kernel",
         lambda c: c["chunk"] >= c["cols"]),
    Rule(("row",), "chunks of several rows over 16K elements",
         lambda c: c["chunk"] and c["rows"] * c["chunk"] > 16384),
    Rule(("row",), "cross-entropy reads one row of logits per CTA",
         lambda c: c["op"] == "cross_entropy" and c["rows"] != 1),
    Rule(("row", "rope", "eltwise", "gather", "moe_route"), "a CGA hint on a kernel without tensor cores "
         "(num_ctas=2 is a GEMM cluster)",
         lambda c: c["hints"] == "ctas2"),
    Rule(("gemm", "bmm", "group_gemm", "attn_fwd", "attn_decode", "mla_decode", "attn_bwd_dq"),
         "worker-warp counts are set by row kernels with large tiles", lambda c: c["hints"] == "ww8"),
    Rule(("eltwise", "gather", "moe_route", "rope"), "no load latency hint without a loop to pipeline",
         lambda c: c["hints"] == "lat3"),
    Rule(tuple(TEMPLATES), "num_worker_warps other than 4 and 8 needs bytecode 13.3+",
         lambda c: c["hints"] == "ww8" and c["version"] < "13.3"),
    Rule(("moe_route",), "top-k of more experts than exist, or of many with few experts",
         lambda c: c["topk"] * 2 > c["experts"]),
)


@dataclass(frozen=True)
class Variant:
    template: str
    choices: tuple[tuple[str, Any], ...]       # (axis, value) in the template's axis order

    @property
    def family(self) -> str:
        return TEMPLATES[self.template].family

    @property
    def c(self) -> dict[str, Any]:
        return dict(self.choices)

    def __getitem__(self, axis: str) -> Any:
        return self.c[axis]

    @property
    def name(self) -> str:
        """Stable, readable and a valid kernel symbol: every choice, in the template's order."""
        return "g_" + _name_body(self.template, self.c)

    @property
    def hints(self) -> dict[str, Any]:
        return HINTS[self["hints"]]


def _token(axis: Axis, value: Any) -> str:
    text = axis.fmt.format("x".join(map(str, value)) if isinstance(value, tuple) else value)
    return text.replace(".", "p").replace("-", "m")


def _name_body(template: str, c: dict[str, Any]) -> str:
    t = TEMPLATES[template]
    tokens = {a.name: _token(a, c[a.name]) for a in t.axes}
    core = t.layout.format(**tokens) if t.layout else "-".join(tokens[a.name] for a in t.axes[:-3])
    return "_".join([template, core.replace("-", "_"), tokens["facts"], tokens["hints"], tokens["version"]])


def excluded_by(template: str, choices: dict[str, Any]) -> list[Rule]:
    """The rules that exclude this combination (empty: a valid variant)."""
    return [r for r in RULES if template in r.templates and r.when(choices)]


Restrict = dict[str, tuple[Any, ...]]     # axis -> the only values to draw (e.g. {"version": ("13.4",)})


def _draw(rng: random.Random, template: Template, restrict: Restrict) -> dict[str, Any]:
    return {a.name: rng.choice([x for x in a.values if x in restrict.get(a.name, a.values)] or a.values)
            for a in template.axes}


def variant(rng: random.Random, template: str, restrict: Restrict | None = None, tries: int = 5000) -> Variant:
    """A valid variant of `template` drawn from `rng`. The template's first axis (the dtype or op) is
    drawn once and kept while the other axes are redrawn until RULES accept them: plain rejection
    would make a value the rules constrain (block-scaled dtypes, fp8 attention) rare."""
    t = TEMPLATES[template]
    for _ in range(20):
        first = _draw(rng, t, restrict or {})
        lead = {t.axes[0].name: first[t.axes[0].name]}
        for _ in range(tries):
            choices = {**_draw(rng, t, restrict or {}), **lead}
            if not excluded_by(template, choices):
                return Variant(template, tuple(choices.items()))
    raise ValueError(f"no valid {template} variant in {tries} draws: the rules exclude everything")


def sample(seed: int, count: int, templates: tuple[str, ...] | None = None,
           restrict: Restrict | None = None) -> list[Variant]:
    """`count` distinct valid variants. Variant i depends only on (seed, i): a larger count extends
    a smaller one. Templates are drawn by weight, so every family appears in any sample of a dozen."""
    names = templates or tuple(TEMPLATES)
    weights = [TEMPLATES[n].weight for n in names]
    out: list[Variant] = []
    seen: set[str] = set()
    i = 0
    while len(out) < count:
        rng = random.Random(f"{seed}:{i}")
        # the first len(names) draws visit each template once, so a small sample covers all
        template = names[i] if i < len(names) else rng.choices(names, weights)[0]
        i += 1
        v = variant(rng, template, restrict)
        if v.name not in seen:
            seen.add(v.name)
            out.append(v)
    return out


def parse(name: str) -> Variant:
    """The Variant a name was made from (names are unique per choice: searched, not parsed)."""
    body = name.removeprefix("g_")
    template = next(t for t in sorted(TEMPLATES, key=len, reverse=True) if body.startswith(t + "_"))
    t = TEMPLATES[template]
    # every axis keeps the values whose token occurs in the name; the few combinations left are tried
    candidates: list[dict[str, Any]] = [{}]
    for axis in t.axes:
        candidates = [{**c, axis.name: v} for c in candidates for v in axis.values if _token(axis, v) in body]
    for c in candidates:
        if _name_body(template, c) == body:
            return Variant(template, tuple(c.items()))
    raise KeyError(name)
