"""One-off (device): scripts/bench_engine.py with a decode step's dummy rows routed to no expert (the
code as committed: `ForwardBatch.real_rows`) or, "before", routed like real rows (the MoE called
without the mask, as the code before it did), so both can alternate on one machine.

    python3 results/bench/moe-routing/ab.py before|after <bench_engine.py arguments>"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import bench_engine  # noqa: E402
from evalkit.model.layers.moe import MoE  # noqa: E402

variant = sys.argv[1]
if variant not in ("before", "after"):
    sys.exit("usage: ab.py before|after <bench_engine.py arguments>")
if variant == "before":
    masked = MoE.forward
    MoE.forward = lambda self, x, n_routed=None, decode=False, real_rows=None: masked(self, x, n_routed, decode)
sys.argv = [bench_engine.__file__, *sys.argv[2:]]
sys.exit(bench_engine.main())
