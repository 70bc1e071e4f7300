"""Ask a backend every pending request and store each answer the moment it arrives.

A result with `error` is stored with its message and no `correct` (never scored as wrong);
a scoring failure is stored the same way, so no question is ever lost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.backends.base import Backend, GenRequest, GenResult
from evalkit.runner.plan import Plan, WorkItem, build_plan
from evalkit.runner.progress import RunProgress


@dataclass
class RunSpec:
    tasks: list[Any]  # names (or Task objects, for programmatic use)
    out_dir: Path
    task_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> the task's options
    lengths: list[int] | None = None
    limit: int | None = None
    seed: int | None = None
    data_dir: str | None = None
    apply_chat_template: bool = False
    max_new_tokens: int | None = None  # a cap for smoke runs; recorded in the manifest
    manifest: dict[str, Any] = field(default_factory=dict)  # model, arm, command, ...


@dataclass
class RunOutcome:
    out_dir: Path
    summary: dict[str, Any]
    asked: int  # requests sent this time
    stored: int  # samples written this time
    errors: int  # samples written with an error this time
    skipped: int  # questions already on disk (resume)
    tokens_per_s: float
    wall_s: float


def task_entries(
    tasks: list[Any], lengths: dict[str, list[int] | None], cap: int | None, chat: bool = False
) -> dict[str, Any]:
    """{name: {config, hash, lengths}}; a --max-new-tokens cap and the chat template are part of
    the config (and hash): runs that differ in them do not ask the same questions."""
    from evalkit.store import config_hash

    out = {}
    for t in tasks:
        cfg = dict(t.config())
        if cap is not None:
            cfg["max_new_tokens_cap"] = cap
        if chat:
            cfg["apply_chat_template"] = True
        out[t.name] = {"config": cfg, "hash": config_hash(cfg), "lengths": lengths[t.name]}
    return out


def gen_request(req: Any, cap: int | None) -> GenRequest:
    n = req.max_new_tokens if cap is None else min(req.max_new_tokens, cap)
    return GenRequest(prompt=req.prompt, max_new_tokens=n, stop=list(req.until or []))


def _base_sample(item: WorkItem, doc: Any, result: GenResult, prompt_hash: str) -> dict[str, Any]:
    return {
        "task": item.task.name,
        "doc_id": doc.doc_id,
        "length": item.request.length,
        "prompt_hash": prompt_hash,
        "target": doc.target,
        "response": result.text,
        "correct": {},
        "error": result.error,
        "score": {},
        "extracted": {},
        "n_generated": result.n_generated,
        "finish_reason": result.finish_reason,
        "flags": list(result.flags),
        "timings": dict(result.timings),
        **({"meta": item.request.meta} if item.request.meta else {}),
    }


def samples_for(item: WorkItem, result: GenResult, prompt_hash: str) -> list[dict[str, Any]]:
    """One sample per missing doc of the request: scored, or carrying the error."""
    docs = [d for d in item.request.docs if str(d.doc_id) in item.missing]
    if result.error is None:
        try:
            scored = {str(s.doc_id): s for s in item.task.score(item.request, result.text)}
        except Exception as exc:  # noqa: BLE001 -- a scorer bug must not lose the answer
            result = GenResult(**{**result.__dict__, "error": f"scoring failed: {exc!r}"})
            scored = {}
    out = []
    for doc in docs:
        sample = _base_sample(item, doc, result, prompt_hash)
        if result.error is None:
            s = scored.get(str(doc.doc_id))
            if s is None:
                sample["error"] = "scoring returned no result for this doc"
            else:
                sample.update(correct=dict(s.correct), extracted=dict(s.extracted), score=dict(s.score))
        out.append(sample)
    return out


def run_evaluation(
    spec: RunSpec, backend: Backend, tokenizer: Any, *, progress: bool = True, after_generate: Any = None
) -> RunOutcome:
    """Plan, generate, store, summarise. `after_generate()` may return manifest additions."""
    from evalkit.store import RunWriter, prompt_hash
    from evalkit.tasks.registry import get_task

    t0 = time.perf_counter()
    tasks = list(
        {
            (t if isinstance(t, str) else t.name): get_task(t, **spec.task_options.get(t, {}))
            if isinstance(t, str)
            else t
            for t in spec.tasks
        }.values()
    )  # each task once, in the order given
    lengths = {
        t.name: (spec.lengths or list(t.default_lengths)) if t.default_lengths else None for t in tasks
    }
    manifest = dict(spec.manifest)
    manifest["tasks"] = task_entries(tasks, lengths, spec.max_new_tokens, spec.apply_chat_template)
    manifest["lengths"] = spec.lengths
    manifest.setdefault("seeds", {"task_seed": spec.seed})
    manifest["limit"] = spec.limit
    manifest["apply_chat_template"] = spec.apply_chat_template

    from evalkit.runner.groups import request_batches
    from evalkit.tasks.long_context import base as long_context_base

    build = dict(
        tokenizer=tokenizer,
        limit=spec.limit,
        seed=spec.seed,
        data_dir=spec.data_dir,
        apply_chat_template=spec.apply_chat_template,
    )
    # requests arrive in batches as they are built (long-context docs build in worker processes
    # while the backend answers the batches before them); bad input fails in the first batch,
    # before the run directory exists
    shown, long_context_base.SHOW_PROGRESS = long_context_base.SHOW_PROGRESS, progress
    batches = request_batches(tasks, lengths, build)
    try:
        first = next(batches, [])
        writer = RunWriter.open(spec.out_dir, manifest, resume=True)
    except BaseException:
        batches.close()
        long_context_base.SHOW_PROGRESS = shown
        raise
    done_keys = set(writer.done_keys)
    bar = RunProgress(0, 0, enabled=progress, desc=f"{manifest.get('arm', {}).get('label', 'run')}")
    counts = {"stored": 0, "errors": 0, "asked": 0, "skipped": 0}

    def ask(batch: list[tuple[Any, list[Any]]]) -> None:
        requests_by_task: dict[str, list[Any]] = {}
        for task, reqs in batch:
            requests_by_task.setdefault(task.name, []).extend(reqs)
        plan: Plan = build_plan(list({t.name: t for t, _ in batch}.values()), requests_by_task, done_keys)
        bar.grow(plan.total_docs, plan.done_docs)
        counts["asked"] += len(plan.items)
        counts["skipped"] += plan.done_docs
        hashes = [prompt_hash(item.request.prompt) for item in plan.items]

        def on_result(i: int, result: GenResult) -> None:
            samples = samples_for(plan.items[i], result, hashes[i])
            for s in samples:
                writer.append(s)
            n_err = sum(1 for s in samples if s["error"])
            counts["stored"] += len(samples)
            counts["errors"] += n_err
            bar.update(len(samples), result.n_generated, n_err)

        if plan.items:
            backend.generate([gen_request(it.request, spec.max_new_tokens) for it in plan.items], on_result)

    try:
        ask(first)
        for batch in batches:
            ask(batch)
    except BaseException:
        writer.close()  # every completed sample is already on disk; a re-run resumes
        batches.close()  # and the document builders stop
        raise
    finally:
        bar.close()
        long_context_base.SHOW_PROGRESS = shown
    extra = after_generate() if after_generate else None
    summary = writer.finish(extra) if extra else writer.finish()
    return RunOutcome(
        out_dir=Path(spec.out_dir),
        summary=summary,
        asked=counts["asked"],
        stored=counts["stored"],
        errors=counts["errors"],
        skipped=counts["skipped"],
        tokens_per_s=bar.tokens_per_s,
        wall_s=time.perf_counter() - t0,
    )
