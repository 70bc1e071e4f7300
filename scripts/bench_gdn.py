# ruff: noqa: E501
"""Gated DeltaNet on one GPU: evalkit's KDA kernels with a GDN gate vs FLA's GDN kernels, and a real-size
random-weights Qwen3.5 / Qwen3-Next engine run in every arm.

    python scripts/bench_gdn.py --out results/bench-gdn            # ~6 minutes on an H200

Sections (each in try/except; JSON + Markdown rewritten after every section):
  1. correctness: ours (GDN gate through as_kda_gate, q/k expanded to the value heads) vs the float64
     reference, per pool dtype; FLA's fused_recurrent_gated_delta_rule / chunk_gated_delta_rule vs the same
  2. copy bandwidth (4 GiB fp32 copy_)
  3. decode: Hv in {32, 48} value heads over Hk=16 key heads, K=V=128, B in {1, 8, 32, 128, 512}, pools
     fp32/fp16/bf16 (CUDA-graph timings): ours (slot pool, in place) vs FLA fused_recurrent_gated_delta_rule
     (its native grouped heads; fp32 state read from and written to contiguous [B, Hv, K, V] tensors);
     state bandwidth 2*B*Hv*K*V*bytes / time, as a fraction of copy bandwidth
  4. prefill: B=1, Hv=32, T in {4k, 32k, 128k}: ours vs FLA chunk_gated_delta_rule
  5. engine: random weights at real size (--engine-arch, default qwen3.5-35b-a3b: 34.7B params, 65 GiB bf16),
     every arm (fp32, fp16, bf16) on the same prompts: prefill / decode throughput, peak memory, greedy
     token agreement with the fp32 arm, health flags
`--smoke` runs every section on the CPU (Triton interpreter, tiny shapes, a tiny random model, no FLA): it
tests the script, its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))  # bench_kernels finds evalkit (installed or this checkout)

import bench_kernels as bk  # noqa: E402  (timing helpers, environment, section runner)

HK, HVS, K, V = 16, [32, 48], 128, 128
DECODE_B = [1, 8, 32, 128, 512]
PREFILL_T = [4096, 32768, 131072]
POOLS = ["fp32", "fp16", "bf16"]
ENGINE = {"prompts": 64, "prompt_len": 2048, "new_tokens": 256}
DEV = "cuda"
SMOKE = False


def smoke_mode() -> None:
    global HK, HVS, K, V, DECODE_B, PREFILL_T, DEV, SMOKE, ENGINE
    HK, HVS, K, V, DECODE_B, PREFILL_T, DEV, SMOKE = 1, [2], 16, 16, [1, 4], [70], "cpu", True
    ENGINE = {"prompts": 3, "prompt_len": 40, "new_tokens": 4}
    bk.smoke_mode()


# ------------------------------------------------------------------------------------ inputs
def gdn_inputs(n: int, Hv: int, dtype, gen=None):
    """GDN layer inputs for n rows: q, k [n, Hk, K]; v [n, Hv, V]; a, b [n, Hv]; A_log, dt_bias [Hv]."""
    import torch

    f = dict(device=DEV, generator=gen)
    q, k = torch.randn(n, HK, K, **f).to(dtype), torch.randn(n, HK, K, **f).to(dtype)
    v = torch.randn(n, Hv, V, **f).to(dtype)
    a = (torch.randn(n, Hv, **f) * 2 - 1).to(dtype)
    b = torch.randn(n, Hv, **f).to(dtype)
    A_log = torch.rand(Hv, **f).mul(3).add(0.5).log()
    dt_bias = torch.randn(Hv, **f) * 0.5
    return q, k, v, a, b, A_log, dt_bias


def ours_args(q, k, v, a, b, A_log, dt_bias):
    """The KDA kernels' arguments for GDN inputs (what GatedDeltaNet.forward hands them)."""
    from evalkit.model.qwen3_next.gdn import as_kda_gate

    r = v.shape[1] // q.shape[1]
    g_raw, dt = as_kda_gate(a, dt_bias, K)
    return (q.repeat_interleave(r, 1), k.repeat_interleave(r, 1), v, g_raw, b, A_log, dt)


def fla_gate(a, b, A_log, dt_bias):
    """FLA takes the log decay g and beta already applied."""
    import torch
    import torch.nn.functional as F

    g = -A_log.float().exp() * F.softplus(a.float() + dt_bias.float())
    return g, torch.sigmoid(b.float()).to(b.dtype)


# ------------------------------------------------------------------------------------ sections
def sec_correctness() -> dict:
    import torch

    from evalkit.kernels import STATE_DTYPES, kda_decode, kda_prefill, reference
    from evalkit.kernels.testing import random_cu_seqlens, random_pool

    out = {}
    Hv = HVS[0]
    gen = torch.Generator(device=DEV).manual_seed(0)
    for name, dt in STATE_DTYPES.items():  # decode, bf16 inputs
        x = gdn_inputs(4, Hv, torch.bfloat16, gen)
        pool = random_pool(9, Hv, K, V, dt, device=DEV, generator=gen)
        slots = torch.tensor([7, 0, 3, 5], dtype=torch.int32, device=DEV)
        pool_ref = pool.double().cpu()
        o = kda_decode(*ours_args(*x), pool, slots)
        o_ref = reference.kda_decode(*(t.float().cpu() for t in ours_args(*x)), pool_ref, slots.cpu())
        idx = slots.long().cpu()
        out[f"decode_{name}"] = {"out_rel_err_bf16_output": bk.rel_err(o, o_ref),
                                 "pool_rel_err": bk.rel_err(pool.cpu()[idx], pool_ref[idx])}  # fmt: skip
    lengths = [200, 1, 77]  # prefill, fp32 inputs
    x = gdn_inputs(sum(lengths), Hv, torch.float32, gen)
    cu = random_cu_seqlens(lengths, device=DEV)
    init = torch.tensor([True, False, True], device=DEV)
    for name in ("fp32", "bf16"):
        pool = random_pool(5, Hv, K, V, STATE_DTYPES[name], device=DEV, generator=gen)
        slots = torch.tensor([4, 0, 2], dtype=torch.int32, device=DEV)
        pool_ref = pool.double().cpu()
        o = kda_prefill(*ours_args(*x), pool, slots, cu, init)
        o_ref = reference.kda_prefill(
            *(t.cpu() for t in ours_args(*x)), pool_ref, slots.cpu(), cu.cpu(), init.cpu()
        )
        idx = slots.long().cpu()
        out[f"prefill_{name}"] = {"out_rel_err": bk.rel_err(o, o_ref),
                                  "pool_rel_err": bk.rel_err(pool.cpu()[idx], pool_ref[idx])}  # fmt: skip
    try:  # FLA on the first sequence (fp32 inputs, zero initial state) vs the same reference
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

        q, k, v, a, b, A_log, dt_bias = (t[:200] if t.dim() > 1 else t for t in x)
        g, beta = fla_gate(a, b, A_log, dt_bias)
        pr = torch.zeros(1, Hv, K, V, dtype=torch.float64)
        o1 = reference.kda_prefill(*(t.cpu() for t in ours_args(q, k, v, a, b, A_log, dt_bias)), pr,
                                   torch.tensor([0]), random_cu_seqlens([200]), torch.tensor([False]))  # fmt: skip
        for label, fn in (
            ("fla_chunk", chunk_gated_delta_rule),
            ("fla_fused_recurrent", fused_recurrent_gated_delta_rule),
        ):
            with torch.inference_mode():
                o_f, ht = fn(q=q[None], k=k[None], v=v[None], g=g[None], beta=beta[None], scale=K**-0.5,
                             initial_state=torch.zeros(1, Hv, K, V, device=DEV), output_final_state=True,
                             use_qk_l2norm_in_kernel=True)  # fmt: skip
            out[label] = {"out_rel_err": bk.rel_err(o_f[0], o1), "state_rel_err": bk.rel_err(ht[0], pr[0])}
    except Exception as exc:
        out["fla"] = f"unavailable: {type(exc).__name__}: {str(exc)[:300]}"
    return out


def sec_decode(res: dict) -> dict:
    import torch

    from evalkit.kernels import STATE_DTYPES
    from evalkit.kernels.kda_decode.wrapper import kda_decode
    from evalkit.kernels.testing import random_pool

    copy_tbps = res["sections"].get("copy", {}).get("TBps")
    rows = []
    for Hv in HVS:
        for B in DECODE_B:
            x = gdn_inputs(B, Hv, torch.bfloat16)
            args = ours_args(*x)
            for name in POOLS:
                row = {"Hv": Hv, "B": B, "pool": name}
                S = 2 * B + 8
                pool = random_pool(S, Hv, K, V, STATE_DTYPES[name], device=DEV)
                slots = torch.randperm(S, device=DEV)[:B].to(torch.int32)
                cases = {"ours": lambda args=args, pool=pool, slots=slots: kda_decode(*args, pool, slots),
                         "ours_incl_expand": lambda x=x, pool=pool, slots=slots: kda_decode(*ours_args(*x), pool, slots)}  # fmt: skip
                state_bytes = 2 * B * Hv * K * V * STATE_DTYPES[name].itemsize  # read and written
                if name == "fp32":  # FLA keeps an fp32 state only
                    try:
                        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

                        q, k, v, a, b, A_log, dt_bias = x
                        g, beta = fla_gate(a, b, A_log, dt_bias)
                        h0 = pool[:B].clone()
                        cases["fla"] = lambda q=q, k=k, v=v, g=g, beta=beta, h0=h0: fused_recurrent_gated_delta_rule(
                            q=q[:, None], k=k[:, None], v=v[:, None], g=g[:, None], beta=beta[:, None],
                            scale=K**-0.5, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True)  # fmt: skip
                    except Exception as exc:
                        row["fla_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                bk.time_graph_cases(row, cases, state_bytes, copy_tbps)
                rows.append(row)
                bk.log_row("decode", row)
    return {"Hk": HK, "Hv": HVS, "K": K, "V": V, "model_dtype": "bf16", "rows": rows}


def sec_prefill() -> dict:
    import torch

    from evalkit.kernels.kda_prefill.wrapper import kda_prefill
    from evalkit.kernels.testing import random_cu_seqlens

    Hv = HVS[0]
    rows = []
    for T in PREFILL_T:
        row = {"T": T, "Hv": Hv}
        x = gdn_inputs(T, Hv, torch.bfloat16)
        pool = torch.zeros(1, Hv, K, V, device=DEV)
        slot = torch.zeros(1, dtype=torch.int32, device=DEV)
        init = torch.ones(1, dtype=torch.bool, device=DEV)
        cu = random_cu_seqlens([T], device=DEV)
        args = (*ours_args(*x), pool, slot, cu, init)
        tail = (pool, slot, cu, init)
        cases = {"ours": lambda args=args: kda_prefill(*args),
                 "ours_incl_expand": lambda x=x, tail=tail: kda_prefill(*ours_args(*x), *tail)}  # fmt: skip
        try:
            from fla.ops.gated_delta_rule import chunk_gated_delta_rule

            q, k, v, a, b, A_log, dt_bias = x
            g, beta = fla_gate(a, b, A_log, dt_bias)
            h0 = torch.zeros(1, Hv, K, V, device=DEV)
            fla_in = {"q": q[None], "k": k[None], "v": v[None], "g": g[None], "beta": beta[None]}
            cases["fla"] = lambda fla_in=fla_in, h0=h0: chunk_gated_delta_rule(
                **fla_in, scale=K**-0.5, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True)  # fmt: skip
        except Exception as exc:
            row["fla_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        bk.time_prefill_cases(row, cases, T)
        rows.append(row)
        bk.log_row("prefill", row)
        torch.cuda.empty_cache() if DEV == "cuda" else None
    return {"Hk": HK, "K": K, "V": V, "B": 1, "model_dtype": "bf16", "rows": rows}


def sec_engine(arch_name: str, num_layers: int | None) -> dict:
    """Every arm of the engine over the same random real-size model and prompts."""
    import gc

    import torch

    from evalkit.engine import LLMEngine, SamplingParams
    from evalkit.model import LoadedModel
    from evalkit.model.families import parse_any_config
    from evalkit.model.qwen3_next.random_init import random_gdn_model, real_gdn_config

    if SMOKE:
        raw = {"model_type": "qwen3_next", "vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 4,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "linear_num_key_heads": 2,
               "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
               "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
               "shared_expert_intermediate_size": 32}  # fmt: skip
    else:
        raw = real_gdn_config(arch_name, num_layers)
    arch = parse_any_config(raw)
    dtype = torch.bfloat16 if DEV == "cuda" else torch.float32
    t = time.perf_counter()
    lm = random_gdn_model(arch, DEV, dtype, seed=0)
    out = {"arch": arch_name if not SMOKE else "smoke", "config": raw, "init_s": round(time.perf_counter() - t, 1),
           "params_b": round(sum(p.numel() for p in lm.parameters()) / 1e9, 3), "arms": {}}  # fmt: skip
    if DEV == "cuda":
        out["weights_gib"] = round(torch.cuda.memory_allocated() / 2**30, 2)
    bk.log("engine model", {k_: v_ for k_, v_ in out.items() if k_ != "config"})
    loaded = LoadedModel(lm, arch, None, Path(f"random-{arch_name}"), raw)
    g = torch.Generator().manual_seed(1)
    n, L = ENGINE["prompts"], ENGINE["prompt_len"]
    prompts = [
        torch.randint(1000 % arch.vocab_size, arch.vocab_size, (L,), generator=g).tolist() for _ in range(n)
    ]
    sp = SamplingParams(max_new_tokens=ENGINE["new_tokens"], ignore_eos=True)
    tokens = {}
    for arm in POOLS:
        kw = dict(device=DEV, state_dtype=arm, max_model_len=L + ENGINE["new_tokens"] + 64, max_num_seqs=n)
        if DEV == "cuda":
            kw.update(max_num_batched_tokens=16384, decode_width=n)
        eng = LLMEngine(loaded, **kw)
        eng.generate(
            prompts[:2], SamplingParams(max_new_tokens=3, ignore_eos=True), use_tqdm=False
        )  # compile
        outs, row = bk.harness.timed_engine_row(eng, prompts, sp, DEV)
        row["state_slots"] = eng.config.max_num_seqs
        tokens[arm] = [o.token_ids for o in outs]
        if arm != "fp32":
            row.update(bk.harness.token_agreement(tokens[arm], tokens["fp32"]))
        out["arms"][arm] = row
        bk.log("engine", arm, row)
        del eng
        gc.collect()
        if DEV == "cuda":
            torch.cuda.empty_cache()
    out["workload"] = dict(ENGINE)
    return out


def _num(row: dict, key: str) -> str:
    return f"{row[key]:.2f}" if isinstance(row.get(key), float) else "–"


def markdown(res: dict) -> str:
    lines = ["# Gated DeltaNet on the GPU (scripts/bench_gdn.py)", "", f"`{res['command']}`", ""]
    sec = res["sections"]
    if "decode" in sec:
        lines += [
            "## decode (CUDA graph µs; state TB/s)",
            "",
            "| Hv | B | pool | ours µs | ours TB/s | FLA µs | speedup vs FLA |",
            "|---:|---:|---|---:|---:|---:|---:|",
        ]
        for r in sec["decode"]["rows"]:
            f = lambda k_, r=r: _num(r, k_)  # noqa: E731
            lines.append(
                f"| {r['Hv']} | {r['B']} | {r['pool']} | {f('ours_graph_us')} | {f('ours_TBps')} | {f('fla_graph_us')} | {f('speedup_vs_fla')} |"
            )
        lines.append("")
    if "prefill" in sec:
        lines += ["## prefill (ms)", "", "| T | ours ms | FLA ms | speedup vs FLA |", "|---:|---:|---:|---:|"]
        for r in sec["prefill"]["rows"]:
            f = lambda k_, r=r: _num(r, k_)  # noqa: E731
            lines.append(f"| {r['T']} | {f('ours_ms')} | {f('fla_ms')} | {f('speedup_vs_fla')} |")
        lines.append("")
    for key in sorted(k_ for k_ in sec if k_.startswith("engine")):
        e = sec[key]
        lines += [f"## {key}: {e['arch']} ({e['params_b']} B params), {e['workload']}", "",
                  "| arm | prefill tok/s | decode tok/s | peak GiB | identical vs fp32 | token agreement | flags |",
                  "|---|---:|---:|---:|---|---:|---|"]  # fmt: skip
        for arm, r in e["arms"].items():
            lines.append(f"| {arm} | {r['prefill_tok_s']} | {r['decode_tok_s']} | {r.get('peak_mem_gib', '–')} | "
                         f"{r.get('identical_generations_vs_fp32', '–')} | {r.get('mean_token_agreement_vs_fp32', '–')} | {r['flags']} |")  # fmt: skip
        lines.append("")
    if "correctness" in sec:
        lines += ["## correctness", "", "```", json.dumps(sec["correctness"], indent=1), "```", ""]
    if res["errors"]:
        lines += ["## errors", ""] + [f"- {k_}: {v_.splitlines()[0]}" for k_, v_ in res["errors"].items()]
    return "\n".join(lines) + "\n"


class Bench(bk.Bench):
    def save(self) -> None:
        self.res["elapsed_s"] = round(self.clock.elapsed(), 1)
        (self.out / "bench_gdn.json").write_text(json.dumps(self.res, indent=2, default=str))
        (self.out / "bench_gdn.md").write_text(markdown(self.res))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory for bench_gdn.json / bench_gdn.md")
    ap.add_argument("--budget-s", type=float, default=540, help="stop starting new sections after this")
    ap.add_argument("--engine-arch", default="qwen3.5-35b-a3b",
                    help="comma-separated real configs (evalkit.model.qwen3_next.random_init.REAL_CONFIGS), "
                    "each NAME or NAME:LAYERS (cut to its first LAYERS layers, e.g. qwen3-next-80b-a3b:24)")  # fmt: skip
    ap.add_argument(
        "--skip", default="", help="comma-separated sections to skip (correctness,copy,decode,prefill,engine)"
    )
    ap.add_argument("--smoke", action="store_true", help="CPU interpreter, tiny shapes: test the script only")
    args = ap.parse_args()
    if args.smoke:
        smoke_mode()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    bk.harness.import_checkout()
    b = Bench(out, args.budget_s, 0)
    skip = set(filter(None, args.skip.split(",")))
    plan = [("environment", bk.environment), ("correctness", sec_correctness), ("copy", bk.sec_copy),
            ("decode", lambda: sec_decode(b.res)), ("prefill", sec_prefill)]  # fmt: skip
    if "engine" not in skip:
        for spec in filter(None, args.engine_arch.split(",")):
            name, _, layers = spec.partition(":")
            plan.append(
                (
                    f"engine-{spec}",
                    lambda name=name, layers=layers: sec_engine(name, int(layers) if layers else None),
                )
            )
    for name, fn in plan:
        if name not in skip:
            b.section(name, fn)
    bk.log("wrote", out / "bench_gdn.json", out / "bench_gdn.md")
    return 0 if not b.res["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
