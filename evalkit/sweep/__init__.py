"""`evalkit sweep`: several arms on the same questions with one loaded model, and what separates them.

`run` runs each arm into `DIR/<arm label>/` (a normal, resumable run directory); `cells` pairs every
arm with the fp32 baseline per task x length (accuracy tests through `evalkit.compare`, plus the
paired gold log-probability summaries); `margin` finds the bits of margin; `report` and `plot`
write `sweep.json`, `sweep.md` and `sweep.png`.
"""

from evalkit.sweep.runner import SweepSpec, run_sweep, summarize_sweep

__all__ = ["SweepSpec", "run_sweep", "summarize_sweep"]
