"""CPU prefill speed of the reference model: the per-token loop it replaced against the chunked
KDA prefill (kernels/kda_prefill/cpu_chunked.py), at 1 and 2 torch threads.

    python scripts/bench_cpu_prefill.py --out results/bench/cpu [--lengths 2048,8192] [--repeats 3]

Times one engine prefill of a prompt (median of --repeats, with min and max; the CPU engine cuts a
prompt into 256-token prefill calls) and the KDA op alone on the first KDA layer's inputs for the
whole prompt as one call. Writes prefill.json and prefill.md under --out. Not a test: the
numbers depend on the machine and its load, which the note records (load average)."""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from evalkit.kernels import cpu
from evalkit.kernels.kda_decode.cpu import prepare, step
from evalkit.reference_model import default_model_path

F32 = torch.float32


def token_loop_prefill(q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, cu_seqlens,
                       has_initial_state, *, chunk_size=64, intra_chunk_dtype=None):  # fmt: skip
    """The CPU prefill before the chunked form (one `step` per token), kept here as the baseline."""
    qn, kn, vv, g, beta = prepare(q, k, v, g_raw, beta_raw, A_log, dt_bias)
    decay = torch.exp(g)
    cu = cu_seqlens.long()
    lens = cu[1:] - cu[:-1]
    order = torch.argsort(lens, descending=True, stable=True)
    lens_sorted, starts = lens[order], cu[:-1][order]
    idx = slots.long()[order]
    S = state_pool[idx].to(F32)
    S[~has_initial_state.bool()[order]] = 0.0
    o = torch.empty(q.shape[0], q.shape[1], v.shape[-1], dtype=F32)
    for t in range(int(lens_sorted[0]) if lens_sorted.numel() else 0):
        n = int((lens_sorted > t).sum())
        rows = starts[:n] + t
        o[rows] = step(S[:n], qn[rows], kn[rows], vv[rows], decay[rows], beta[rows])
    state_pool[idx] = S.to(state_pool.dtype)
    return o.to(q.dtype)


def _whole_prompt(calls: list) -> tuple[tuple, dict]:
    """One layer's inputs over the whole prompt, as one sequence: the engine prefills a CPU prompt
    in 256-token pieces, so its calls for that layer are concatenated (same layer parameters)."""
    a0, kw = calls[0]
    rows = [torch.cat([c[0][i] for c in calls]) for i in range(5)]  # q, k, v, g_raw, beta_raw
    pool = torch.zeros(1, *a0[7].shape[1:], dtype=a0[7].dtype)
    T = rows[0].shape[0]
    one = (torch.tensor([0]), torch.tensor([0, T], dtype=torch.int32), torch.tensor([False]))
    return (*rows, a0[5], a0[6], pool, *one), kw


def _timed(fn, repeats: int) -> dict:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "n": repeats}


def _vcs() -> tuple[str, bool]:
    """(commit, whether the tree has changes), taken before anything is written."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True).stdout)
    return commit, dirty


def _write(out: Path, rows: list[dict], repeats: int, vcs: tuple[str, bool]) -> None:
    """prefill.json and prefill.md with the rows so far (rewritten after every row)."""
    commit, dirty = vcs
    meta = {
        "command": " ".join(["python", *sys.argv]),
        "git_commit": commit,
        "dirty_tree": dirty,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "load_average_at_end": os.getloadavg(),
        "torch": torch.__version__,
        "model": "evalkit reference model (4 KDA layers, H=4, K=V=64), fp32 state",
    }
    (out / "prefill.json").write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")
    lines = ["| prompt tokens | threads | impl | KDA op, first layer, whole prompt (s) | engine prefill (s) "
             "| prompt tok/s |",
             "|---:|---:|---|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        op, full = r["kda_op_layer0"], r["engine_prefill"]
        lines.append(
            f"| {r['length']} | {r['threads']} | {r['impl']} | {op['median_s']:.3f} "
            f"[{op['min_s']:.3f}, {op['max_s']:.3f}] | {full['median_s']:.3f} "
            f"[{full['min_s']:.3f}, {full['max_s']:.3f}] | {r['length'] / full['median_s']:.0f} |"
        )
    note = [
        "# CPU prefill: per-token loop vs chunked KDA prefill",
        "",
        f"`{meta['command']}` at {commit[:10]}{' (dirty tree)' if dirty else ''}; {meta['machine']}, "
        f"load average at the end {', '.join(f'{x:.1f}' for x in meta['load_average_at_end'])}.",
        f"Median of {repeats} repeats [min, max].",
        "",
        *lines,
        "",
    ]
    (out / "prefill.md").write_text("\n".join(note))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--lengths", default="2048,8192")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    vcs = _vcs()
    from evalkit.engine import LLMEngine, SamplingParams

    engine = LLMEngine(str(default_model_path()), device="cpu", state_dtype="fp32", max_num_seqs=1)
    text = Path(__file__).read_text() * 200
    ids = engine.tokenizer(text)["input_ids"]
    params = SamplingParams(max_new_tokens=1, ignore_eos=True)
    captured: dict = {}
    chunked = cpu.kda_prefill

    def capture(*a, **kw):
        captured.setdefault(id(a[5]), []).append((a, kw))  # by layer (its A_log parameter)
        return chunked(*a, **kw)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for length in [int(x) for x in args.lengths.split(",")]:
        prompt = ids[:length]
        if len(prompt) < length:
            raise SystemExit(f"prompt text too short for {length} tokens")
        captured.clear()
        cpu.kda_prefill = capture
        engine.generate([prompt], params, use_tqdm=False)
        a, kw = _whole_prompt(next(iter(captured.values())))
        for threads in [int(x) for x in args.threads.split(",")]:
            torch.set_num_threads(threads)
            for name, impl in (("token_loop", token_loop_prefill), ("chunked", chunked)):
                cpu.kda_prefill = impl
                pool = torch.zeros_like(a[7])
                op = _timed(functools.partial(impl, *a[:7], pool, *a[8:], **kw), args.repeats)
                full = _timed(
                    functools.partial(engine.generate, [prompt], params, use_tqdm=False), args.repeats
                )
                rows.append({"length": length, "threads": threads, "impl": name,
                             "kda_op_layer0": op, "engine_prefill": full})  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
                _write(out, rows, args.repeats, vcs)
        cpu.kda_prefill = chunked
    return 0


if __name__ == "__main__":
    sys.exit(main())
