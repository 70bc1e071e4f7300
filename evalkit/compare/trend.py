"""Length trends for tasks evaluated at several context lengths.

Per task x metric with two or more lengths: the question-clustered logistic model
`correct ~ arm * log2(len)` (the arm:log_len term: how the candidate's log-odds gap changes
per doubling), the conditional logistic model on discordant pairs, and Cochran-Armitage on the
per-length discordance rate with log2(length) scores.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from evalkit import stats as st
from evalkit.compare.pairing import Pair, RowKey


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def length_trends(rows: dict[RowKey, list[Pair]]) -> list[dict[str, Any]]:
    grouped: dict[tuple[str, str], dict[int, list[Pair]]] = defaultdict(dict)
    for (task, metric, length), pairs in rows.items():
        if length is not None:
            grouped[(task, metric)][length] = pairs
    out = []
    for (task, metric), by_len in grouped.items():
        if len(by_len) < 2:
            continue
        lengths = sorted(by_len)
        y, arm, ln, cl = [], [], [], []
        disc_y, disc_len, disc_cl = [], [], []
        succ, tot = [], []
        for length in lengths:
            pairs = by_len[length]
            succ.append(sum(p.baseline != p.candidate for p in pairs))
            tot.append(len(pairs))
            for p in pairs:
                y += [float(p.baseline), float(p.candidate)]
                arm += [0, 1]
                ln += [length, length]
                cl += [p.doc_id, p.doc_id]
                if p.baseline != p.candidate:
                    disc_y.append(float(p.candidate))
                    disc_len.append(length)
                    disc_cl.append(p.doc_id)
        glm = st.logistic_trend_clustered(y, arm, ln, cl)
        cond = st.conditional_logistic_trend(disc_y, disc_len, disc_cl)
        ca = st.cochran_armitage(succ, tot, [math.log2(x) for x in lengths])
        out.append(
            {
                "task": task,
                "metric": metric,
                "lengths": lengths,
                "discordant_per_length": succ,
                "n_per_length": tot,
                "logistic_arm_x_log2len": _clean(glm.to_dict()),
                "conditional_logistic": _clean(cond.to_dict()),
                "cochran_armitage_discordance": _clean(ca.to_dict()),
            }
        )
    return out
