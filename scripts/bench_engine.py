#!/usr/bin/env python
"""Benchmark of evalkit's in-process engine at the real Kimi-Linear-48B-A3B size on one H200.

    python scripts/bench_engine.py --out results/bench            # bounded: ~8 min (--budget-s)
    python scripts/bench_engine.py --out results/bench --quick    # ~4 min
    python scripts/bench_engine.py --out /tmp/b --arch tiny --device cpu --quick   # smoke test on CPU

Random bf16 weights are made directly on the GPU (no checkpoint on disk, ~98 GB). Parts, each in
its own try/except (a failure is recorded and the next part runs), each checking the time left:
1. calibration: a short fp32 run measures prefill tokens/s and the decode step time; the number of
   prompts for the arms is the requested one (--prompts, default 1319) or fewer if the budget
   would be exceeded (the report then also gives the extrapolation to 1319);
2. arms fp32 / fp16 / bf16: a GSM8K-shaped workload (prompts of ~900 random tokens, 256 generated
   tokens, EOS ignored): wall time, prefill and decode tokens/s, peak memory, max batch, flags;
3. batch invariance on the GPU (fp32, max batch 32 vs 5: identical tokens and bit-identical
   log-likelihoods; the same requests twice) and what invariance costs (a non-invariant run);
4. capacity: per arm, the state bytes per sequence and the most concurrent sequences at 32k and
   128k context (`evalkit.engine.capacity`), each checked by allocating the pools and timing
   decode steps with every slot at that context (the throughput the format buys);
5. one 128k-token prompt (chunked prefill) + 16 decode tokens;
6. transformers' KimiLinearForCausalLM.generate over the same weight tensors (hf_bridge), on a
   small batch, scaled to the whole workload; the floor is the arithmetic bound below.
On request (--parts): profile (kernel times of one prefill forward and one decode step, by
category) and fused (the engine's tokens and loglikelihoods with the fused elementwise kernels
against the torch forms).
Writes bench_engine.json and bench_engine.md to --out.
"""

from __future__ import annotations

import os

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
try:
    from evalkit.bench import engine_floor, harness
except ImportError:  # a checkout that is not installed (the GPU image)
    sys.path.insert(0, str(REPO))
    from evalkit.bench import engine_floor, harness

CLOCK = harness.Clock(timer=time.perf_counter)
T0 = CLOCK.t0
log = harness.Log(CLOCK, prefix="bench ")
ARMS = ["fp32", "fp16", "bf16"]
GSM8K_N = 1319

TINY_CONFIG = {
    "model_type": "kimi_linear",
    "architectures": ["KimiLinearForCausalLM"],
    "vocab_size": 512,
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "intermediate_size": 256,
    "moe_intermediate_size": 64,
    "num_experts": 4,
    "num_experts_per_token": 2,
    "num_shared_experts": 1,
    "num_attention_heads": 2,
    "kv_lora_rank": 32,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16,
    "v_head_dim": 32,
    "eos_token_id": 2,
    "bos_token_id": 1,
    "pad_token_id": 0,
    "linear_attn_config": {
        "full_attn_layers": [4],
        "kda_layers": [1, 2, 3],
        "num_heads": 2,
        "head_dim": 32,
        "short_conv_kernel_size": 4,
    },
}


def bootstrap_evalkit() -> None:
    """Import evalkit from this checkout when it is not installed (the GPU image): `kernels/`
    becomes `evalkit.kernels`, as setup.py maps it."""
    harness.import_checkout()


def cuda(dev: torch.device) -> bool:
    return dev.type == "cuda"


def sync(dev: torch.device) -> None:
    if cuda(dev):
        torch.cuda.synchronize(dev)


def gib(n: float) -> float:
    return round(n / 2**30, 2)


def free_memory(dev: torch.device) -> None:
    gc.collect()
    if cuda(dev):
        torch.cuda.empty_cache()


def spread(xs: list[float], digits: int = 4) -> dict:
    """Median, range and every repeat: a benchmark row shows its spread, not only its middle."""
    rounded = [round(x, digits) for x in xs]
    return {
        "median": round(statistics.median(xs), digits),
        "min": min(rounded),
        "max": max(rounded),
        "all": rounded,
    }


def report_header(dev: torch.device, args: argparse.Namespace) -> dict:
    """What every benchmark report starts with: the command, its arguments, the tree and the device."""
    return {
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "args": vars(args),
        "git": harness.git_state(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "device_name": torch.cuda.get_device_name(dev) if cuda(dev) else "cpu",
        "torch": torch.__version__,
    }


def token_range(vocab: int) -> tuple[int, int]:
    """[lo, hi) of the benchmark's random tokens: clear of the lowest (special) ids, inside the vocabulary."""
    hi = min(vocab, 160000)
    return min(1000, hi // 4), hi


def make_prompts(n: int, vocab: int, mean: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    spread = max(mean // 18, 1)
    lens = torch.randint(mean - spread, mean + spread + 1, (n,), generator=g).tolist()
    lo, hi = token_range(vocab)
    return [torch.randint(lo, hi, (k,), generator=g).tolist() for k in lens]


def device_floor_scale(args, loaded, dev, report) -> engine_floor.FloorScale | None:
    """The floor scaled to this model's layers and this GPU's measured GEMM and copy rates (None on
    the CPU); recorded in the report."""
    if not cuda(dev) or args.arch != "real":
        return None
    try:
        gemm, copy = engine_floor.measure_rates(dev)
    except Exception as exc:  # noqa: BLE001 -- the arms run without it; the anchors' floor stays
        report["device_floor"] = {"error": f"{type(exc).__name__}: {exc}"}
        free_memory(dev)
        return None
    scale = engine_floor.FloorScale(engine_floor.param_shares(loaded.arch.num_hidden_layers), gemm, copy)
    report["device_floor"] = {
        "gemm_tflops": round(gemm, 1),
        "copy_tbps": round(copy, 3),
        "active_share": round(scale.shares.active, 4),
        "streamed_share": round(scale.shares.streamed, 4),
        "prefill_scale": round(scale.prefill, 4),
        "decode_scale": round(scale.decode, 4),
    }
    log(f"device floor: {report['device_floor']}")
    return scale


# --------------------------------------------------------------------------------- parts
def build_model(args, dev):
    from evalkit.model import LoadedModel, kimi_linear_48b_config, parse_config, random_model

    # --layers (where a script offers it): the 48B model's first N layers, for a GPU that cannot hold 27
    raw = kimi_linear_48b_config(getattr(args, "layers", None) or 27) if args.arch == "real" else TINY_CONFIG
    arch = parse_config(raw)
    dtype = torch.bfloat16 if cuda(dev) else torch.float32
    t = time.perf_counter()
    lm = random_model(arch, dev, dtype, seed=0, std=0.02 if args.arch == "real" else 0.08)
    sync(dev)
    n_params = sum(p.numel() for p in lm.parameters())
    info = {
        "layers": arch.num_hidden_layers,
        "params_b": round(n_params / 1e9, 3),
        "dtype": str(dtype),
        "init_s": round(time.perf_counter() - t, 1),
    }
    if cuda(dev):
        info["weights_gib"] = gib(torch.cuda.memory_allocated(dev))
    log(f"random model: {info}")
    return LoadedModel(lm, arch, None, Path(f"random-{args.arch}"), raw), info


def engine_kwargs(args, dev, max_len: int) -> dict:
    from evalkit.kernel_choice import parse_kernels

    kw = dict(
        device=str(dev), max_model_len=max_len, max_num_seqs=args.max_seqs, decode_width=args.decode_width
    )
    kw["kernels"] = parse_kernels(getattr(args, "kernels", ""))
    if cuda(dev):
        kw.update(max_num_batched_tokens=args.prefill_tokens, prefill_chunk_size=args.prefill_chunk)
    return kw


def timed_generate(engine, prompts, new_tokens: int, dev, tqdm: bool = True) -> tuple[dict, list]:
    """The harness's timed row (its one home) in this script's schema: prompt and generated token
    counts, health flags counted per prompt, the engine's batch limit beside the batch reached."""
    from evalkit.engine import SamplingParams

    sampling = SamplingParams(max_new_tokens=new_tokens, ignore_eos=True)
    outs, row = harness.timed_engine_row(engine, prompts, sampling, str(dev), use_tqdm=tqdm)
    flags: dict[str, int] = {}
    for o in outs:
        for f in o.flags:
            flags[f] = flags.get(f, 0) + 1
    res = {"prompts": len(prompts), "prompt_tokens": row["prefill_tokens"]}
    res["generated_tokens"] = sum(o.n_generated for o in outs)
    for key in ("wall_s", "prefill_s", "decode_s", "prefill_tok_s", "decode_tok_s", "decode_steps"):
        res[key] = row[key]
    res |= {"decode_step_ms": row["decode_step_ms"], "max_batch": row["max_batch"]}
    res |= {"max_num_seqs": engine.config.max_num_seqs, "flags": flags}
    if "peak_mem_gib" in row:
        res["peak_mem_gib"] = row["peak_mem_gib"]
    return res, outs


def warm(engine, prompts, dev) -> None:
    """Compile this pool dtype's kernels outside the timed region."""
    from evalkit.engine import SamplingParams

    engine.generate(prompts[:2], SamplingParams(max_new_tokens=3, ignore_eos=True), use_tqdm=False)
    sync(dev)


def extrapolate(res: dict, n_full: int, new_tokens: int) -> float:
    """Wall time of n_full prompts from a run of res['prompts']: prefill scales with the prompts,
    decode with the number of waves of max_num_seqs sequences."""
    n = res["prompts"]
    waves, waves_full = math.ceil(n / res["max_num_seqs"]), math.ceil(n_full / res["max_num_seqs"])
    other = max(res["wall_s"] - res["prefill_s"] - res["decode_s"], 0.0)
    return res["prefill_s"] * n_full / n + res["decode_s"] * waves_full / waves + other * n_full / n


def part_arms(args, loaded, dev, budget, report) -> None:
    from evalkit.engine import LLMEngine

    prompts_all = make_prompts(args.prompts, loaded.arch.vocab_size, args.prompt_len, seed=0)
    max_len = max(len(p) for p in prompts_all) + args.new_tokens + 8
    kw = engine_kwargs(args, dev, max_len)

    scale = device_floor_scale(args, loaded, dev, report)
    # 1. calibration on the fp32 engine (kept for the fp32 arm)
    t = time.perf_counter()
    eng = LLMEngine(loaded, state_dtype="fp32", **kw)
    report["engine_init_s"] = round(time.perf_counter() - t, 1)
    report["describe"] = {"fp32": eng.describe()}
    warm(eng, prompts_all, dev)
    # one full wave: a smaller batch under-reads the prefill rate (64 prompts gave 10-13k tok/s on
    # the H200 against 24-25k in the arms) and so shrank the workload below what the budget held
    n_cal = min(len(prompts_all), max(8, args.max_seqs))
    cal, _ = timed_generate(eng, prompts_all[:n_cal], min(16, args.new_tokens), dev, tqdm=False)
    report["calibration"] = cal
    log(f"calibration: {cal}")
    prefill_rate = max(cal["prefill_tok_s"], 1)
    step_s = cal["decode_step_ms"] / 1000

    max_seqs = eng.config.max_num_seqs

    def predict(n: int) -> float:
        waves = math.ceil(n / max_seqs)
        return n * args.prompt_len / prefill_rate + waves * args.new_tokens * step_s * 1.15

    arms_budget = budget.left() - args.reserve_s
    n = len(prompts_all)
    while not args.keep_prompts and n > 16 and len(ARMS) * predict(n) > arms_budget:
        n = int(n * 0.8)
    report["arms_prompts"] = n
    report["arms_predicted_s_each"] = round(predict(n), 1)
    log(f"arms: {n} prompts each (requested {len(prompts_all)}), predicted {predict(n):.0f} s per arm")
    prompts = prompts_all[:n]
    results = report.setdefault("arms", {})

    def drop(engine) -> None:
        try:
            if engine is not None:
                engine.close()
        except Exception:  # noqa: BLE001 -- a broken engine must not stop the next arm
            pass
        free_memory(dev)

    for arm in ARMS:
        try:
            if arm != "fp32" or eng is None:
                drop(eng)
                eng = None
                eng = LLMEngine(loaded, state_dtype=arm, **kw)
                report["describe"][arm] = eng.describe()
                warm(eng, prompts, dev)
            log(f"arm {arm}: {n} prompts x {args.new_tokens} tokens, max_num_seqs {eng.config.max_num_seqs}")
            res, _ = timed_generate(eng, prompts, args.new_tokens, dev)
            res["extrapolated_1319_s"] = round(extrapolate(res, GSM8K_N, args.new_tokens), 1)
            res["floor_s"] = round(engine_floor.floor_seconds(n, args.prompt_len, args.new_tokens), 1)
            res["x_floor"] = round(res["wall_s"] / res["floor_s"], 2)
            if scale is not None:
                device_floor = engine_floor.floor_seconds(n, args.prompt_len, args.new_tokens, scale)
                res["device_floor_s"] = round(device_floor, 1)
                res["x_device_floor"] = round(res["wall_s"] / device_floor, 2)
            results[arm] = res
            log(f"arm {arm}: {res}")
            with (Path(args.out) / "arms_progress.jsonl").open("a") as f:  # kept if a later arm is cut
                f.write(json.dumps({"arm": arm, **res}) + "\n")
        except Exception as exc:  # noqa: BLE001
            results[arm] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-3000:]}
            log(f"arm {arm} FAILED: {exc}")
            drop(eng)
            eng = None
    drop(eng)


def part_invariance(args, loaded, dev, budget, report) -> None:
    from evalkit.engine import LLMEngine, SamplingParams

    if budget.left() < 60:
        report["invariance"] = {"skipped": "no time left"}
        return
    prompts = make_prompts(32, loaded.arch.vocab_size, 300, seed=1)
    max_len = 400 + 64
    kw = engine_kwargs(args, dev, max_len)
    sp = SamplingParams(max_new_tokens=48, ignore_eos=True)
    out = {}
    big = LLMEngine(loaded, state_dtype="fp32", **{**kw, "max_num_seqs": 32})
    a = big.generate(prompts, sp, use_tqdm=False)
    a2 = big.generate(prompts, sp, use_tqdm=False)
    pairs = [(p[:200], p[200:]) for p in prompts[:16]]
    la = big.loglikelihood(pairs)
    big.close()
    small = LLMEngine(loaded, state_dtype="fp32", **{**kw, "max_num_seqs": 5})
    b = small.generate(prompts, sp, use_tqdm=False)
    lb = small.loglikelihood(pairs)
    small.close()
    out["same_requests_twice_identical"] = [o.token_ids for o in a] == [o.token_ids for o in a2]
    out["batch_32_vs_5_identical_tokens"] = [o.token_ids for o in a] == [o.token_ids for o in b]
    out["batch_32_vs_5_bitwise_loglikelihood"] = la == lb
    out["max_abs_loglik_diff"] = max(abs(x[0] - y[0]) for x, y in zip(la, lb))
    out["first_divergence"] = next(
        (i for i, (x, y) in enumerate(zip(a, b)) if x.token_ids != y.token_ids), None
    )
    log(f"invariance: {out}")
    # what invariance costs: the same workload with and without it
    if budget.left() > 90:
        n = min(256, args.max_seqs)
        prompts = make_prompts(n, loaded.arch.vocab_size, args.prompt_len, seed=2)
        kw = engine_kwargs(args, dev, args.prompt_len + 200)
        cost = {}
        for mode in (True, False):
            eng = LLMEngine(loaded, state_dtype="fp32", **{**kw, "batch_invariant": mode})
            warm(eng, prompts, dev)
            res, _ = timed_generate(eng, prompts, 64, dev, tqdm=False)
            cost["invariant" if mode else "not_invariant"] = res
            eng.close()
            free_memory(dev)
        cost["slowdown"] = round(cost["invariant"]["wall_s"] / max(cost["not_invariant"]["wall_s"], 1e-9), 3)
        out["cost"] = cost
        log(f"invariance cost: x{cost['slowdown']}")
    report["invariance"] = out


def part_fused(args, loaded, dev, budget, report) -> None:
    """What the fused elementwise kernels (evalkit.model.layers.fused) change in the engine's output:
    the same 32 prompts (48 greedy tokens) and 16 loglikelihood pairs with them and with the torch
    forms, fp32 pool. Their roundings are torch's; RMSNorm's sum of squares runs in its own order,
    so a few elements differ in the last bit. The control is another last-bit change of the same
    size: the MoE combine's torch form against its fused kernel (both with the torch elementwise
    forms), which shows how far this model carries such a difference."""
    from evalkit.engine import LLMEngine, SamplingParams

    if budget.left() < 60:
        report["fused"] = {"skipped": "no time left"}
        return
    prompts = make_prompts(32, loaded.arch.vocab_size, 300, seed=1)
    pairs = [(p[:200], p[200:]) for p in prompts[:16]]
    kw = {**engine_kwargs(args, dev, 400 + 64), "max_num_seqs": 32}
    base = kw.pop("kernels")  # --kernels, with the two switches this part compares set per engine
    sp = SamplingParams(max_new_tokens=48, ignore_eos=True)

    def outputs(fused_on: bool, moe_combine: str):
        kernels = dataclasses.replace(base, fused_elementwise=fused_on, moe_combine=moe_combine)
        eng = LLMEngine(loaded, state_dtype="fp32", kernels=kernels, **kw)
        try:
            return [o.token_ids for o in eng.generate(prompts, sp, use_tqdm=False)], eng.loglikelihood(pairs)
        finally:
            eng.close()
            free_memory(dev)

    def compare(a, b) -> dict:
        (ta, la), (tb, lb) = a, b
        return {
            "identical_sequences": sum(x == y for x, y in zip(ta, tb)),
            "sequences": len(ta),
            "first_divergence_per_sequence": [
                next((i for i, (x, y) in enumerate(zip(s, t)) if x != y), None) for s, t in zip(ta, tb)
            ],
            "max_abs_loglik_diff": max(abs(x[0] - y[0]) for x, y in zip(la, lb)),
            "max_rel_loglik_diff": max(abs(x[0] - y[0]) / max(abs(y[0]), 1e-30) for x, y in zip(la, lb)),
            "bitwise_loglikelihood": la == lb,
        }

    torch_forms = outputs(False, "fused")
    out = {
        "fused_vs_torch_forms": compare(outputs(True, "fused"), torch_forms),
        "control_moe_combine_torch_vs_fused": compare(outputs(False, "torch"), torch_forms),
    }
    log(f"fused vs torch forms, and the control: {out}")
    report["fused"] = out


def part_capacity(args, loaded, dev, budget, report) -> None:
    """Per arm and context: the state bytes per sequence, the most sequences that fit in the pools'
    budget (`evalkit.engine.capacity`, what `evalkit run` records), and the decode throughput with
    every one of those slots at that context (median of --capacity-steps eager steps)."""
    import statistics

    from evalkit.engine import EngineConfig, LLMEngine, SamplingParams, Sequence
    from evalkit.engine.capacity import plan_capacity
    from evalkit.engine.memory import gpu_pool_budget

    out = {}
    contexts = [int(x) for x in args.capacity_contexts.split(",")]
    for arm in args.arms.split(","):
        for ctx in contexts:
            key = f"{arm}@{ctx}"
            try:
                kw = {**engine_kwargs(args, dev, ctx + 64), "batch_invariant": False, "enforce_eager": True}
                cfg = EngineConfig().with_options(**kw, state_dtype=arm)
                cfg = cfg.resolved(loaded.arch.max_position_embeddings)
                pool_budget = gpu_pool_budget(loaded.arch, cfg, dev) if cuda(dev) else 2 << 30
                cap = plan_capacity(
                    loaded.arch,
                    cfg.state_format.name,
                    cfg.state_format.pool_dtype,
                    loaded.model.dtype,
                    cfg.block_size,
                    pool_budget,
                    (ctx,),
                )
                n = cap.max_sequences(ctx)
                row = {
                    "max_concurrent": n,
                    "pool_budget_gib": gib(pool_budget),
                    "state_bytes_per_sequence": cap.state_bytes_per_sequence,
                    "bytes_per_sequence": cap.bytes_per_sequence(ctx),
                }
                if args.verify_capacity and n > 0 and budget.left() > 45 and not (ctx > 8192 and args.quick):
                    t = time.perf_counter()
                    eng = LLMEngine(
                        loaded,
                        state_dtype=arm,
                        **{**kw, "max_num_seqs": n, "kv_cache_tokens": n * (ctx + 64), "decode_width": n},
                    )
                    seqs = []
                    for _ in range(n):  # every slot holds a context of ctx tokens (cache contents: zeros)
                        s = Sequence([1] * (ctx + 1), SamplingParams(max_new_tokens=1))
                        eng.runner.attach(s, ctx + 1)
                        s.num_computed = ctx
                        seqs.append(s)
                    sync(dev)
                    setup_s = time.perf_counter() - t
                    steps = []
                    for _ in range(max(args.capacity_steps, 1) + 1):  # the first step warms up, untimed
                        for s in seqs:  # the same step again: every slot back at ctx tokens
                            s.num_computed = ctx
                        t1 = time.perf_counter()
                        eng.runner.decode(seqs)
                        sync(dev)
                        steps.append(time.perf_counter() - t1)
                    steps = steps[1:]
                    med = statistics.median(steps)
                    row.update(
                        verified=True,
                        decode_step_s=round(med, 4),
                        decode_step_s_min=round(min(steps), 4),
                        decode_step_s_max=round(max(steps), 4),
                        decode_steps_timed=len(steps),
                        decode_tok_s=round(n / med, 1),
                        setup_s=round(setup_s, 1),
                    )
                    if cuda(dev):
                        row["mem_allocated_gib"] = gib(torch.cuda.memory_allocated(dev))
                    for s in seqs:
                        eng.runner.detach(s)
                    eng.close()
                    del eng, seqs
                    free_memory(dev)
                out[key] = row
                log(f"capacity {key}: {row}")
            except Exception as exc:  # noqa: BLE001
                out[key] = {"error": f"{type(exc).__name__}: {exc}"}
                log(f"capacity {key} FAILED: {exc}")
                eng = seqs = None  # a failed row's pools must not shrink the next row's budget
                free_memory(dev)
    report["capacity"] = out


def part_long(args, loaded, dev, budget, report) -> None:
    from evalkit.engine import LLMEngine

    if args.quick or budget.left() < 90:
        report["long_128k"] = {"skipped": "quick mode or no time left"}
        return
    L = args.long_len
    prompt = make_prompts(1, loaded.arch.vocab_size, L, seed=3)[0][:L]
    eng = LLMEngine(
        loaded,
        state_dtype="fp32",
        **{
            **engine_kwargs(args, dev, L + 64),
            "max_num_seqs": 2,
            "decode_width": 1,
            "batch_invariant": False,
        },
    )
    res, outs = timed_generate(eng, [prompt], 16, dev, tqdm=False)
    eng.close()
    free_memory(dev)
    res["prompt_len"] = len(prompt)
    res["finish_reason"] = outs[0].finish_reason
    report["long_128k"] = res
    log(f"128k prompt: {res}")


def part_profile(args, loaded, dev, budget, report) -> None:
    """Where the arms' GPU time goes: kernel times of one full prefill forward (--prefill-tokens
    of ~900-token prompts) and of decode steps at --max-seqs sequences, fp32 pool, by category."""
    from evalkit.bench.kernel_profile import profile_kernels
    from evalkit.engine import LLMEngine, SamplingParams
    from evalkit.engine.sequence import Sequence

    if budget.left() < 60:
        report["profile"] = {"skipped": "no time left"}
        return
    on_gpu = cuda(dev)  # on the CPU: operators' self time, a check of this part only
    out: dict = {}
    n_pre = max(1, args.prefill_tokens // args.prompt_len)
    pre_prompts = make_prompts(4 * n_pre, loaded.arch.vocab_size, args.prompt_len, seed=7)
    dec_prompts = make_prompts(args.max_seqs, loaded.arch.vocab_size, 64, seed=8)
    eng = LLMEngine(loaded, state_dtype="fp32", **engine_kwargs(args, dev, args.prompt_len * 2 + 64))
    runner, params = eng.runner, SamplingParams(max_new_tokens=1, ignore_eos=True)
    batches = iter([pre_prompts[i : i + n_pre] for i in range(0, len(pre_prompts), n_pre)])

    def one_prefill() -> None:
        seqs = []
        for p in next(batches):
            s = Sequence(p, params)
            runner.attach(s, len(p) + 8)
            seqs.append(s)
        runner.prefill([(s, s.n_prompt) for s in seqs])
        for s in seqs:
            runner.detach(s)

    one_prefill()  # compiles
    sync(dev)
    t = time.perf_counter()
    one_prefill()
    sync(dev)
    wall = time.perf_counter() - t
    tab = profile_kernels(one_prefill, n_runs=1, cuda=on_gpu)
    tokens = sum(len(p) for p in pre_prompts[:n_pre])
    tab.meta = {
        "what": "one prefill forward",
        "sequences": n_pre,
        "tokens": tokens,
        "wall_ms": round(1e3 * wall, 1),
    }
    out["prefill"] = tab.to_dict()
    log(f"profile prefill: {out['prefill']['categories']}")

    seqs = []
    for p in dec_prompts:
        s = Sequence(p, params)
        runner.attach(s, len(p) + 32)
        seqs.append(s)
    step = max(1, args.prefill_tokens // 64)
    for i in range(0, len(seqs), step):
        runner.prefill([(s, s.n_prompt) for s in seqs[i : i + step]])
    if on_gpu:
        runner.capture_graphs([runner.decode_width(len(seqs))])

    # each sequence its own next token, as in the arms: one token for all would give every row the
    # same input embedding and so a less even routing over the experts than a real batch's
    g_next = torch.Generator().manual_seed(9)
    lo, hi = token_range(loaded.arch.vocab_size)

    def one_decode() -> None:
        nxt = torch.randint(lo, hi, (len(seqs),), generator=g_next)
        for s, t in zip(seqs, nxt.tolist()):
            s.token_ids.append(t)
        runner.decode(seqs, copy_logits=False)  # as the engine's decode step reads them

    for _ in range(2):
        one_decode()
    sync(dev)
    t = time.perf_counter()
    for _ in range(5):
        one_decode()
    sync(dev)
    wall = (time.perf_counter() - t) / 5
    tab = profile_kernels(one_decode, n_runs=5, cuda=on_gpu)
    tab.meta = {
        "what": "one decode step",
        "sequences": len(seqs),
        "context": 64,
        "wall_ms": round(1e3 * wall, 2),
    }
    out["decode"] = tab.to_dict()
    log(f"profile decode: {out['decode']['categories']}")
    for s in seqs:
        runner.detach(s)
    eng.close()
    free_memory(dev)
    report["profile"] = out


def part_transformers(args, loaded, dev, budget, report) -> None:
    """transformers' generate over the engine's weight tensors at each batch size of --hf-batches
    (ascending; a size that runs out of memory ends the sweep); the fastest estimated whole
    workload is the peer the arms are compared with."""
    from evalkit.model.hf_bridge import transformers_model

    if budget.left() < 60:
        report["transformers"] = {"skipped": "no time left"}
        return
    fla_version = None
    try:
        import fla

        fla_version = getattr(fla, "__version__", "yes")
    except ImportError:
        pass
    hf = transformers_model(loaded.model)
    new = args.hf_new_tokens
    kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)

    def gen(x, n):
        sync(dev)
        t = time.perf_counter()
        with torch.inference_mode():
            y = hf.generate(x, max_new_tokens=n, min_new_tokens=n, **kw)
        sync(dev)
        return time.perf_counter() - t, y

    sweep = []
    first = None
    for B in sorted(int(b) for b in str(args.hf_batches).split(",")):
        if budget.left() < 45:
            sweep.append({"batch": B, "skipped": "no time left"})
            break
        prompts = make_prompts(B, loaded.arch.vocab_size, args.prompt_len, seed=4)
        L = min(len(p) for p in prompts)
        ids = torch.tensor([p[:L] for p in prompts], device=dev)
        out: dict = {"batch": B, "prompt_len": L, "new_tokens": new, "fla": fla_version}
        if cuda(dev):
            torch.cuda.reset_peak_memory_stats(dev)  # each batch size's own peak
        try:
            # FLA autotunes per shape: warm up at the measured batch shape, prefill and decode both (a
            # one-row warm-up left the autotuning inside the timed prefill and made its decode step < 0)
            out["warmup_s"] = round(gen(ids, 2)[0], 1)
            t1, _ = gen(ids, 1)
            tn, y = gen(ids, new)
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            # FLA's Triton launches report an exhausted device as a RuntimeError, not an OOM
            if not isinstance(exc, torch.OutOfMemoryError) and "out of memory" not in str(exc).lower():
                raise
            out["error"] = f"out of memory: {str(exc).splitlines()[0][:200]}"
            sweep.append(out)
            free_memory(dev)
            log(f"transformers batch {B}: out of memory; the sweep stops here")
            break
        step = max(tn - t1, 1e-9) / max(new - 1, 1)
        out.update(
            prefill_plus_1_s=round(t1, 2),
            generate_s=round(tn, 2),
            decode_step_s=round(step, 4),
            prefill_tok_s=round(B * L / t1),
            decode_tok_s=round(B / step),
            # the whole workload at this batch size
            estimated_1319_s=round(math.ceil(GSM8K_N / B) * (t1 + (args.new_tokens - 1) * step), 1),
        )
        if cuda(dev):
            out["peak_mem_gib"] = gib(torch.cuda.max_memory_allocated(dev))
        sweep.append(out)
        report["transformers"] = {"partial": True, "sweep": sweep}  # kept if a later batch size fails
        log(f"transformers batch {B}: {out}")
        if first is None:
            first = (prompts, L, y)
        del y
        free_memory(dev)
    done = [r for r in sweep if "estimated_1319_s" in r]
    if not done:
        report["transformers"] = {"error": "no batch size ran", "sweep": sweep}
        return
    best = dict(min(done, key=lambda r: r["estimated_1319_s"]))
    best["sweep"] = sweep
    # same weights, same greedy tokens? (bf16 numerics differ, so only the first tokens are expected to agree)
    from evalkit.engine import LLMEngine, SamplingParams

    prompts, L, y = first
    eng = LLMEngine(
        loaded, state_dtype="fp32", **{**engine_kwargs(args, dev, L + new + 8), "max_num_seqs": len(prompts)}
    )
    mine = eng.generate(
        [p[:L] for p in prompts], SamplingParams(max_new_tokens=new, ignore_eos=True), use_tqdm=False
    )
    eng.close()
    agree = []
    for a, b in zip(mine, y[:, L:].tolist()):
        agree.append(next((i for i, (u, v) in enumerate(zip(a.token_ids, b)) if u != v), len(b)))
    best["greedy_prefix_agreement_tokens"] = agree
    hf = None  # noqa: F841 -- drop transformers' module tree (the weights belong to the engine model)
    free_memory(dev)
    report["transformers"] = best
    log(f"transformers fastest: batch {best['batch']}, {best['estimated_1319_s']} s for the workload")


# --------------------------------------------------------------------------------- report
ARM_COLUMNS = (
    "arm", "wall s", "prefill tok/s", "decode tok/s", "decode step ms", "peak GiB", "max batch",
    "floor s", "x floor", "device floor s", "x device floor", "est. 1319 prompts s", "flags",
)  # fmt: skip


def write_markdown(report: dict, path: Path) -> None:
    L = [
        f"# Engine benchmark ({report.get('arch')}, {report.get('device_name')})",
        "",
        f"Command: `{report.get('command')}`  ",
        f"Date: {report.get('date')}; total {report.get('total_s')} s",
        "",
    ]
    m = report.get("model", {})
    L.append(
        f"Model: random weights, {m.get('params_b')} B parameters, {m.get('dtype')}, "
        f"{m.get('weights_gib')} GiB on the device."
    )
    L.append("")
    arms = report.get("arms", {})
    if arms:
        n, a = report.get("arms_prompts"), report["args"]
        L += [
            f"## GSM8K-shaped workload: {n} prompts x ~{report['args']['prompt_len']} tokens, "
            f"{report['args']['new_tokens']} generated, EOS ignored",
            "",
            "| " + " | ".join(ARM_COLUMNS) + " |",
            "|" + "---|" * len(ARM_COLUMNS),
        ]
        for arm, r in arms.items():
            if "error" in r:  # the error in the second cell, the rest left empty
                L.append(f"| {arm} | error: {r['error'][:80]} |" + "|" * (len(ARM_COLUMNS) - 2))
                continue
            # Both floors side by side: on a cut model (--layers) the anchors' 27-layer floor
            # flatters the ratio, and only the device floor is the like-for-like one.
            L.append(
                f"| {arm} | {r['wall_s']} | {r['prefill_tok_s']:,} | {r['decode_tok_s']:,} | "
                f"{r['decode_step_ms']} | {r.get('peak_mem_gib')} | {r['max_batch']} | {r['floor_s']} | "
                f"{r['x_floor']} | {r.get('device_floor_s', '-')} | {r.get('x_device_floor', '-')} | "
                f"{r['extrapolated_1319_s']} | {r['flags'] or '-'} |"
            )
        L += [
            "",
            "Floor (anchors.md, the 27-layer model on an H200): "
            f"{engine_floor.floor_seconds(GSM8K_N, a['prompt_len'], a['new_tokens']):.1f} s for 1319 "
            "prompts; per row: prompt tokens / "
            f"{engine_floor.FLOOR_PREFILL_TOK_S:,} tok/s + waves of {engine_floor.FLOOR_WAVE} x new tokens x "
            f"{engine_floor.FLOOR_DECODE_STEP_S * 1000:.0f} ms.",
            "",
        ]
        fl = report.get("device_floor")
        if fl and "gemm_tflops" in fl:
            L += [
                f"Device floor ({m.get('layers')} layers on this GPU: an 8192^3 bf16 product at "
                f"{fl['gemm_tflops']} TFLOP/s and a 4 GiB copy at {fl['copy_tbps']} TB/s measured here): the "
                f"anchors' prefill term x {fl['prefill_scale']}, decode term x {fl['decode_scale']}.",
                "",
            ]
        elif fl and "error" in fl:
            L += [f"Device floor not measured ({fl['error'][:160]}): the anchors' floor only.", ""]
    hf = report.get("transformers", {})
    if hf and "generate_s" in hf:
        L += [
            "## transformers (same weight tensors)",
            "",
            f"KimiLinearForCausalLM.generate, batch {hf['batch']} x {hf['prompt_len']} tokens, "
            f"{hf['new_tokens']} new (FLA: {hf.get('fla')}): prefill {hf['prefill_tok_s']:,} tok/s, "
            f"decode {hf['decode_tok_s']:,} tok/s; "
            f"whole workload at this batch ~{hf['estimated_1319_s']} s.",
            "",
        ]
        for arm, r in arms.items():
            if "extrapolated_1319_s" in r:
                L.append(
                    f"- {arm}: x{hf['estimated_1319_s'] / max(r['extrapolated_1319_s'], 1e-9):.1f} faster "
                    f"than transformers (1319 prompts, estimated both)"
                )
        L.append(
            f"- greedy prefix agreement (engine fp32 state vs transformers, tokens): "
            f"{hf.get('greedy_prefix_agreement_tokens')}"
        )
        if len(hf.get("sweep", [])) > 1:
            L += ["", "| batch | prefill tok/s | decode tok/s | decode step s | est. 1319 prompts s | note |",
                  "|---:|---:|---:|---:|---:|---|"]  # fmt: skip
            for r in hf["sweep"]:
                L.append(
                    f"| {r['batch']} | {r.get('prefill_tok_s', '-')} | {r.get('decode_tok_s', '-')} | "
                    f"{r.get('decode_step_s', '-')} | {r.get('estimated_1319_s', '-')} | "
                    f"{r.get('error', r.get('skipped', ''))} |"
                )
        L.append("")
    elif hf:
        L += ["## transformers", "", f"{hf}", ""]
    inv = report.get("invariance", {})
    if inv:
        L += ["## Batch invariance (fp32 arm)", ""]
        for k, v in inv.items():
            if k == "cost":
                L.append(
                    f"- cost: invariant {v['invariant']['wall_s']} s vs not {v['not_invariant']['wall_s']} s "
                    f"(x{v['slowdown']}) on {v['invariant']['prompts']} prompts x 64 tokens"
                )
            else:
                L.append(f"- {k}: {v}")
        L.append("")
    cap = report.get("capacity", {})
    if cap:
        L += [
            "## The benefit side: state bytes, sequences that fit, decode throughput at that concurrency",
            "",
            "| arm @ context | state MB / seq | total MB / seq | max concurrent "
            "| decode step s (median, min-max) | tok/s |",
            "|---|---|---|---|---|---|",
        ]
        for k, v in cap.items():
            if "error" in v:
                L.append(f"| {k} | error: {v['error']} | | | | |")
                continue
            step = "-"
            if "decode_step_s" in v:
                step = f"{v['decode_step_s']} ({v['decode_step_s_min']}-{v['decode_step_s_max']})"
            L.append(
                f"| {k} | {v['state_bytes_per_sequence'] / 1e6:.1f} | {v['bytes_per_sequence'] / 1e6:.1f} | "
                f"{v['max_concurrent']} | {step} | {v.get('decode_tok_s', '-')} |"
            )
        L.append("")
    prof = report.get("profile", {})
    if "prefill" in prof or "decode" in prof:
        from evalkit.bench.kernel_profile import from_report, markdown

        L += ["## Where the GPU time goes (torch.profiler, fp32 pool; categories as of this code)", ""]
        for key, title in (("prefill", "Prefill forward"), ("decode", "Decode step")):
            if key in prof:
                L += markdown(from_report(prof[key]).to_dict(), title)
    lg = report.get("long_128k", {})
    if lg:
        L += ["## One long prompt", "", f"{lg}", ""]
    errs = {k: v for k, v in report.get("errors", {}).items()}
    if errs:
        L += ["## Errors", ""] + [f"- {k}: {v.splitlines()[-1] if v else v}" for k, v in errs.items()] + [""]
    path.write_text("\n".join(L))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="fewer prompts/tokens, skip the 128k parts (~4 min)")
    ap.add_argument(
        "--prompts", type=int, default=None, help=f"prompts per arm (default {GSM8K_N}; quick 256)"
    )
    ap.add_argument("--new-tokens", type=int, default=None, help="generated tokens (default 256; quick 128)")
    ap.add_argument("--prompt-len", type=int, default=900)
    ap.add_argument("--max-seqs", type=int, default=512)
    ap.add_argument("--decode-width", type=int, default=512)
    ap.add_argument("--prefill-tokens", type=int, default=16384, help="tokens per prefill forward")
    ap.add_argument(
        "--prefill-chunk",
        type=int,
        default=2048,
        help="store points: a prompt is cut at multiples of this (default: the arm's, what evalkit run uses)",
    )
    ap.add_argument("--long-len", type=int, default=131072)
    ap.add_argument(
        "--hf-batches",
        default="8",
        help="transformers batch sizes to sweep, comma-separated (8); the fastest is kept",
    )
    ap.add_argument("--hf-new-tokens", type=int, default=32)
    ap.add_argument("--budget-s", type=float, default=480.0, help="stop starting new parts after this")
    ap.add_argument("--reserve-s", type=float, default=None, help="time kept for the parts after the arms")
    ap.add_argument(
        "--keep-prompts",
        action="store_true",
        help="run every requested prompt in each arm even where the calibration predicts the budget "
        "will not hold them (each finished arm is appended to arms_progress.jsonl)",
    )
    ap.add_argument("--arch", choices=["real", "tiny"], default="real")
    ap.add_argument(
        "--layers",
        type=int,
        default=None,
        help="the 48B model's first N layers (default 27; fewer where a GPU cannot hold it); the rows' "
        "device floor scales with them",
    )
    ap.add_argument("--device", default=None)
    ap.add_argument(
        "--kernels",
        default="",
        help="numerics switches for the engines of the arms, capacity and long parts, in evalkit's "
        "--kernels syntax (e.g. moe_decode=triton; default: the engine's defaults)",
    )
    ap.add_argument("--parts", default="arms,invariance,capacity,long,transformers")
    ap.add_argument("--arms", default=",".join(ARMS), help="state arms of the arms part (default all three)")
    ap.add_argument("--capacity-contexts", default="32768,131072", help="contexts of the capacity part")
    ap.add_argument("--capacity-steps", type=int, default=5, help="timed decode steps per capacity row")
    ap.add_argument("--no-verify-capacity", dest="verify_capacity", action="store_false")
    ap.add_argument(
        "--rewrite-report",
        metavar="JSON",
        help="write an earlier report's Markdown again (this code's profile categories); run nothing",
    )
    args = ap.parse_args()
    if args.rewrite_report:
        src = Path(args.rewrite_report)
        old = json.loads(src.read_text())
        bootstrap_evalkit()
        write_markdown(old, src.with_suffix(".md"))
        log(f"rewrote {src.with_suffix('.md')}")
        return 0
    ARMS[:] = [a.strip() for a in args.arms.split(",") if a.strip()]
    if args.prompts is None:
        args.prompts = 256 if args.quick else GSM8K_N
    if args.new_tokens is None:
        args.new_tokens = 128 if args.quick else 256
    if args.quick:
        args.hf_batches, args.hf_new_tokens = "4", min(args.hf_new_tokens, 16)
    if args.reserve_s is None:
        args.reserve_s = 150.0 if args.quick else 220.0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if cuda(dev) and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    budget = harness.Budget(args.budget_s, CLOCK)
    report: dict = {
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "args": vars(args),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "arch": args.arch,
        "errors": {},
        "device_name": torch.cuda.get_device_name(dev) if cuda(dev) else platform.processor() or "cpu",
        "libraries": {"torch": torch.__version__, "python": platform.python_version()},
    }
    for mod in ("triton", "transformers"):
        try:
            report["libraries"][mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            report["libraries"][mod] = None

    def save():
        report["total_s"] = round(time.perf_counter() - T0, 1)
        (out / "bench_engine.json").write_text(json.dumps(report, indent=2, default=str))
        write_markdown(report, out / "bench_engine.md")

    bootstrap_evalkit()
    try:
        loaded, report["model"] = build_model(args, dev)
    except Exception:  # noqa: BLE001
        report["errors"]["model"] = traceback.format_exc()
        save()
        log("could not build the model")
        return 1
    parts = {
        "arms": part_arms,
        "invariance": part_invariance,
        "capacity": part_capacity,
        "long": part_long,
        "transformers": part_transformers,
        "profile": part_profile,
        "fused": part_fused,
    }
    sections = harness.Sections(
        report, save, budget, log, timings_key=None, traceback_chars=4000, on_error=lambda: free_memory(dev)
    )
    for name in args.parts.split(","):
        sections.run(name, lambda name=name: parts[name](args, loaded, dev, budget, report))
    save()
    log(f"wrote {out / 'bench_engine.json'} and {out / 'bench_engine.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
