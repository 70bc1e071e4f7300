#!/usr/bin/env python3
"""Per task x length x arm: exact match (all items right) and the mean fraction of items right,
with the median generated tokens, from sweep run directories (the model card's table is this
script's output, not a transcription).

    python scripts/refmodel_cell_table.py SWEEP_DIR... [--arms fp32,fp16,bf16,m5,m4,m3]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from evalkit.store import samples_path
from evalkit.store.jsonl import iter_jsonl


def cell_stats(run: Path) -> dict[tuple[str, int], dict[str, float]]:
    """(task, length) -> n, exact match and mean item score as the run's summary.json has them (its
    first metric), plus the median generated tokens, which only the samples record."""
    summary = json.loads((run / "summary.json").read_text())
    generated: dict[tuple[str, int], list[int]] = defaultdict(list)
    for _, r in iter_jsonl(samples_path(run)):  # samples.jsonl, or its committed .gz
        generated[(r["task"], r["length"])].append(r.get("n_generated") or 0)
    out = {}
    for task, metrics in summary.items():
        cells = next(iter(metrics.values()))
        for length, c in cells.items():
            if length == "all":
                continue
            gen = sorted(generated[(task, int(length))])
            out[(task, int(length))] = {
                "n": c["n"],
                "em": c["accuracy"],
                "score": c.get("mean_score", c["accuracy"]),
                "gen": gen[len(gen) // 2],
            }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweeps", nargs="+", type=Path)
    p.add_argument("--arms", default="fp32,fp16,bf16,m5,m4,m3")
    args = p.parse_args()
    arms = args.arms.split(",")
    print("| task | length | n | generated tokens (median) | " + " | ".join(f"`{a}`" for a in arms) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(arms))
    for sweep in args.sweeps:
        stats = {a: cell_stats(sweep / a) for a in arms if (sweep / a / "summary.json").is_file()}
        for key in sorted(stats["fp32"]):
            base = stats["fp32"][key]
            row = [key[0], str(key[1]), str(base["n"]), str(base["gen"])]
            for a in arms:
                c = stats.get(a, {}).get(key)
                row.append("–" if c is None else f"{100 * c['em']:.0f} / {100 * c['score']:.0f}")
            print("| " + " | ".join(row) + " |")
    print(
        "\nEach arm: exact match % (every item right; what McNemar pairs) / mean % of items right; "
        "'–': the arm did not finish in that call."
    )


if __name__ == "__main__":
    main()
