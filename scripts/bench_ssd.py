# ruff: noqa: E501
"""Mamba2 SSD on one GPU: evalkit's SSD kernels (kernels/ssd_decode, kernels/ssd_prefill) vs FLA's
scalar-decay gated linear attention (mamba2.md §8: q = C, k = dt B, v = x, g = dt A, scale 1, D x
outside; HF's [P, N] state is FLA's state_v_first=True layout).

    python scripts/bench_ssd.py --out results/bench-ssd            # a few minutes on an H200

Sections (each in try/except; JSON + Markdown rewritten after every section):
  1. correctness: ours vs the float64 reference (decode per pool dtype, bf16 inputs; prefill fp32
     and bf16 pools, fp32 inputs); FLA's fused_recurrent_simple_gla / chunk_simple_gla (+ D x) vs the same
  2. copy bandwidth (4 GiB fp32 copy_)
  3. decode: NemotronH dims (H=128, P=64, N=128, G=8), B in {1, 8, 32, 128, 512}, pools fp32/fp16/bf16
     (CUDA-graph timings): ours (slot pool, in place, softplus and D inside) vs FLA
     fused_recurrent_simple_gla on one token (fp32 state in/out of contiguous [B, H, P, N] tensors,
     B/C expanded to heads and the gate computed outside, as FLA needs them); state bandwidth
     2*B*H*P*N*bytes / time, as a fraction of copy bandwidth
  4. prefill: B=1, T in {4k, 32k, 128k}: ours (the walk kernel, the default, and the split
     variant, `variant="split"`) vs FLA chunk_simple_gla (its inputs prepared outside,
     untimed; "fla_incl_prep" times the preparation too); each --prefill-tile BT,BP,BN,WARPS,STAGES
     is timed as "ours_<tile>" and "ours_split_<tile>" (and the walk checked in section 1 as
     "prefill_fp32_<tile>")
  5. engine (with --engine-config CONFIG.json, a NemotronH release's config; optionally cut to its
     first --engine-layers blocks): random weights at that size (evalkit.model.nemotron_h.random_init),
     every arm of --engine-arms (default fp32, fp16, bf16; also e.g. fp8_e4m3, m3-rtz) on the same prompts: prefill / decode throughput, peak memory,
     greedy token agreement with the fp32 arm, health flags
Medians of repeats (triton.testing.do_bench, return_mode="median"); ratios are FLA time / ours.
`--smoke` runs every section on the CPU (Triton interpreter, tiny shapes, no FLA): it tests the
script, its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))  # bench_kernels finds evalkit (installed or this checkout)

import bench_kernels as bk  # noqa: E402  (timing helpers, environment, section runner)

H, P, N, G = 128, 64, 128, 8
DECODE_B = [1, 8, 32, 128, 512]
PREFILL_T = [4096, 32768, 131072]
POOLS = ["fp32", "fp16", "bf16"]
CHUNK = 64
ENGINE = {"prompts": 64, "prompt_len": 2048, "new_tokens": 256}
DEV = "cuda"
SMOKE = False
EXTRA_TILES: list = []  # --prefill-tile: prefill tiles timed (and checked) beside the wrapper's own


def smoke_mode() -> None:
    global H, P, N, G, DECODE_B, PREFILL_T, DEV, SMOKE, ENGINE
    H, P, N, G, DECODE_B, PREFILL_T, DEV, SMOKE = 4, 16, 16, 2, [1, 4], [70], "cpu", True
    ENGINE = {"prompts": 3, "prompt_len": 40, "new_tokens": 4}
    bk.smoke_mode()


# ------------------------------------------------------------------------------------ inputs
def ssd_args(n: int, dtype, gen=None) -> tuple:
    from evalkit.kernels.testing import ssd_inputs

    return ssd_inputs(n, H, P, G, N, dtype=dtype, device=DEV, generator=gen)


def fla_inputs(x, dt_raw, B, C, A_log, dt_bias, D):
    """FLA's q, k, v, g [1, T, H, ...] for SSD inputs over T tokens (mamba2.md §8)."""
    import torch.nn.functional as F

    dt = F.softplus(dt_raw.float() + dt_bias.float())  # [T, H]
    r = H // G
    q = C.repeat_interleave(r, 1)
    k = (B.float().repeat_interleave(r, 1) * dt[..., None]).to(x.dtype)
    g = dt * -A_log.float().exp()
    return q[None], k[None], x[None], g[None]


def fla_fns():
    from fla.ops.simple_gla import chunk_simple_gla, fused_recurrent_simple_gla

    return chunk_simple_gla, fused_recurrent_simple_gla


# ------------------------------------------------------------------------------------ sections
def sec_correctness() -> dict:
    import torch

    from evalkit.kernels import STATE_DTYPES, reference, ssd_decode, ssd_prefill
    from evalkit.kernels.testing import random_cu_seqlens, random_pool

    out = {}
    gen = torch.Generator(device=DEV).manual_seed(0)
    for name, dt in STATE_DTYPES.items():  # decode, bf16 inputs
        x = ssd_args(4, torch.bfloat16, gen)
        pool = random_pool(9, H, P, N, dt, device=DEV, generator=gen)
        slots = torch.tensor([7, 0, 3, 5], dtype=torch.int32, device=DEV)
        pool_ref = pool.double().cpu()
        y = ssd_decode(*x, pool, slots)
        y_ref = reference.ssd_decode(*(t.cpu() for t in x), pool_ref, slots.cpu())
        idx = slots.long().cpu()
        out[f"decode_{name}"] = {"out_rel_err_bf16_output": bk.rel_err(y, y_ref),
                                 "pool_rel_err": bk.rel_err(pool.cpu()[idx], pool_ref[idx])}  # fmt: skip
    lengths = [200, 1, 77]  # prefill, fp32 inputs
    x = ssd_args(sum(lengths), torch.float32, gen)
    cu = random_cu_seqlens(lengths, device=DEV)
    init = torch.tensor([True, False, True], device=DEV)
    for name in ("fp32", "bf16"):
        pool = random_pool(5, H, P, N, STATE_DTYPES[name], device=DEV, generator=gen)
        slots = torch.tensor([4, 0, 2], dtype=torch.int32, device=DEV)
        pool_ref = pool.double().cpu()
        pool_split = pool.clone()
        y = ssd_prefill(*x, pool, slots, cu, init, chunk_size=CHUNK)
        y_ref = reference.ssd_prefill(*(t.cpu() for t in x), pool_ref, slots.cpu(), cu.cpu(), init.cpu())
        idx = slots.long().cpu()
        out[f"prefill_{name}"] = {"out_rel_err": bk.rel_err(y, y_ref),
                                  "pool_rel_err": bk.rel_err(pool.cpu()[idx], pool_ref[idx])}  # fmt: skip
        # the split variant: the same products in the same order, so the same bits are expected
        y_split = ssd_prefill(*x, pool_split, slots, cu, init, chunk_size=CHUNK, variant="split")
        out[f"prefill_{name}_split"] = {
            "out_rel_err": bk.rel_err(y_split, y_ref),
            "out_bit_equal_walk": bool(torch.equal(y_split, y)),
            "pool_bit_equal_walk": bool(torch.equal(pool_split.view(torch.uint8), pool.view(torch.uint8))),
        }
    out.update(_extra_tiles_correctness(x, cu, init, gen))
    try:  # FLA on the first sequence (fp32 inputs, zero initial state) vs the same reference
        chunk, fused = fla_fns()
        first = tuple(t[:200] if t.dim() > 1 else t for t in x)
        pr = torch.zeros(1, H, P, N, dtype=torch.float64)
        y1 = reference.ssd_prefill(*(t.cpu() for t in first), pr, torch.tensor([0]), random_cu_seqlens([200]),
                                   torch.tensor([False]))  # fmt: skip
        q, k, v, g = fla_inputs(*first)
        D = first[-1]
        for label, fn in (("fla_chunk", chunk), ("fla_fused_recurrent", fused)):
            with torch.inference_mode():
                o, ht = fn(q, k, v, g=g, scale=1.0, initial_state=torch.zeros(1, H, P, N, device=DEV),
                           output_final_state=True, state_v_first=True)  # fmt: skip
            o = o[0] + D[:, None] * first[0]
            out[label] = {"out_rel_err": bk.rel_err(o, y1), "state_rel_err": bk.rel_err(ht[0], pr[0])}
    except Exception as exc:
        out["fla"] = f"unavailable: {type(exc).__name__}: {str(exc)[:300]}"
    return out


def sec_decode(res: dict) -> dict:
    import torch

    from evalkit.kernels import STATE_DTYPES
    from evalkit.kernels.ssd_decode.wrapper import ssd_decode
    from evalkit.kernels.testing import random_pool

    copy_tbps = res["sections"].get("copy", {}).get("TBps")
    rows = []
    for B in DECODE_B:
        x = ssd_args(B, torch.bfloat16)
        for name in POOLS:
            row = {"B": B, "pool": name}
            S = 2 * B + 8
            pool = random_pool(S, H, P, N, STATE_DTYPES[name], device=DEV)
            slots = torch.randperm(S, device=DEV)[:B].to(torch.int32)
            cases = {"ours": lambda x=x, pool=pool, slots=slots: ssd_decode(*x, pool, slots)}
            state_bytes = 2 * B * H * P * N * STATE_DTYPES[name].itemsize  # read and written
            if name == "fp32":  # FLA keeps an fp32 state only
                try:
                    _, fused = fla_fns()
                    q, k, v, g = (
                        t[0][:, None] for t in fla_inputs(*x)
                    )  # [B, 1, H, ...]: B sequences of 1 token
                    h0 = pool[:B].clone()
                    cases["fla"] = lambda q=q, k=k, v=v, g=g, h0=h0, fused=fused: fused(
                        q, k, v, g=g, scale=1.0, initial_state=h0, output_final_state=True, state_v_first=True)  # fmt: skip
                except Exception as exc:
                    row["fla_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            bk.time_graph_cases(row, cases, state_bytes, copy_tbps)
            rows.append(row)
            bk.log_row("decode", row)
    return {"H": H, "P": P, "N": N, "G": G, "model_dtype": "bf16", "rows": rows}


def tile_label(t) -> str:
    return f"bt{t.bt}_bp{t.bp}_bn{t.bn}_w{t.num_warps}_s{t.num_stages}"


def parse_tile(text: str):
    from evalkit.kernels.ssd_prefill.wrapper import Tile

    try:
        return Tile(*(int(v) for v in text.split(",")))
    except (TypeError, ValueError):
        raise SystemExit(
            f"bench_ssd: --prefill-tile wants BT,BP,BN,WARPS,STAGES (5 integers), got {text!r}"
        ) from None


def _extra_tiles_correctness(x, cu, init, gen) -> dict:
    """Each --prefill-tile's prefill on an fp32 pool vs the float64 reference (the section's inputs)."""
    import torch

    from evalkit.kernels import STATE_DTYPES, reference
    from evalkit.kernels.ssd_prefill.wrapper import ssd_prefill
    from evalkit.kernels.testing import random_pool

    out = {}
    for t in EXTRA_TILES:
        pool = random_pool(5, H, P, N, STATE_DTYPES["fp32"], device=DEV, generator=gen)
        slots = torch.tensor([4, 0, 2], dtype=torch.int32, device=DEV)
        pool_ref = pool.double().cpu()
        y = ssd_prefill(*x, pool, slots, cu, init, chunk_size=CHUNK, tile=t)
        y_ref = reference.ssd_prefill(*(v.cpu() for v in x), pool_ref, slots.cpu(), cu.cpu(), init.cpu())
        idx = slots.long().cpu()
        out[f"prefill_fp32_{tile_label(t)}"] = {"out_rel_err": bk.rel_err(y, y_ref),
                                                "pool_rel_err": bk.rel_err(pool.cpu()[idx], pool_ref[idx])}  # fmt: skip
    return out


def _fla_with_prep(chunk, x, h0):
    """FLA's chunk kernel with the conversion of evalkit's inputs to its layout, done once."""
    q, k, v, g = fla_inputs(*x)
    return chunk(q, k, v, g=g, scale=1.0, initial_state=h0, output_final_state=True, state_v_first=True)


def _split_equals_walk(x, T: int) -> dict:
    """Whether the split variant's output and stored state equal the walk kernel's to the last bit
    (the wrapper's tile and each --prefill-tile), from the same non-zero incoming state."""
    import torch

    from evalkit.kernels.ssd_prefill.wrapper import ssd_prefill
    from evalkit.kernels.testing import random_cu_seqlens

    out = {}
    cu = random_cu_seqlens([T], device=DEV)
    slot = torch.zeros(1, dtype=torch.int32, device=DEV)
    init = torch.ones(1, dtype=torch.bool, device=DEV)
    start = torch.randn(1, H, P, N, device=DEV, generator=torch.Generator(device=DEV).manual_seed(1))
    for label, tile in (("", None), *((f"_{tile_label(t)}", t) for t in EXTRA_TILES)):
        try:
            runs = []
            for variant in ("walk", "split"):
                pool = start.clone()
                y = ssd_prefill(*x, pool, slot, cu, init, chunk_size=CHUNK, tile=tile, variant=variant)
                runs.append((y, pool))
            (y_w, p_w), (y_s, p_s) = runs
            out[f"split_bit_equal_walk{label}"] = bool(torch.equal(y_w, y_s) and torch.equal(p_w, p_s))
        except Exception as exc:
            out[f"split_bit_equal_walk{label}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return out


def sec_prefill() -> dict:
    import torch

    from evalkit.kernels.ssd_prefill.wrapper import ssd_prefill
    from evalkit.kernels.testing import random_cu_seqlens

    rows = []
    for T in PREFILL_T:
        row = {"T": T}
        x = ssd_args(T, torch.bfloat16)
        pool = torch.zeros(1, H, P, N, device=DEV)
        slot = torch.zeros(1, dtype=torch.int32, device=DEV)
        init = torch.ones(1, dtype=torch.bool, device=DEV)
        cu = random_cu_seqlens([T], device=DEV)
        tail = (pool, slot, cu, init)
        cases = {
            "ours": lambda x=x, tail=tail: ssd_prefill(*x, *tail, chunk_size=CHUNK),
            "ours_split": lambda x=x, tail=tail: ssd_prefill(*x, *tail, chunk_size=CHUNK, variant="split"),
        }
        for t in EXTRA_TILES:
            cases[f"ours_{tile_label(t)}"] = lambda x=x, tail=tail, t=t: ssd_prefill(
                *x, *tail, chunk_size=CHUNK, tile=t
            )
            cases[f"ours_split_{tile_label(t)}"] = lambda x=x, tail=tail, t=t: ssd_prefill(
                *x, *tail, chunk_size=CHUNK, tile=t, variant="split"
            )
        try:
            chunk, _ = fla_fns()
            q, k, v, g = fla_inputs(*x)
            h0 = torch.zeros(1, H, P, N, device=DEV)
            cases["fla"] = lambda q=q, k=k, v=v, g=g, h0=h0, chunk=chunk: chunk(
                q, k, v, g=g, scale=1.0, initial_state=h0, output_final_state=True, state_v_first=True)  # fmt: skip
            cases["fla_incl_prep"] = lambda x=x, h0=h0, chunk=chunk: _fla_with_prep(chunk, x, h0)
        except Exception as exc:
            row["fla_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        bk.time_prefill_cases(row, cases, T)
        row.update(_split_equals_walk(x, T))
        if "fla_ms" in row and "ours_split_ms" in row:
            row["split_speedup_vs_fla"] = row["fla_ms"] / row["ours_split_ms"]
        rows.append(row)
        bk.log_row("prefill", row)
        torch.cuda.empty_cache() if DEV == "cuda" else None
    return {"H": H, "P": P, "N": N, "G": G, "B": 1, "chunk": CHUNK, "model_dtype": "bf16", "rows": rows}


SMOKE_CONFIG = {"model_type": "nemotron_h", "vocab_size": 512, "hidden_size": 64, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "mamba_num_heads": 8,
                "mamba_head_dim": 16, "ssm_state_size": 16, "n_groups": 2, "n_routed_experts": 4,
                "num_experts_per_tok": 2, "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 32,
                "layers_block_type": ["linear_attention", "moe", "full_attention", "linear_attention", "mlp"]}  # fmt: skip


def _engine_model(config_path: str | None, num_layers: int | None):
    """The random NemotronH model at a release's size (or the tiny smoke config), its arch and config."""
    import time

    import torch

    from evalkit.model.families import parse_any_config
    from evalkit.model.nemotron_h.random_init import random_nemotron_h_model

    raw = dict(SMOKE_CONFIG) if config_path is None else json.loads(Path(config_path).read_text())
    if num_layers:
        blocks = raw.get("layers_block_type") or list(raw.pop("hybrid_override_pattern"))
        raw["layers_block_type"], raw["num_hidden_layers"] = blocks[:num_layers], None
    raw = {k: v for k, v in raw.items() if v is not None}
    arch = parse_any_config(raw)
    dtype = torch.bfloat16 if DEV == "cuda" else torch.float32
    t = time.perf_counter()
    lm = random_nemotron_h_model(arch, DEV, dtype, seed=0)
    if DEV == "cuda":
        torch.cuda.synchronize()
    info = {"config": raw, "init_s": round(time.perf_counter() - t, 1),
            "params_b": round(sum(p.numel() for p in lm.parameters()) / 1e9, 3), "arms": {}}  # fmt: skip
    if DEV == "cuda":
        info["weights_gib"] = round(torch.cuda.memory_allocated() / 2**30, 2)
    return lm, arch, raw, info


def _engine_arm(loaded, arm: str, prompts: list, tokens: dict) -> dict:
    """One arm over the prompts (after a 2-prompt warm-up that compiles its kernels): its row."""
    from evalkit.engine import LLMEngine, SamplingParams

    n, L = len(prompts), len(prompts[0])
    kw = dict(device=DEV, state_dtype=arm, max_model_len=L + ENGINE["new_tokens"] + 64, max_num_seqs=n)
    if DEV == "cuda":
        # the KV cache sized to the workload (not the rest of memory), so peak_mem_gib is what it needs
        kw.update(max_num_batched_tokens=16384, decode_width=n, kv_cache_tokens=kw["max_model_len"] * n)
    eng = LLMEngine(loaded, **kw)
    eng.generate(prompts[:2], SamplingParams(max_new_tokens=3, ignore_eos=True), use_tqdm=False)  # compile
    sampling = SamplingParams(max_new_tokens=ENGINE["new_tokens"], ignore_eos=True)
    outs, row = bk.harness.timed_engine_row(eng, prompts, sampling, DEV)
    tokens[arm] = [o.token_ids for o in outs]
    if arm != "fp32" and "fp32" in tokens:
        row.update(bk.harness.token_agreement(tokens[arm], tokens["fp32"]))
    return row


def sec_engine(config_path: str | None, num_layers: int | None, arms: list[str], res: dict, save) -> dict:
    """Every arm of `arms` on the same random NemotronH-size model and prompts. The section's dict
    lives in `res` from the start and `save()` runs after each arm, so a run cut by its timeout keeps
    the arms that finished; an arm that fails is recorded and the next one runs."""
    import gc

    import torch

    from evalkit.model import LoadedModel

    lm, arch, raw, out = _engine_model(config_path, num_layers)
    out["workload"] = dict(ENGINE)
    res["sections"]["engine"] = out
    bk.log("engine model", {k_: v_ for k_, v_ in out.items() if k_ != "config"})
    save()
    loaded = LoadedModel(lm, arch, None, Path("random-nemotron-h"), raw)
    g = torch.Generator().manual_seed(1)
    n, L = ENGINE["prompts"], ENGINE["prompt_len"]
    prompts = [torch.randint(3, arch.vocab_size, (L,), generator=g).tolist() for _ in range(n)]
    tokens: dict = {}
    for arm in arms:
        try:
            out["arms"][arm] = row = _engine_arm(loaded, arm, prompts, tokens)
        except Exception as exc:  # one arm's failure (e.g. out of memory) must not lose the others
            out["arms"][arm] = row = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        bk.log("engine", arm, row)
        save()
        gc.collect()
        if DEV == "cuda":
            torch.cuda.empty_cache()
    return out


def _num(row: dict, key: str) -> str:
    return f"{row[key]:.2f}" if isinstance(row.get(key), float) else "–"


def markdown(res: dict) -> str:
    lines = ["# Mamba2 SSD on the GPU (scripts/bench_ssd.py)", "", f"`{res['command']}`", ""]
    sec = res["sections"]
    if "decode" in sec:
        lines += ["## decode (CUDA graph µs, medians; state TB/s)", "",
                  "| B | pool | ours µs | ours TB/s | of copy | FLA µs | FLA / ours |",
                  "|---:|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        for r in sec["decode"]["rows"]:
            f = lambda k_, r=r: _num(r, k_)  # noqa: E731
            lines.append(
                f"| {r['B']} | {r['pool']} | {f('ours_graph_us')} | {f('ours_TBps')} | {f('ours_frac_copy')} | {f('fla_graph_us')} | {f('speedup_vs_fla')} |"
            )
        lines.append("")
    if "prefill" in sec:
        lines += ["## prefill (ms, medians)", "",
                  "| T | ours (walk) ms | ours (split) ms | FLA ms | FLA incl. prep ms | FLA / walk | FLA / split |",
                  "|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for r in sec["prefill"]["rows"]:
            f = lambda k_, r=r: _num(r, k_)  # noqa: E731
            lines.append(
                f"| {r['T']} | {f('ours_ms')} | {f('ours_split_ms')} | {f('fla_ms')} | {f('fla_incl_prep_ms')} "
                f"| {f('speedup_vs_fla')} | {f('split_speedup_vs_fla')} |"
            )
        lines.append("")
    if "engine" in sec:
        e = sec["engine"]
        lines += [f"## engine: random NemotronH ({e['params_b']} B params), {e['workload']}", "",
                  "| arm | prefill tok/s | decode tok/s | peak GiB | identical vs fp32 | token agreement | flags |",
                  "|---|---:|---:|---:|---|---:|---|"]  # fmt: skip
        for arm, r in e["arms"].items():
            if "error" in r:
                lines.append(f"| {arm} | error: {r['error'].splitlines()[0]} | | | | | |")
                continue
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
        (self.out / "bench_ssd.json").write_text(json.dumps(self.res, indent=2, default=str))
        (self.out / "bench_ssd.md").write_text(markdown(self.res))


def engine_options(arms_text: str, workload: str | None) -> tuple[list[str], list[int] | None]:
    """The engine's arm labels (parsed by evalkit.arm, fp32 first: agreement is measured against it)
    and its workload (three positive ints or None); ValueError with a one-line reason otherwise."""
    from evalkit.arm import parse_arms

    try:
        arms = [a.label for a in parse_arms(arms_text)]
    except Exception as exc:
        raise ValueError(f"--engine-arms: {exc}") from None
    if arms[0] != "fp32":
        raise ValueError(
            f"--engine-arms must start with fp32 (the reference of agreement), got {arms_text!r}"
        )
    if workload is None:
        return arms, None
    parts = workload.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--engine-workload wants PROMPTS,LEN,NEW (three positive ints), got {workload!r}")
    return arms, [int(p) for p in parts]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory for bench_ssd.json / bench_ssd.md")
    ap.add_argument("--budget-s", type=float, default=540, help="stop starting new sections after this")
    ap.add_argument(
        "--skip", default="", help="comma-separated sections to skip (correctness,copy,decode,prefill,engine)"
    )
    ap.add_argument(
        "--engine-config", default=None, help="a NemotronH config.json: run the engine section at its size"
    )
    ap.add_argument(
        "--engine-layers", type=int, default=None, help="cut the engine model to its first N blocks"
    )
    ap.add_argument("--engine-arms", default=",".join(POOLS),
                    help="comma-separated arms of the engine section, fp32 first (evalkit.arm syntax)")  # fmt: skip
    ap.add_argument("--engine-workload", default=None, metavar="PROMPTS,LEN,NEW",
                    help=f"engine prompts, prompt length and new tokens (default {','.join(map(str, ENGINE.values()))})")  # fmt: skip
    ap.add_argument("--smoke", action="store_true", help="CPU interpreter, tiny shapes: test the script only")
    ap.add_argument(
        "--prefill-tile",
        action="append",
        default=[],
        help="BT,BP,BN,WARPS,STAGES: also time this prefill tile",
    )
    args = ap.parse_args()
    if args.smoke:
        smoke_mode()
    try:
        arms, workload = engine_options(args.engine_arms, args.engine_workload)
    except ValueError as exc:
        print(f"bench_ssd: {exc}", file=sys.stderr)
        return 2
    if workload:
        ENGINE.update(zip(("prompts", "prompt_len", "new_tokens"), workload))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    bk.harness.import_checkout()
    EXTRA_TILES.extend(parse_tile(t) for t in args.prefill_tile)
    b = Bench(out, args.budget_s, 0)
    skip = set(filter(None, args.skip.split(",")))
    plan = [("environment", bk.environment), ("correctness", sec_correctness), ("copy", bk.sec_copy),
            ("decode", lambda: sec_decode(b.res)), ("prefill", sec_prefill)]  # fmt: skip
    if args.engine_config or args.smoke:
        plan.append(
            ("engine", lambda: sec_engine(args.engine_config, args.engine_layers, arms, b.res, b.save))
        )
    for name, fn in plan:
        if name not in skip:
            b.section(name, fn)
    bk.log("wrote", out / "bench_ssd.json", out / "bench_ssd.md")
    return 0 if not b.res["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
