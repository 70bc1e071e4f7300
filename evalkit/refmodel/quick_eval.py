"""The end-of-training evaluation: greedy accuracy per task and length, plus the state-reset
control, from evalkit's own tasks."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.refmodel.decoder import Decoder
from evalkit.refmodel.runlog import log
from evalkit.refmodel.settings import Settings
from evalkit.refmodel.tokenizer import IM_END

if TYPE_CHECKING:
    import torch

    from evalkit.tasks.base import TaskRequest


def kda_backend() -> str:
    try:
        import fla  # noqa: F401

        return f"fla {getattr(fla, '__version__', '?')}"
    except Exception:  # noqa: BLE001
        return "torch fallback (no fla)"


# quick evaluation: evalkit's own tasks (registry, evaluation seeds, lengths fitted with the real
# tokenizer, evalkit's scoring), so the numbers are those `evalkit run` would give (fp32 state)

EVAL_TASKS = (
    "passkey",
    "copy_list",
    "register",
    "kv_recite",
    "niah_single_1",
    "niah_multikey_2",
    "vt",
    "kv_retrieval",
    "copy_list_long",
    "kv_recite_long",
)


def passkey_needle_end(fast_tok: Any, prompt: str, key: str) -> int:
    """Index of the first token after the passkey info line (where the reset control zeroes the state)."""
    info = f"The pass key is {key}. Remember it. {key} is the pass key."
    at = prompt.find(info)
    if at < 0:
        raise ValueError("passkey info line not found in the prompt")
    end = at + len(info)
    offsets = fast_tok(prompt, return_offsets_mapping=True)["offset_mapping"]
    return next(i for i, (start, stop) in enumerate(offsets) if stop > start and start >= end)


def answer_of(
    fast_tok: Any, dec: Decoder, request: TaskRequest, stop_ids: set[int], reset_at: int | None = None
) -> str:
    """Greedy response to a TaskRequest, cut at the task's stop strings."""
    ids = fast_tok(request.prompt)["input_ids"]
    text = fast_tok.decode(
        dec.generate(ids, request.max_new_tokens, stop_ids, reset_at=reset_at), skip_special_tokens=True
    )
    for stop in request.until:
        if stop and stop in text:
            text = text[: text.index(stop)]
    return text


def quick_eval(
    model_dir: Path, s: Settings, device: torch.device, deadline: float, out: Path
) -> dict[str, Any]:
    """Greedy accuracy of the saved checkpoint (reloaded in fp32) per task and length, bounded by
    `deadline` (the first cell and the reset control always get at least one doc); plus passkey
    with the state zeroed right after the needle, which should fall to ~0."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evalkit.tasks.registry import get_task

    if device.type == "cuda":  # true fp32 projections too, not TF32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    fast_tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(device).eval()
    stop = {fast_tok.eos_token_id, fast_tok.convert_tokens_to_ids(IM_END)}
    dec = Decoder(model, device)
    results: dict[str, Any] = {
        "cells": [],
        "note": "greedy, fp32 weights and state, transformers "
        f"({kda_backend()}), evalkit tasks with seed {s.eval_seed}",
    }
    try:  # fp32 through the KDA kernels; fall back to bf16 autocast if the kernels refuse fp32
        dec.generate(fast_tok("The pass key is 12345.")["input_ids"], 2, stop)
    except Exception as exc:  # noqa: BLE001
        log(f"fp32 decode failed ({type(exc).__name__}: {exc}); evaluating under bf16 autocast")
        dec.autocast_dtype = torch.bfloat16
        results["note"] += "; bf16 autocast (fp32 kernels failed)"
    first = s.eval_lengths[0]
    plan = [("passkey", first, None), ("passkey", first, "reset_after_needle")]
    plan += [(t, L, None) for L in s.eval_lengths for t in EVAL_TASKS if (t, L) != ("passkey", first)]
    for j, (name, L, control) in enumerate(plan):
        mandatory = j < 2
        if time.time() > deadline and not mandatory:
            results["cells"].append({"task": name, "length": L, "control": control, "skipped": "time budget"})
            continue
        task = get_task(name)
        metric = task.metrics[0]
        n_ok = n = 0
        fraction = 0.0  # sum of per-doc scores (fraction of items right for the decode-heavy tasks)
        examples = []
        t_cell = time.time()
        try:
            requests = task.requests(
                tokenizer=fast_tok,
                lengths=[L],
                limit=s.eval_docs,
                seed=s.eval_seed,
                show_progress=sys.stderr.isatty(),  # the training log is a file: no bars there
            )
        except Exception as exc:  # noqa: BLE001 - e.g. a length too short for the task
            log(f"eval {name}@{L}: cannot build docs: {type(exc).__name__}: {exc}")
            results["cells"].append({"task": name, "length": L, "control": control, "skipped": str(exc)})
            continue
        for req in requests:
            if time.time() > deadline and not (mandatory and n == 0):
                break
            try:
                reset_at = (
                    passkey_needle_end(fast_tok, req.prompt, req.docs[0].meta["answers"][0])
                    if control
                    else None
                )
                text = answer_of(fast_tok, dec, req, stop, reset_at)
                scored = task.score(req, text)[0]
                ok = bool(scored.correct[metric])
                fraction += scored.score.get(metric, float(ok))
            except Exception as exc:  # noqa: BLE001
                log(f"eval {name}@{L} doc {n} failed: {type(exc).__name__}: {exc}")
                break
            n += 1
            n_ok += ok
            if len(examples) < 2:
                examples.append(
                    {
                        "answers": req.docs[0].meta["answers"],
                        "response": text,
                        "prompt_tokens": req.meta.get("length"),
                    }
                )
        cell = {
            "task": name,
            "length": L,
            "control": control,
            "metric": metric,
            "n": n,
            "correct": n_ok,
            "accuracy": (n_ok / n if n else None),
            "mean_score": (fraction / n if n else None),
            "seconds": round(time.time() - t_cell, 1),
            "examples": examples,
        }
        results["cells"].append(cell)
        acc = f"{n_ok}/{n} = {n_ok / n:.0%}" if n else "n/a"
        log(f"eval {name:16s} {L:6d} {control or '':20s} {acc}")
        (out / "quick_eval.json").write_text(json.dumps(results, indent=1))
    return results
