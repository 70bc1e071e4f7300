"""Side by side: how sensitive a scalar-gate (Gated DeltaNet) and a per-channel-gate (KDA)
recurrence are to the state's storage precision, on the same questions (issue 18); with the
Mamba2 reference model's records present (`results/reference-model-mamba2/h200/reports/`, issue
41), its rows too (a scalar gate without the delta rule).

Reads only committed results: the paired reports of `scripts/gdn_twin_reports.sh` and
`scripts/mamba2_reports.sh` (evalkit compare JSON, arm vs fp32 on each model) and the 32k drift
studies (`scripts/gpu_drift.py` summaries). An arm or study a model lacks (a sweep cut at its
call's deadline) is shown as "–".

    python scripts/gdn_kda_side_by_side.py > results/reference-model-gdn/h200/side-by-side.md
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "GDN twin": ROOT / "results" / "reference-model-gdn" / "h200",
    "KDA v2": ROOT / "results" / "reference-model" / "h200",
}
MAMBA2 = ROOT / "results" / "reference-model-mamba2" / "h200"
# the three models' retrieval sweeps in one call (results/retrieval-three-families-h100/run.sh)
THREE = ROOT / "results" / "retrieval-three-families-h100"
THREE_MODELS = {"KDA v2": "kda", "GDN twin": "gdn", "Mamba2": "mamba2"}
ARMS = ("fp16", "bf16", "m4", "m3", "fp8_e4m3", "m3-rtz")
FACTOR_ARMS = ("fp16", "fp16@chunk=65536", "bf16", "bf16@chunk=65536")


def models() -> dict[str, Path]:
    """The two models of issue 18, then the Mamba2 model once its reports are committed."""
    return {**MODELS, "Mamba2": MAMBA2} if (MAMBA2 / "reports").is_dir() else dict(MODELS)


def _rows(model_dir: Path, arm: str, group: str) -> dict[tuple[str, int], dict]:
    """The rows of `group`'s paired report fp32 vs `arm` (under `model_dir`/reports), by cell."""
    path = model_dir / "reports" / f"compare-{group}-fp32-vs-{arm}.json"
    if not path.is_file():
        return {}
    report = json.loads(path.read_text())
    return {(r["task"], r["length"]): r for r in report["rows"]}


def _cell(row: dict) -> str:
    """Δ pp with the McNemar mid-p, bold where the mid-p (Holm within the report) is < 0.05."""
    diff = 100 * row["diff"]
    if row["baseline_only"] + row["candidate_only"] == 0:
        return "0 (identical)"
    text = f"{diff:+.0f} (p {row['mcnemar_midp']:.2g})"
    return f"**{text}**" if row["mcnemar_midp_holm"] < 0.05 else text


def accuracy_table(group: str, dirs: dict[str, Path] | None = None) -> list[str]:
    """One row per model and cell of the `group` sweeps (`retrieval`, `short`), for the cells at
    least two models ran (the same questions), and a line for each model without such a sweep;
    `dirs`: the models' folders (default: each model's own H200 records)."""
    per_model = {m: {arm: _rows(d, arm, group) for arm in ARMS} for m, d in (dirs or models()).items()}
    ran = {m: set().union(*rows.values()) for m, rows in per_model.items()}
    cells = sorted(c for c in set().union(*ran.values()) if sum(c in r for r in ran.values()) >= 2)
    out = _head(["model"], ARMS)
    for cell in cells:
        out += [row for m, rows in per_model.items() if (row := _table_row(cell, m, rows, ARMS))]
    absent = [m for m, r in ran.items() if not r & set(cells)]
    if absent:
        out.append(f"\nNo `{group}` sweep committed for: {', '.join(absent)}.")
    return out


def three_family_dirs() -> dict[str, Path]:
    """The models of the one-call retrieval sweep whose reports are committed."""
    dirs = {m: THREE / d for m, d in THREE_MODELS.items()}
    return {m: d for m, d in dirs.items() if (d / "reports").is_dir()}


def factor_table(model_dir: Path) -> list[str]:
    """The full-vs-chunked prefill factor: each cell's fp16/bf16 change against fp32 with a store
    every 2,048 prompt tokens and with one store at the prompt's end (@chunk=65536)."""
    rows = {arm: _rows(model_dir, arm, "retrieval") for arm in FACTOR_ARMS}
    cells = sorted(set().union(*rows.values()))
    if not all(rows.values()):
        return []
    return _head([], FACTOR_ARMS) + [_table_row(cell, None, rows, FACTOR_ARMS) for cell in cells]


def _head(labels: list[str], arms) -> list[str]:
    """A table's header: the cell, `labels` columns, fp32's accuracy and one column per arm."""
    head = ["cell", *labels, "fp32 %", *(f"`{a}`" for a in arms)]
    return ["| " + " | ".join(head) + " |", "|" + "---|" * (1 + len(labels)) + "---:|" * (1 + len(arms))]


def _table_row(cell: tuple[str, int], label: str | None, rows: dict, arms) -> str | None:
    """A cell's row (with a `label` column unless None): fp32's accuracy and each arm's change;
    None when no arm's report holds the cell."""
    base = next((rows[a][cell] for a in arms if cell in rows[a]), None)
    if base is None:
        return None
    lead = [
        f"{cell[0]} @ {_length(cell[1])}",
        *([label] if label is not None else []),
        f"{100 * base['acc_baseline']:.0f}",
    ]
    return "| " + " | ".join(lead + [_cell(rows[a][cell]) if cell in rows[a] else "–" for a in arms]) + " |"


def cpu_cell_table() -> list[str]:
    """The cells the Mamba2 model's CPU sweep ran (`cpu-sweep/`: fp32 weights and activations),
    beside the other two models' H200 rows on the same questions; empty without that sweep."""
    cpu = MAMBA2.parent / "cpu-sweep"
    m2 = {arm: _rows(cpu, arm, "cpu") for arm in ARMS}
    cells = sorted(set().union(*m2.values()))
    if not cells:
        return []
    out = _head(["model (device, weights)"], ARMS)
    h200 = {model: {arm: _rows(d, arm, "retrieval") for arm in ARMS} for model, d in MODELS.items()}
    versions = {}
    for cell in cells:
        for model, rows in h200.items():
            if row := _table_row(cell, f"{model} (H200, bf16)", rows, ARMS):
                out.append(row)
                versions[model, cell[0]] = _task_version(MODELS[model] / "retrieval" / "fp32", cell[0])
        out.append(_table_row(cell, "Mamba2 (CPU, fp32)", m2, ARMS))
        versions["Mamba2", cell[0]] = _task_version(cpu / "fp32", cell[0])
    if len(set(versions.values())) > 1:  # another version of a task builds other prompts
        out.append(
            "\nTask versions differ: "
            + ", ".join(f"{m} ran {t} version {v}" for (m, t), v in sorted(versions.items()))
            + " (the same needles and answers per question; the filler around them differs)."
        )
    return out


def _task_version(run: Path, task: str) -> int | None:
    """The version of `task` a run's manifest records."""
    manifest = json.loads((run / "manifest.json").read_text())
    return manifest["tasks"][task]["config"]["version"]


def _length(tokens: int) -> str:
    return f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)


def _ci(d: dict, fmt: str) -> str:
    return f"{d['mean']:{fmt}} [{d['ci_low']:{fmt}}, {d['ci_high']:{fmt}}]"


def mamba2_whole_drift() -> Path | None:
    """The Mamba2 drift study run whole on an H100 (the H200 one stopped at 6 of 16 decode prompts),
    when the Mamba2 model's records are there."""
    study = MAMBA2.parent / "drift-32k-h100"
    return study if "Mamba2" in models() and (study / "summary.json").is_file() else None


def drift_table() -> list[str]:
    out = [
        "| model | mode | prompts | arm | KL per token at 31.8k (mean over prompts) | × A/A floor [95% CI] "
        "| KL growth exponent [95% CI] | state rel. error at end | state error exponent |",
        "|---|---|---:|---|---:|---|---|---:|---|",
    ]
    studies = [(model, d / "drift-32k") for model, d in models().items()]
    if whole := mamba2_whole_drift():
        studies.append(("Mamba2 (H100)", whole))
    for model, study in studies:
        if not (study / "summary.json").is_file():
            continue
        part = json.loads((study / "summary.json").read_text())["parts"][0]
        for mode in ("prefill", "decode"):
            res = part["results"][mode]
            prompts = f"{res['n_prompts']} of {part['n_prompts']}"
            for arm in ("fp16", "bf16"):
                a = res["arms"][arm]
                floor = a["floor"]["kl_last_bucket"]
                out.append(
                    f"| {model} | {mode} | {prompts} | `{arm}` | {floor['arm_mean']:.2g} | "
                    f"{floor['ratio']:.2g} [{floor['ci_low']:.2g}, {floor['ci_high']:.2g}] | "
                    f"L^{_ci(a['kl_exponent']['main'], '.2f')} | "
                    f"{a['state_rel_err_end']['mean']:.2g} | L^{_ci(a['state_exponent']['main'], '.2f')} |"
                )
    return out


def main() -> None:
    title = "Gated DeltaNet twin vs KDA reference model v2"
    if "Mamba2" in models():
        title = "KDA reference model v2, Gated DeltaNet twin and Mamba2 reference model"
    print(f"# {title}: state precision side by side\n")
    print(
        "Both models: 4 layers, hidden 256, 4 heads × 64, 4.74 M parameters, the same tokenizer, "
        "data, loss and training budget (≈300 s on one H200), trained at ≤ 2k tokens; so 16k and "
        "32k are length extrapolation. H200, 100 questions per cell, the same questions for both "
        "models (seed 42); the accuracy sweeps ran the engine's GPU default (bf16 weights and "
        "activations, state math in fp32), the drift studies fp32 weights (the state alone); "
        "the arm changes only how the recurrent state is stored (once per 2k prefill chunk and "
        "once per generated token). Generated by "
        "`scripts/gdn_kda_side_by_side.py` from the reports of `scripts/gdn_twin_reports.sh`.\n"
    )
    if "Mamba2" in models():
        print(
            "Mamba2: NemotronH blocks alternating Mamba2 and a relu2 MLP at the same hidden size, heads "
            "and state [64, 64] per head (3.95 M parameters: no delta-rule projections), the same "
            "tokenizer, data, loss and training clock (298 s), trained on the H200 by "
            "`results/reference-model-mamba2/run.sh` (its budget and parameters: "
            "`results/reference-model-mamba2/MODEL_CARD.md`); its cells are the same questions.\n"
        )
    print("## Accuracy: change against fp32 (pp, McNemar mid-p; bold: Holm-adjusted p < 0.05)\n")
    print("\n".join(accuracy_table("retrieval")))
    print(
        "\n`m3-rtz` truncates toward zero (a biased positive control); `mN` keeps N mantissa bits "
        "with fp32's exponent, round to nearest; `fp8_e4m3` is scaled fp8. A cell where fp32 is "
        "at 100% has room only for losses.\n"
    )
    three = three_family_dirs()
    if three:
        runs = [json.loads((d / "fp32" / "manifest.json").read_text()) for d in three.values()]
        versions = sorted({t["config"]["version"] for m in runs for t in m["tasks"].values()})
        devices = sorted({" + ".join(m.get("hardware", {}).get("gpu") or ["CPU"]) for m in runs})
        weights = sorted({m.get("kernels", {}).get("weights_dtype", "unrecorded") for m in runs})
        print("## Retrieval: the three families in one call (same device, questions and task versions)\n")
        print(
            f"`results/retrieval-three-families-h100/`: the three models swept together on "
            f"{', '.join(devices)} ({', '.join(weights)} weights), task version "
            f"{', '.join(map(str, versions))}; the retrieval table above is the earlier KDA/GDN call "
            "(task version 1).\n"
        )
        print("\n".join(accuracy_table("retrieval", three)))
        factor = factor_table(three["Mamba2"]) if "Mamba2" in three else []
        if factor:
            print(
                "\nThe Mamba2 model's full-vs-chunked prefill factor: a store every 2,048 prompt tokens "
                "(`fp16`, `bf16`) against one at the prompt's end (`@chunk=65536`), each against fp32.\n"
            )
            print("\n".join(factor))
        print()
    cpu_rows = cpu_cell_table()
    if cpu_rows:
        print("## The Mamba2 model's CPU cell beside the others' H200 rows\n")
        print(
            "The Mamba2 model's retrieval cells ran on the CPU only (fp32 weights and activations: the "
            "state's format is the only difference between arms there), the other two on the H200 "
            "with bf16 weights: one row per model and device, not a comparison of devices.\n"
        )
        print("\n".join(cpu_rows))
        print()
    print("## Accuracy on the decode-heavy cells at 2k (the state is stored once per generated token)\n")
    print(
        "copy_list and kv_recite answer with a list of tens to hundreds of tokens; the `short` sweeps "
        "(the cells at least two models ran; a cell where fp32 is at 0% has no room at all).\n"
    )
    print("\n".join(accuracy_table("short")))
    print()
    print("## Drift: teacher-forced divergence from fp32, 16 prompts × 32k tokens (kv_retrieval docs)\n")
    print("\n".join(drift_table()))
    print(
        "\nKL in nats per token (fp32‖arm) in the last length bucket; the A/A floor is fp32 computed "
        "with other chunk/block cuts; exponents are fitted per prompt over [2k, 31.8k] (prefill) or "
        "[254, 31.8k] (decode) and averaged across prompts (sensitivity rows and caveats: each "
        "study's `note.md`)."
    )
    if mamba2_whole_drift():
        print(
            "\n`Mamba2 (H100)`: the same study run whole on an H100, decode mode in one launch per block "
            "(`results/reference-model-mamba2/drift-32k-h100/`); its prefill rows equal the H200 "
            "study's prompt by prompt, its decode figures differ from the H200's 6 prompts in the last "
            "digits, from the one-launch kernel, not the device (that folder's README)."
        )


if __name__ == "__main__":
    main()
