"""bench_moe.py end to end on the CPU interpreter (tiny dims: the script, not the hardware): every
section reports, each GEMM row names its case, and the Markdown carries the tables."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_moe_reports_every_section(tmp_path):
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / "bench_moe.py"),
        "--smoke",
        "--out",
        str(tmp_path),
        "--repeats",
        "2",
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
    assert s["layer"]["rows"][0]["max_abs_diff"] < 1e-6
    md = (tmp_path / "bench_moe.md").read_text()
    assert "| B | proj | case |" in md and "layer step" in md
