"""Measure how fast evalkit builds its long-context docs and how close they land to the target
length, and write one example of every task (head and tail of the prompt, and the target).

    python scripts/bench_tasks_generation.py --out results/tasks_generation [--data-dir DIR]
        [--lengths 4k,32k,128k] [--docs 3] [--tokenizer PATH]

CPU only; about 3-6 minutes on 2 busy cores with the default small test BPE (1024 tokens).
Writes generation.json, generation.md and examples.md under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

# one doc's building cost, on one core: no prompt cache, no worker pool
os.environ["EVALKIT_PROMPT_CACHE"] = "off"
os.environ["EVALKIT_PROMPT_WORKERS"] = "1"

from evalkit.tasks.data import BUNDLED_DIR  # noqa: E402
from evalkit.tasks.registry import list_tasks  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# the sized long-context tasks (the registry's RULER family) and the many-shot one
LONG = [t.name for t in list_tasks() if t.family == "ruler"] + ["gsm8k_manyshot"]
EXAMPLE_TASKS = ["gsm8k", "gsm8k_cot", *LONG, "gsm8k_longdecode"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    default_data = os.environ.get("EVALKIT_DATA") or str(BUNDLED_DIR)
    ap.add_argument("--data-dir", default=default_data)
    ap.add_argument("--lengths", default="4k,32k,128k")
    ap.add_argument("--docs", type=int, default=3)
    ap.add_argument("--tokenizer", help="HF tokenizer path (default: evalkit's small test BPE)")
    args = ap.parse_args()
    os.environ.setdefault("TQDM_DISABLE", "1")

    from evalkit.tasks.registry import get_task, parse_lengths
    from evalkit.tasks.tokenizer import TokenizerView

    if args.tokenizer:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args.tokenizer)
    else:
        from evalkit.tasks.tiny_tokenizer import tiny_tokenizer

        tok = tiny_tokenizer(data_dir=args.data_dir)
    view = TokenizerView(tok)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lengths = parse_lengths(args.lengths)
    results: dict = {
        "machine": f"{platform.node()} {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared)",
        "python": sys.version.split()[0],
        "tokenizer": view.fingerprint(),
        "docs_per_cell": args.docs,
        "command": " ".join(sys.argv),
        "tasks": {},
    }

    for name in LONG:
        results["tasks"][name] = {}
        for target in lengths:
            try:
                task = get_task(name)
                t0 = time.perf_counter()
                reqs = task.requests(tokenizer=tok, lengths=[target], limit=args.docs, data_dir=args.data_dir)
                dt = (time.perf_counter() - t0) / len(reqs)
                fills = [r.meta["length"] / target for r in reqs]
                evals = statistics.mean(r.meta["fit_evaluations"] for r in reqs)
                cell = {
                    "s_per_doc": round(dt, 3),
                    "min_fill": round(min(fills), 4),
                    "max_fill": round(max(fills), 4),
                    "mean_fit_evaluations": round(evals, 2),
                    "within_2pct": all(0.98 <= f <= 1.0 for f in fills),
                }
            except Exception as exc:  # noqa: BLE001 - keep measuring the rest
                cell = {"error": repr(exc)}
            results["tasks"][name][str(target)] = cell
            print(name, target, cell, flush=True)

    (out / "generation.json").write_text(json.dumps(results, indent=2))
    lines = [
        "# Long-context doc generation: speed and length fit",
        "",
        f"- machine: {results['machine']}; Python {results['python']}",
        f"- tokenizer: {results['tokenizer']}",
        f"- command: `{results['command']}`",
        f"- {args.docs} docs per cell; fill = prompt tokens / target (must be in [0.98, 1])",
        "",
        "| task | "
        + " | ".join(f"{n // 1024}k s/doc | {n // 1024}k fill | {n // 1024}k counts" for n in lengths)
        + " |",
        "|---|" + "---|---|---|" * len(lengths),
    ]
    for name, cells in results["tasks"].items():
        row = []
        for n in lengths:
            c = cells[str(n)]
            row += (
                ["error", "", ""]
                if "error" in c
                else [
                    f"{c['s_per_doc']:.2f}",
                    f"{c['min_fill']:.3f}-{c['max_fill']:.3f}",
                    f"{c['mean_fit_evaluations']}",
                ]
            )
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    (out / "generation.md").write_text("\n".join(lines) + "\n")

    ex_lines = [
        "# One example of each task",
        "",
        f"4k tokens of {results['tokenizer']['name']} (K=10 for gsm8k_longdecode), seed 42, doc 0; "
        "prompt head and tail (200 characters each) and the target.",
        "",
    ]
    for name in EXAMPLE_TASKS:
        try:
            task = get_task(name)
            lens = None if task.default_lengths is None else ([10] if name == "gsm8k_longdecode" else [4096])
            r = task.requests(tokenizer=tok, lengths=lens, limit=1, data_dir=args.data_dir)[0]
            targets = " | ".join(d.target.splitlines()[-1] for d in r.docs[:3])
            targets += " | ..." if len(r.docs) > 3 else ""
            ex_lines += [
                f"## {name}",
                "",
                f"length {r.length}, prompt tokens {r.meta.get('length')}, "
                f"max_new_tokens {r.max_new_tokens}, until {r.until}",
                "",
                "```text",
                r.prompt[:200],
                "[...]",
                r.prompt[-200:],
                "```",
                f"target: `{targets}`",
                "",
            ]
        except Exception as exc:  # noqa: BLE001
            ex_lines += [f"## {name}", "", f"error: {exc!r}", ""]
    (out / "examples.md").write_text("\n".join(ex_lines))
    print(f"wrote {out}/generation.json, generation.md, examples.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
