"""Ask a backend every pending request and store each answer the moment it arrives.

A result with `error` is stored with its message and no `correct` (never scored as wrong);
a scoring failure is stored the same way, so no question is ever lost.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.backends.base import Backend, GenRequest, GenResult, generate_fed
from evalkit.runner.latency import LatencyLog
from evalkit.runner.plan import Plan, WorkItem, build_plan
from evalkit.runner.progress import RunProgress, estimate_prompt_tokens, progress_mode
from evalkit.runner.prompt_ids import same_tokenizer
from evalkit.runner.sampling import COUPLED, UNCOUPLED, SamplingSpec
from evalkit.runner.stream import PlanFeed, start_build
from evalkit.store.schema import Sample


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
    gold_logprob: bool = False  # also score each question's reference answer (evalkit.backends.gold)
    # shared between runs of the same questions (the sweep's arms): each task's requests built once
    request_cache: dict[str, Any] | None = None
    store_prompts: bool = True  # the prompt text in samples.jsonl (prompt_hash is always there)
    # hand each long-context prompt to the backend as soon as it is built (`evalkit.runner.stream`);
    # False: build every prompt first (the samples are the same)
    stream: bool = True
    manifest: dict[str, Any] = field(default_factory=dict)  # model, arm, command, ...
    allow_source_change: bool = False  # resume a run made by other code (recorded in the manifest)
    sampling: SamplingSpec | None = None  # None: greedy (one sample per question)


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
    prompt_tokens_per_s: float = 0.0
    latency: dict[str, Any] = field(default_factory=dict)  # this invocation's requests: LatencyLog.summary()
    latency_line: str = ""


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


def gen_budget(req: Any, cap: int | None) -> int:
    """The tokens a request may generate: the task's budget, under a --max-new-tokens cap."""
    return req.max_new_tokens if cap is None else min(req.max_new_tokens, cap)


def gen_request(req: Any, cap: int | None, gold: bool = False, ids: bool = False) -> GenRequest:
    """The backend's request; with `gold`, a one-question request carries its reference answer;
    with `ids`, the prompt's token ids where the task has them (`evalkit.runner.prompt_ids`)."""
    n = gen_budget(req, cap)
    answer = getattr(req.docs[0], "gold", None) if gold and len(req.docs) == 1 else None
    return GenRequest(
        prompt=req.prompt,
        max_new_tokens=n,
        stop=list(req.until or []),
        gold=answer,
        prompt_ids=getattr(req, "prompt_ids", None) if ids else None,
    )


def coupling(backend: Any) -> str:
    """Whether two arms of this backend given the same seeds draw coupled samples: the local
    engine's sampler does; a server says so itself (`sampling_coupling`), else it is unknown."""
    says = getattr(backend, "sampling_coupling", None)
    if says is not None:
        return says()
    return COUPLED if getattr(backend, "name", None) == "local" else UNCOUPLED


def _base_sample(item: WorkItem, doc: Any, result: GenResult, prompt_hash: str) -> Sample:
    return Sample(
        task=item.task.name,
        doc_id=doc.doc_id,
        length=item.request.length,
        prompt_hash=prompt_hash,
        prompt=item.request.prompt,
        target=doc.target,
        response=result.text,
        error=result.error,
        n_generated=result.n_generated,
        finish_reason=result.finish_reason,
        flags=list(result.flags),
        timings=dict(result.timings),
        generated_ids=result.token_ids,
        state_max_abs=result.state_max_abs,
        state_nonfinite=result.state_nonfinite,
        sample=item.sample,
        extra={
            **(result.gold.sample_fields() if result.gold is not None else {}),
            **({"meta": item.request.meta} if item.request.meta else {}),
        },
    )


def samples_for(item: WorkItem, result: GenResult, prompt_hash: str) -> list[Sample]:
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
                sample.error = "scoring returned no result for this doc"
            else:
                sample.correct, sample.extracted, sample.score = (
                    dict(s.correct),
                    dict(s.extracted),
                    dict(s.score),
                )
                if s.item_correct is not None:
                    sample.item_correct = [bool(x) for x in s.item_correct]
        out.append(sample)
    return out


def _token_counter(tokenizer: Any) -> Any:
    """A TokenizerView for sizing prompts in the progress, or None (then characters/4)."""
    if tokenizer is None:
        return None
    from evalkit.tasks.tokenizer import TokenizerView

    return TokenizerView(tokenizer)


def run_evaluation(
    spec: RunSpec, backend: Backend, tokenizer: Any, *, progress: bool = True, after_generate: Any = None
) -> RunOutcome:
    """Plan, generate, store, summarise. `after_generate()` may return manifest additions."""
    from evalkit.store import RunWriter
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
    manifest["gold_logprob"] = spec.gold_logprob
    if spec.sampling is not None:  # greedy manifests stay as they were
        manifest["sampling"] = spec.sampling.describe(coupling(backend))

    from evalkit.tasks.data import recording_sources, source_identity

    requests_by_task = {}
    streamed: list[tuple[str, Any, list[Any], Any]] = []  # (cache key, build, its outlines, data)
    building_bars = progress_mode(progress) == "bar"  # only on a terminal (they flood CI logs)
    # only a backend that takes requests while it works gains; the others get the list as before
    stream = spec.stream and hasattr(backend, "generate_stream")
    for t in tasks:
        key = (
            json.dumps(
                [t.name, t.config(), lengths[t.name], spec.limit, spec.seed, spec.data_dir],
                sort_keys=True,
                default=str,
            )
            + f"|chat={spec.apply_chat_template}"
        )
        cache = spec.request_cache if spec.request_cache is not None else {}
        if key in cache:  # (requests, the data they read): arms of a sweep share both
            requests_by_task[t.name], data = cache[key]
        else:
            options: dict[str, Any] = dict(
                lengths=lengths[t.name],
                limit=spec.limit,
                seed=spec.seed,
                data_dir=spec.data_dir,
                apply_chat_template=spec.apply_chat_template,
            )
            with recording_sources() as read:
                # streamed: planned from outlines, each request built while the engine works
                started = start_build(t, tokenizer, **options) if stream else None
                built, build = started or (
                    t.requests(tokenizer=tokenizer, show_progress=building_bars, **options),
                    None,
                )
            requests_by_task[t.name], data = built, source_identity(read)
            if build is None:
                cache[key] = (built, data)
            else:
                streamed.append((key, build, built, data))
        if data is not None:  # part of the task's identity: resume refuses other data
            manifest["tasks"][t.name]["data"] = data

    try:
        writer = RunWriter.open(
            spec.out_dir, manifest, resume=True, allow_source_change=spec.allow_source_change
        )
        k = spec.sampling.samples if spec.sampling is not None else None
        plan: Plan = build_plan(tasks, requests_by_task, set(writer.done_keys), k)
        feed_builds = [(build, outlines) for _, build, outlines, _ in streamed]
        bar, counts, latency = _ask(spec, plan, feed_builds, backend, tokenizer, writer, manifest, progress)
        if spec.request_cache is not None:  # the next arm asks the same questions
            for key, build, _, data in streamed:
                spec.request_cache[key] = (build.requests(), data)
    finally:
        for _, build, _, _ in streamed:
            build.close()  # no worker process outlives the run, however it ends
    extra = after_generate() if after_generate else None
    summary = writer.finish(extra, metrics={t.name: list(t.metrics) for t in tasks})
    return RunOutcome(
        out_dir=Path(spec.out_dir),
        summary=summary,
        asked=len(plan.items),
        stored=counts["stored"],
        errors=counts["errors"],
        skipped=plan.done_docs,
        tokens_per_s=bar.tokens_per_s,
        prompt_tokens_per_s=bar.prompt_tokens_per_s,
        wall_s=time.perf_counter() - t0,
        latency=latency.summary(),
        latency_line=latency.line(),
    )


def _ask(
    spec: RunSpec,
    plan: Plan,
    builds: list[tuple[Any, list[Any]]],
    backend: Backend,
    tokenizer: Any,
    writer: Any,
    manifest: dict[str, Any],
    progress: bool,
) -> tuple[RunProgress, dict[str, int], LatencyLog]:
    """Ask the backend every planned request (those of `builds` as they are built) and store each
    result as it arrives; (the progress, the counts stored and errored, the requests' latencies)."""
    from evalkit.store import prompt_hash

    ids = same_tokenizer(tokenizer, backend)
    budgets = [gen_budget(it.request, spec.max_new_tokens) for it in plan.items]
    view = _token_counter(tokenizer)
    est_prompt = [estimate_prompt_tokens(it.request.prompt, it.request.length, view) for it in plan.items]
    bar = RunProgress(
        plan.total_docs,
        plan.done_docs,
        enabled=progress,
        desc=f"{manifest.get('arm', {}).get('label', 'run')}",
        prompt_tokens=est_prompt,
        gen_budgets=budgets,
    )
    if hasattr(backend, "step_observer"):  # the local engine reports prefill/decode steps live
        backend.step_observer = bar.observe_step
    hashes: dict[int, str] = {}
    counts = {"stored": 0, "errors": 0}
    latency = LatencyLog()

    def make(k: int) -> GenRequest:  # when request k is handed out: its prompt is built by then
        item = plan.items[k]
        req = item.request
        hashes[k] = prompt_hash(req.prompt)
        # the reference answer's log-probability is one per question: measured with sample 0
        gold = spec.gold_logprob and not item.sample
        out = gen_request(req, spec.max_new_tokens, gold, ids)
        if spec.sampling is not None:
            docs = [d.doc_id for d in req.docs]
            out.sampling = spec.sampling.request(item.task.name, docs, req.length, item.sample or 0)
        return out

    def on_result(i: int, result: GenResult) -> None:
        samples = samples_for(plan.items[i], result, hashes[i])
        for s in samples:
            if not spec.store_prompts:
                s.prompt = None
            writer.append(s.to_record())
        n_err = sum(1 for s in samples if s.error)
        if not result.error:
            latency.add(result.timings)
        counts["stored"] += len(samples)
        counts["errors"] += n_err
        bar.update(
            len(samples),
            result.n_generated,
            n_err,
            prompt_tokens=result.n_prompt,
            estimated_prompt=est_prompt[i],
            budget=budgets[i],
        )

    try:
        generate_fed(backend, PlanFeed.for_plan(plan.items, builds, make), on_result)
    except BaseException:
        writer.close()  # every completed sample is already on disk; a re-run resumes
        raise
    finally:
        bar.close()
    return bar, counts, latency
