"""The run's records for people: the loss-curve plot and the model card."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from evalkit.refmodel.settings import ANSWER_WEIGHT, CONTEXT_WEIGHT


def plot_loss(out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(csv.DictReader(open(out / "loss_curve.csv")))
    if not rows:
        return
    x = [int(r["step"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(x, [float(r["loss_weighted"]) for r in rows], label="weighted loss", lw=0.8)
    ax.plot(x, [float(r["loss_answer"]) for r in rows], label="answer-token loss", lw=0.8)
    for i in range(1, len(rows)):
        if rows[i]["stage"] != rows[i - 1]["stage"]:
            ax.axvline(x[i], color="grey", ls=":", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.legend()
    lengths = "/".join(dict.fromkeys(r["seq_len"] for r in rows))
    ax.set_title(f"reference model training; curriculum {lengths} tokens (dotted: stage changes)", fontsize=9)
    fig.savefig(out / "loss_curve.png", dpi=120)
    plt.close(fig)


# per architecture: what the model is, the title's suffix, its heads' name, its MLP
CARD_WORDS = {
    "kda": (
        "**pure-KDA Kimi-Linear** language model (every layer is Kimi Delta Attention, no MLA "
        "layer, dense MLPs)",
        "",
        "KDA",
        "dense SwiGLU MLP",
    ),
    "gdn": (
        "**pure Gated DeltaNet Qwen3.5** language model (every layer is Gated DeltaNet with one decay "
        "per head, no attention layer, dense MLPs)",
        " (Gated DeltaNet twin)",
        "GDN",
        "dense SwiGLU MLP",
    ),
    "mamba2": (
        "**pure-Mamba2 NemotronH** language model (blocks alternate a Mamba2 mixer, one decay per "
        "head and one B/C group per head, and a relu2 MLP; no attention layer)",
        " (Mamba2)",
        "Mamba2",
        "non-gated relu2 MLP",
    ),
}


def write_card(out: Path, recipe: dict[str, Any], evald: dict[str, Any]) -> None:
    s = recipe["settings"]
    m = recipe.get("model", {})
    tk = recipe.get("tokenizer", {})
    env = recipe.get("environment", {})
    arch = s.get("arch", "kda")
    kind, title, heads, mlp = CARD_WORDS[arch]
    lines = [
        "# evalkit reference model" + title,
        "",
        f"A small {kind}, trained by `scripts/train_reference_model.py` on evalkit's own long-context "
        "task generators, so that every answer depends on the recurrent state.",
        "",
        "## Recipe",
        "",
        f"- Command: `{recipe.get('command')}`",
        f"- Architecture: {s['layers']} layers, hidden {s['hidden']}, {s['heads']} {heads} "
        f"heads x head_dim "
        f"{s['head_dim']} (K = V = {s['head_dim']}), short conv {s['conv_kernel']}, {mlp} "
        f"{s['intermediate']}, untied embeddings; {m.get('params', 0) / 1e6:.2f}M parameters, "
        f"checkpoint {recipe.get('checkpoint_bytes', 0) / 2**20:.1f} MiB (bf16 safetensors).",
        f"- Tokenizer: {tk.get('type')}, {tk.get('vocab_size')} tokens, BOS added to plain text, "
        "ChatML chat template.",
        f"- Data: mixture {s['mixture']} (row fractions); prompts sized {s['min_doc_fraction']:.0%}-100% "
        f"of the row; {s['chat_probability']:.0%} of task rows in the chat template.",
        f"- Seeds: {recipe.get('seeds', {}).get('rule')}.",
        f"- Loss: answer tokens x{ANSWER_WEIGHT}, context x{CONTEXT_WEIGHT}, pads x0.",
        f"- Optimiser: AdamW betas {s['betas']}, weight decay {s['weight_decay']} (matrices), "
        f"lr {s['lr']} with {s['warmup_steps']} warm-up steps, linear decay to {s['min_lr_ratio']}x over "
        f"the last {s['decay_fraction']:.0%} of the time; grad clip {s['grad_clip']}; "
        f"{s['tokens_per_step']} tokens/step.",
        f"- Curriculum (by wall clock): {recipe.get('stages')}",
        f"- Ran {recipe.get('steps')} steps, {recipe.get('tokens', 0) / 1e6:.1f}M tokens in "
        f"{recipe.get('train_seconds')} s on {env.get('gpu') or 'CPU'} ({env.get('kda_kernels')}); "
        f"status: {recipe.get('status')}.",
        f"- Final losses (EMA): weighted {recipe.get('final_loss_weighted')}, answer tokens "
        f"{recipe.get('final_loss_answer')}.",
        "",
        "## Quick evaluation at the end of training",
        "",
        evald.get("note", "(not run)"),
        "",
        "| task | length | control | correct | accuracy |",
        "|---|---|---|---|---|",
    ]
    for c in evald.get("cells", []):
        head = f"| {c['task']} | {c['length']} | {c.get('control') or ''} |"
        if c.get("skipped"):
            lines.append(f"{head} skipped ({c['skipped']}) | |")
        else:
            acc = f"{c['accuracy']:.0%}" if c.get("accuracy") is not None else "n/a"
            lines.append(f"{head} {c['correct']}/{c['n']} | {acc} |")
    lines += ["", f"Default `evalkit run` suite (model/suite.json): {recipe.get('default_suite')}"]
    lines += [
        "",
        "The control `reset_after_needle` zeroes every recurrent and conv state right after the "
        "needle: accuracy near 0 there shows the answers come from the state.",
        "",
        "Per-arm (fp32/fp16/bf16 state) accuracies come from `evalkit run` + `evalkit compare` and are "
        "added below by the lead's runs.",
        "",
    ]
    (out / "MODEL_CARD.md").write_text("\n".join(lines))
