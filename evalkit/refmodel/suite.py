"""The default `evalkit run` suite that ships with the reference model, chosen from its own
quick evaluation."""

from __future__ import annotations

from typing import Any

# harder than passkey; the decode-heavy tasks first (model v2 learned them into the 30-90% band)
SUITE_CANDIDATES = ("copy_list", "kv_recite", "niah_multikey_2", "vt", "kv_retrieval", "niah_single_1")


def choose_suite(evald: dict[str, Any], budget: int = 90_000, min_docs: int = 10) -> dict[str, Any] | None:
    """The default `evalkit run` suite for this model, from its own fp32 evaluation: the length
    (<= 8k) where the most harder tasks score between 30% and 90% (room for a state-precision
    effect either way), preferring passkey >= 90% there and then the shorter length; passkey plus
    up to three such tasks, as many docs as `budget` prompt tokens allow (4-20). None when no task
    is in range (evalkit then keeps its built-in suite)."""
    acc = {
        (c["task"], c["length"]): c["accuracy"]
        for c in evald.get("cells", [])
        if not c.get("control") and c.get("accuracy") is not None and c.get("n", 0) >= min_docs
    }
    best = None
    for L in sorted({n for _, n in acc if n <= 8192}):
        mid = [t for t in SUITE_CANDIDATES if (t, L) in acc and 0.3 <= acc[(t, L)] <= 0.9][:3]
        while mid and budget // ((1 + len(mid)) * L) < 4:
            mid = mid[:-1]
        if not mid:
            continue
        key = (len(mid), acc.get(("passkey", L), 0.0) >= 0.9, -L)
        if best is None or key > best[0]:
            best = (key, L, mid)
    if best is None:
        return None
    _, L, mid = best
    tasks = ["passkey", *mid]
    return {
        "tasks": tasks,
        "lengths": [L],
        "limit": min(20, budget // (len(tasks) * L)),
        "chosen_from": "fp32 accuracies of the training run's quick evaluation (quick_eval.json)",
        "accuracy_fp32": {f"{t}@{L}": acc.get((t, L)) for t in tasks},
    }
