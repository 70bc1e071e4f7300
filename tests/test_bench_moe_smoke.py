"""bench_moe.py end to end on the CPU interpreter (tiny dims: the script, not the hardware): every
section reports, each GEMM row names its case, and the Markdown carries the tables."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_moe_reports_every_section(tmp_path):
    # a recorded routing over the smoke model's 8 experts: two full steps (8 rows) and a smaller one
    steps = [[4, 0, 1, 0, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1, 1], [2, 0, 0, 0, 0, 0, 0, 0]]
    records = [{"layer": 0, "step": i, "counts": c} for i, c in enumerate(steps)]
    (tmp_path / "routing.json").write_text(json.dumps({"records": records}))
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / "bench_moe.py"),
        "--smoke",
        "--out",
        str(tmp_path),
        "--repeats",
        "2",
        "--routing",
        str(tmp_path / "routing.json"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads((tmp_path / "bench_moe.json").read_text())
    assert res["errors"] == {}
    s = res["sections"]
    assert s["copy"]["bytes"] == 2 * 4 * (1 << 16)  # the smoke copy: 2^16 fp32 read and written
    for proj in ("gate_up", "down"):
        equal, checked = map(int, s["correctness"][proj]["rows_alone_bit_equal"].split("/"))
        assert equal == checked > 0
    cases = {(r["proj"], r["case"]) for r in s["gemm"]["rows"]}
    assert ("gate_up", "grouped_mm") in cases and any(c.startswith("triton") for _, c in cases)
    assert all(len(r["us_range"]) == 2 for r in s["gemm"]["rows"])
    # the recording's full steps only: the one with the most row blocks per expert, and the median
    routings = {r["routing"] for r in s["gemm"]["rows"]}
    assert routings == {"uniform", "worst: layer 0 step 0", "median: layer 0 step 1"}
    assert s["layer"]["rows"][0]["max_abs_diff"] < 1e-6
    md = (tmp_path / "bench_moe.md").read_text()
    assert "| B | routing | proj | case |" in md and "layer step" in md
