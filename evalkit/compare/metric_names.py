"""Align metric names across the two sides of a comparison.

lm-eval names a per-question metric by its filter when a task has one metric
(`flexible-extract`), while evalkit runs and lm-eval's own results use `metric,filter`
(`exact_match,flexible-extract`). A short name on one side pairs with the one long name on the
other side whose filter part it is; the row takes the long name.
"""

from __future__ import annotations


def _aliases(short_side: set[str], long_side: set[str]) -> dict[str, str]:
    out = {}
    for name in short_side - long_side:
        if "," in name:
            continue
        matches = [m for m in long_side - short_side if m.split(",", 1)[-1] == name and "," in m]
        if len(matches) == 1:
            out[name] = matches[0]
    return out


def align_metric_names(base: set[str], cand: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(baseline name -> row name, candidate name -> row name) for every name of each side."""
    base_map = {name: name for name in base} | _aliases(base, cand)
    cand_map = {name: name for name in cand} | _aliases(cand, base)
    return base_map, cand_map
