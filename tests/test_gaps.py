"""benchmarks/gaps.py: each "done when" check names exactly the pairs where NVIDIA's has what ours lacks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import gaps  # noqa: E402


def _stats(**over) -> dict:
    base = {"spills": 0, "tensor_core": {}, "ldgsts": 0, "tma": {}, "mbarrier": 0, "ldmatrix": 0,
            "setmaxnreg": False, "global_loads": {"128": 4}, "global_stores": {"128": 2}}
    return {**base, **over}


def _row(name: str, gpu: str, ours: dict, nvidia: dict) -> dict:
    return {"name": name, "gpu": gpu, "ours": {"ok": True, "stats": ours}, "nvidia": {"ok": True, "stats": nvidia}}


def _counts(lines: list[str]) -> dict[str, int]:
    return {line.split(":")[0].strip(): int(line.split(":")[1].split("(")[0])
            for line in lines[1:] if line.startswith("  ") and not line.startswith("    ")}


def test_each_check_fires_on_its_own_gap_only(tmp_path: Path) -> None:
    rows = [
        _row("same", "sm_90", _stats(tensor_core={"HGMMA": 8}, tma={"UTMALDG": 2}, setmaxnreg=True),
             _stats(tensor_core={"HGMMA": 8}, tma={"UTMALDG": 2}, setmaxnreg=True)),
        _row("spill", "sm_80", _stats(spills=12), _stats()),
        _row("narrow", "sm_80", _stats(global_loads={"32": 64}, global_stores={"16": 8}), _stats()),
        _row("tma", "sm_90", _stats(global_loads={}, tma={"UTMALDG": 1}), _stats()),   # TMA counts as 128
        # ... in its own direction: NVIDIA's TMA loads (an async-copy gap) say nothing of its 16-bit stores of a
        # row max (no store-width gap)
        _row("rowmax", "sm_90", _stats(global_stores={"16": 1}),
             _stats(global_loads={}, global_stores={"16": 4}, tma={"UTMALDG": 16})),
        _row("cpasync", "sm_80", _stats(global_loads={}, ldgsts=8, ldgsts_widths={"128": 8}), _stats()),
        _row("noldsm", "sm_80", _stats(tensor_core={"HMMA": 16}, ldgsts=4), _stats(tensor_core={"HMMA": 16},
                                                                                   ldgsts=4, ldmatrix=8)),
        _row("gen", "sm_100", _stats(tensor_core={"HMMA": 64}, tma={"UTMALDG": 1}),
             _stats(tensor_core={"UTCMMA": 4}, tma={"UTMALDG": 1})),
        _row("sync", "sm_90", _stats(), _stats(mbarrier=3, setmaxnreg=True)),
        _row("pair", "sm_100", _stats(tensor_core={"UTCMMA": 4}, tensor_shapes={"UTCHMMA": 4}, tma={"UTMALDG": 1}),
             _stats(tensor_core={"UTCMMA": 4}, tensor_shapes={"UTCHMMA.2CTA": 4}, tma={"UTMALDG": 1})),
        {"name": "failed", "gpu": "sm_90", "ours": {"ok": False}, "nvidia": {"ok": True, "stats": _stats()}},
    ]
    lines = gaps.gaps(rows)
    assert lines[0].startswith("gaps vs NVIDIA's over 10 pairs")
    assert _counts(lines) == {"spills": 1, "load width": 1, "store width": 1, "ldmatrix": 1, "tensor cores": 1,
                              "CTA pairs": 1, "async copies": 2, "setmaxnreg, tensor-core kernels": 0,
                              "setmaxnreg, other kernels": 1}
    text = "\n".join(lines)
    for expected in ("spill sm_80: 12 spill", "narrow sm_80: 32|128 bits", "narrow sm_80: 16|128 bits",
                     "noldsm sm_80: LDSM 0", "gen sm_100: mma.sync|tcgen05", "sync sm_90: none",
                     "sync sm_90: no setmaxnreg", "pair sm_100: one CTA"):
        assert expected in text, expected
    named = {line.split()[0] for line in lines if line.startswith("    ")}
    assert named == {"spill", "narrow", "noldsm", "gen", "sync", "pair", "rowmax"}
    saved = tmp_path / "rows.json"
    saved.write_text(json.dumps(rows))
    assert gaps.main([str(saved)]) == 0
    assert gaps.main([str(tmp_path / "missing.json")]) == 1
