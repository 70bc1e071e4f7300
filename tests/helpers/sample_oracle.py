"""Independent counts from a run directory's samples.jsonl, for tests that check what the
summaries, tables and paired reports say against the samples themselves (scipy and statsmodels
compute the tests; nothing of evalkit's stats or compare code is used)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

Cell = tuple[str, int]


def lines(run: Path) -> list[str]:
    """The run's samples.jsonl lines, or those of its committed compressed form (gzip's own reader)."""
    if (run / "samples.jsonl.gz").exists():
        text = gzip.decompress((run / "samples.jsonl.gz").read_bytes()).decode("utf-8")
    else:
        text = (run / "samples.jsonl").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()]


def samples(run: Path) -> dict[Cell, dict[int, dict]]:
    """(task, length) -> doc_id -> sample."""
    out: dict[Cell, dict[int, dict]] = defaultdict(dict)
    for line in lines(run):
        r = json.loads(line)
        out[(r["task"], r["length"])][r["doc_id"]] = r
    return out


def cell_counts(run: Path) -> dict[Cell, dict[str, float]]:
    """(task, length) -> n, exact match (every metric right), mean item score and median
    generated tokens (the upper median, as the model card's table takes it)."""
    out = {}
    for cell, docs in samples(run).items():
        rs = list(docs.values())
        gen = sorted(r.get("n_generated") or 0 for r in rs)
        out[cell] = {
            "n": len(rs),
            "em": sum(all(r["correct"].values()) for r in rs) / len(rs),
            "score": sum(next(iter(r["score"].values())) for r in rs) / len(rs),
            "gen": gen[len(gen) // 2],
        }
    return out


def paired(baseline: Path, candidate: Path) -> dict[Cell, dict[str, float]]:
    """(task, length) -> n, baseline accuracy, difference, discordant counts and the two-sided
    McNemar mid-p (scipy's binomial), plus its Holm adjustment across the cells (statsmodels)."""
    from scipy.stats import binom
    from statsmodels.stats.multitest import multipletests

    a, b = samples(baseline), samples(candidate)
    out = {}
    for cell in sorted(a):
        docs = sorted(set(a[cell]) & set(b.get(cell, {})))
        right_a = [all(a[cell][d]["correct"].values()) for d in docs]
        right_b = [all(b[cell][d]["correct"].values()) for d in docs]
        only_a = sum(x and not y for x, y in zip(right_a, right_b))
        only_b = sum(y and not x for x, y in zip(right_a, right_b))
        # mid-p: outcomes further from m/2 than the observed one, plus half of those as far
        # (Fagerland, Lydersen & Laake 2013; at b = c that is 1 - P[X = b] / 2)
        m = only_a + only_b
        x = np.arange(m + 1)
        far, seen = np.abs(x - m / 2), abs(only_a - m / 2)
        pmf = binom.pmf(x, m, 0.5)
        midp = 1.0 if m == 0 else float(pmf[far > seen].sum() + 0.5 * pmf[far == seen].sum())
        out[cell] = {
            "n": len(docs),
            "acc_baseline": sum(right_a) / len(docs),
            "diff": (only_b - only_a) / len(docs),
            "baseline_only": only_a,
            "candidate_only": only_b,
            "mcnemar_midp": midp,
        }
    cells = list(out)
    holm = multipletests([out[c]["mcnemar_midp"] for c in cells], method="holm")[1]
    for c, p in zip(cells, holm):
        out[c]["mcnemar_midp_holm"] = float(p)
    return out
