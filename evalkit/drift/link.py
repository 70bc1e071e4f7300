"""`evalkit drift link`: per-question divergence of two arms, against their correctness flips.

For every question both `evalkit run` directories answered (same prompt), the baseline's
generated answer is replayed teacher-forced under both arms' state formats: the prompt is
prefilled in chunks, then the answer is fed token by token in decode mode (the state rounded
after every token, as when it was generated). Per question: the mean and max per-token
KL(p_baseline ‖ p_candidate) over the answer's next-token distributions, top-1 agreement and
the final state error (mean over KDA layers). `link_stats.link_analysis` then asks whether the
questions whose correctness differs between the runs had larger divergence, within task and length
and separately for losses and gains. `--report-only` recomputes that from a link directory's
`link.json` without replaying anything. The prompts are
rebuilt from the baseline manifest's tasks, lengths, limit and seed and matched by prompt_hash;
the answer is the response text re-tokenized (as a server would read it back).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from evalkit.drift.positions import fmt
from evalkit.errors import InputError, MismatchError


def replay(model, prompt_ids: list[int], answer_ids: list[int], base: str, cand: str, chunk: int) -> dict:
    """Teacher-force prompt (chunked prefill) + answer (decode) under two state formats."""
    from evalkit.drift.state_metrics import compare_states
    from evalkit.drift.token_metrics import token_metrics

    if not answer_ids:
        return {"n_tokens": 0, "mean_kl": None, "max_kl": None, "top1_agreement": None, "state_rel_err": None}
    sessions = [model.open_session(base), model.open_session(cand)]
    try:
        rows: list[list[torch.Tensor]] = [[], []]
        dev = model.device
        p = torch.tensor(prompt_ids, device=dev)
        for side, s in enumerate(sessions):
            last = None
            for i in range(0, len(prompt_ids), chunk):
                last = s.prefill(p[i : i + chunk])[-1:]
            rows[side].append(last)
            if len(answer_ids) > 1:
                rows[side].append(s.decode(torch.tensor(answer_ids[:-1], device=dev)))
        ref, arm = torch.cat(rows[0]), torch.cat(rows[1])
        tm = token_metrics(ref, arm, torch.tensor(answer_ids, device=dev)).to_numpy()
        st = compare_states(sessions[0].states(), sessions[1].states())
    finally:
        for s in sessions:
            s.close()
    return {
        "n_tokens": len(answer_ids),
        "mean_kl": float(np.mean(tm["kl"])),
        "max_kl": float(np.max(tm["kl"])),
        "top1_agreement": float(np.mean(tm["top1"])),
        "state_rel_err": float(np.mean([r["rel_fro"] for r in st])) if st else None,
    }


def _format_of(run, override: str | None, side: str) -> str:
    from evalkit.kernels.formats import FormatError, parse_format

    arm = run.manifest.get("arm") or {}
    name = override or arm.get("state_dtype") or arm.get("label")
    try:
        return parse_format(name).name
    except (FormatError, TypeError):
        raise InputError(
            f"cannot tell the {side} run's state format from its manifest (arm {arm!r}); pass --{side}-format"
        ) from None


def rebuild_prompts(manifest: dict, tokenizer, data_dir: str | None) -> dict[str, Any]:
    """prompt_hash -> prompt, from the tasks the run's manifest records."""
    from evalkit.store import prompt_hash
    from evalkit.tasks.registry import get_task

    out: dict[str, Any] = {}
    seed = (manifest.get("seeds") or {}).get("task_seed")
    for name, entry in (manifest.get("tasks") or {}).items():
        task = get_task(name)
        reqs = task.requests(
            tokenizer=tokenizer,
            lengths=entry.get("lengths"),
            limit=manifest.get("limit"),
            seed=seed,
            data_dir=data_dir,
            apply_chat_template=bool(manifest.get("apply_chat_template")),
        )
        for r in reqs:
            out[prompt_hash(r.prompt)] = r.prompt
    return out


def _questions(base, cand, metric: str | None) -> list[dict]:
    from evalkit.store.schema import sample_key

    cmap = {sample_key(s): s for s in cand.samples}
    out = []
    for b in base.samples:
        c = cmap.get(sample_key(b))
        if c is None or b["error"] is not None or c["error"] is not None:
            continue
        if b["prompt_hash"] != c["prompt_hash"]:
            raise MismatchError(f"question {sample_key(b)} was asked with different prompts in the two runs")
        m = metric or next(iter(b["correct"]))
        if m not in b["correct"] or m not in c["correct"]:
            continue
        out.append(
            {
                "task": b["task"],
                "doc_id": str(b["doc_id"]),
                "length": b.get("length"),
                "prompt_hash": b["prompt_hash"],
                "response": b["response"],
                "metric": m,
                "baseline_correct": b["correct"][m],
                "candidate_correct": c["correct"][m],
            }
        )
    if not out:
        raise MismatchError("the runs share no scored question (same tasks, doc ids and lengths?)")
    return out


def run_link(args: argparse.Namespace) -> int:
    from evalkit.backends.local_probe import EngineDriftModel
    from evalkit.prompt_ids import encode_prompt
    from evalkit.store.reader import load_run

    if args.report_only:
        return report_only(Path(args.report_only))
    if not (args.baseline and args.candidate):
        raise InputError("pass BASELINE_RUN and CANDIDATE_RUN (or --report-only LINK_DIR)")

    base, cand = load_run(args.baseline), load_run(args.candidate)
    bf = _format_of(base, args.baseline_format, "baseline")
    cf = _format_of(cand, args.candidate_format, "candidate")
    qs = _questions(base, cand, args.metric)
    if args.limit is not None:
        qs = qs[: args.limit]
    path = args.model or ((base.manifest.get("model") or {}).get("path"))
    if not path:
        raise InputError("the baseline manifest names no model path; pass --model")
    out = Path(args.out) if args.out else Path("runs") / f"drift-link-{time.strftime('%Y%m%d-%H%M%S')}"
    if (out / "link.json").exists() and not args.overwrite:
        raise InputError(f"{out} already holds a link run; pass another --out (or --overwrite)")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        model = EngineDriftModel.load(str(path), device=device, max_len=1, chunk_size=args.chunk_size)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot load model {path}: {exc}") from None
    prompts = rebuild_prompts(base.manifest, model.tokenizer, args.data_dir)
    missing = [q for q in qs if q["prompt_hash"] not in prompts]
    if missing:
        raise MismatchError(
            f"{len(missing)} of {len(qs)} questions' prompts could not be rebuilt from the baseline manifest "
            f"(e.g. {missing[0]['task']} doc {missing[0]['doc_id']}): other task options or data?"
        )
    encoded = []
    for q in qs:
        p = encode_prompt(model.tokenizer, prompts[q["prompt_hash"]])
        a = list(model.tokenizer.encode(q["response"], add_special_tokens=False))
        encoded.append((p, a))
    model.max_len = max(len(p) + len(a) for p, a in encoded) + 1
    rows = []
    t0 = time.perf_counter()
    # counted in tokens: a replay's cost is its prompt plus its answer, and answers differ 100x
    bar = tqdm(total=sum(len(p) + len(a) for p, a in encoded), unit="tok", unit_scale=True, desc="replay")
    for q, (p, a) in zip(qs, encoded):
        r = replay(model, p, a, bf, cf, args.chunk_size)
        bar.update(len(p) + len(a))
        rows.append(
            {
                **{
                    k: q[k]
                    for k in ("task", "doc_id", "length", "metric", "baseline_correct", "candidate_correct")
                },
                "flipped": q["baseline_correct"] != q["candidate_correct"],
                "prompt_tokens": len(p),
                **r,
            }
        )
    bar.close()
    out.mkdir(parents=True, exist_ok=True)
    result = {
        "kind": "drift-link",
        "baseline": {"path": str(args.baseline), "format": bf},
        "candidate": {"path": str(args.candidate), "format": cf},
        "model": model.describe(),
        "seconds": time.perf_counter() - t0,
        "questions": rows,
    }
    _write(out, result)
    return 0


def report_only(out: Path) -> int:
    """Recompute the analysis of an existing link directory (its replayed rows are kept)."""
    import json

    path = out / "link.json"
    if not path.is_file():
        raise InputError(f"{out} holds no link.json: pass the --out of an earlier `evalkit drift link`")
    result = json.loads(path.read_text())
    if result.get("kind") != "drift-link" or "questions" not in result:
        raise InputError(f"{path} is not an `evalkit drift link` result")
    _write(out, result)
    return 0


def _write(out: Path, result: dict) -> None:
    from evalkit.drift import rundir
    from evalkit.drift.link_stats import link_analysis

    rows = result["questions"]
    used = [r for r in rows if r["n_tokens"] > 0]
    analysis = link_analysis(used)
    analysis["left_out_empty_answers"] = len(rows) - len(used)
    result = {**result, "analysis": analysis}
    rundir.write_json(out / "link.json", result)
    rundir.write_csv(out / "link.csv", rows)
    text = link_markdown(result)
    (out / "link.md").write_text(text)
    print(text)
    print(f"link directory: {out}  (link.json, link.csv, link.md)")


def link_markdown(result: dict) -> str:
    a = result["analysis"]
    b, c = result["baseline"], result["candidate"]
    lines = [
        f"### Divergence and accuracy: {c['format']} ({c['path']}) against {b['format']} ({b['path']})",
        "",
        f"Each question's baseline answer replayed teacher-forced in decode mode under both state formats; "
        f"per question the mean per-token KL({b['format']}‖{c['format']}) over the answer.",
        "",
        f"**{a['text']}.**",
        "",
        "Compared within task and length, separately for the questions the baseline had right "
        "(a flip is a loss) and wrong (a gain): pooling them confounds divergence with the task.",
        "",
        "| baseline | task @ length | questions | flipped | median KL flipped | median KL kept | AUC "
        "| Mann–Whitney p |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for side in ("losses", "gains"):
        for st in a[side]["strata"]:
            lines.append(
                f"| {'right' if side == 'losses' else 'wrong'} | {st['stratum']} | {st['n']} "
                f"| {st['n_flipped']} "
                f"| {fmt(st.get('median_kl_flipped'))} | {fmt(st.get('median_kl_kept'))} "
                f"| {fmt(st.get('auc'))} "
                f"| {fmt(st.get('p')) if st['contrast'] else 'no contrast'} |"
            )
    lines += [
        "",
        "| task | doc | length | flipped | answer tokens | mean KL | max KL | top-1 agree | state rel. err |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    order = sorted(
        result["questions"],
        key=lambda r: (r["task"], r["length"] or 0, not r["flipped"], -(r["mean_kl"] or 0)),
    )
    for r in order:
        lines.append(
            f"| {r['task']} | {r['doc_id']} | {r['length'] or '–'} | {'yes' if r['flipped'] else 'no'} "
            f"| {r['n_tokens']} | {fmt(r['mean_kl'])} | {fmt(r['max_kl'])} | {fmt(r['top1_agreement'])} "
            f"| {fmt(r['state_rel_err'])} |"
        )
    if a.get("left_out_empty_answers"):
        lines += ["", f"{a['left_out_empty_answers']} questions with an empty answer were left out."]
    return "\n".join(lines) + "\n"
