"""The probe's record: `cache_probe.json` (the manifest's provenance and server configuration, the
result, every question's three answers) and `cache_probe.md` (the verdict and its counts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalkit.cache_probe.probe import QuestionProbe
from evalkit.cache_probe.verdict import CacheProbeResult

JSON_NAME = "cache_probe.json"
MD_NAME = "cache_probe.md"


def question_rows(probes: list[QuestionProbe]) -> list[dict[str, Any]]:
    rows = []
    for p in probes:
        w, f = p.warm_vs_cold, p.floor
        rows.append(
            {
                "index": p.index,
                "cold": p.cold.text,
                "replicate": p.replicate.text,
                "warm": p.warm.text,
                "warm_same_text": w.same_text,
                "floor_same_text": f.same_text,
                "warm_first_token_diff": w.first_token_diff,
                "floor_first_token_diff": f.first_token_diff,
                "warm_max_abs_dlogprob": w.max_abs_dlogprob,
                "floor_max_abs_dlogprob": f.max_abs_dlogprob,
            }
        )
    return rows


def markdown(result: CacheProbeResult, manifest: dict[str, Any]) -> str:
    server = manifest.get("server", {})
    floor = result.floor.replace("-", " vs ")
    lines = [
        "### evalkit cache-probe",
        "",
        f"**{result.verdict}**",
        "",
        f"Server `{server.get('base_url')}`, model `{server.get('model')}`; {result.n} GSM8K questions "
        f"behind one shared {manifest['settings']['shots']}-shot prefix, greedy, "
        f"{manifest['settings']['max_tokens']} tokens; cold by {result.cold_method}.",
        "",
        "| comparison | questions whose text differs | log-probs: warm above / below the floor |",
        "|---|---|---|",
        f"| warm vs cold | {result.warm_text_departures} | {result.logprob_warm_above} / "
        f"{result.logprob_warm_below} (of {result.logprob_questions}) |",
        f"| {floor} (floor) | {result.floor_text_departures} | |",
        "",
        f"Paired one-sided exact sign tests: text {result.text_warm_only} vs {result.text_floor_only} "
        f"questions (p {result.text_p:.3g}), log-probs (p {result.logprob_p:.3g}); Holm over both "
        f"{result.p_holm[0]:.3g}, {result.p_holm[1]:.3g}; alpha {result.alpha}.",
    ]
    if result.cold_method == "unique-prefix":
        lines += [
            "",
            "No cache flush was used (the server offers none: vLLM `POST /reset_prefix_cache`, SGLang "
            "`POST /flush_cache`; or `--no-flush`): cold answers are prompts behind a unique prefix, and "
            "the floor is two warm answers to the same prompt (the server's variation with the cache "
            "state held equal), not two cold ones.",
        ]
    return "\n".join(lines) + "\n"


def write(out: Path, manifest: dict[str, Any], result: CacheProbeResult, probes: list[QuestionProbe]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    record = {**manifest, "cache_probe": result.to_dict(), "questions": question_rows(probes)}
    (out / JSON_NAME).write_text(json.dumps(record, indent=2) + "\n")
    (out / MD_NAME).write_text(markdown(result, manifest))
