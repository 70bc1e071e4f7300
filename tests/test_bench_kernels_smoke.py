"""bench_kernels.py's decode sweep end to end on the CPU interpreter (tiny shapes: the script, not the
hardware): the persistent builds are swept, every build is timed once per interleaved round, and the
report carries each build's repeats."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_persist_sweep_times_every_build_once_per_round(tmp_path):
    cmd = [sys.executable, str(ROOT / "scripts" / "bench_kernels.py"), "--smoke", "--out", str(tmp_path),
           "--skip", "correctness,decode,prefill,twin,prefill_detail", "--sweep", "persist",
           "--sweep-repeats", "2", "--sweep-budget-s", "600"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sections = json.loads((tmp_path / "bench_kernels.json").read_text())["sections"]
    assert sections["copy"]["bytes"] == 2 * 4 * (1 << 20)  # the smoke copy: 2^20 fp32 read and written
    sweep = sections["decode_sweep"]
    assert sweep["set"] == "persist" and sweep["repeats"] == 2 and "stopped" not in sweep
    tiles = {r["tile"] for r in sweep["rows"]}
    assert any("persist" in t for t in tiles) and any("persist" not in t for t in tiles)
    assert all(len(r["graph_us_all"]) == 2 and "error" not in r for r in sweep["rows"])
    md = (tmp_path / "bench_kernels.md").read_text()
    assert "median of 2 interleaved rounds" in md
