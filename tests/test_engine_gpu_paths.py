"""The GPU code paths, run on CPU: the engine under TRITON_INTERPRET=1 (evalkit's Triton KDA,
conv and norm kernels, the Triton absorbed-MLA decode kernel over paged blocks, and grouped-GEMM
MoE) must give the CPU path's tokens and logits; the grouped MoE equals the dense one.
(CUDA graphs and bf16 weights are exercised only by scripts/bench_engine.py on the GPU.)"""

from __future__ import annotations

import textwrap

import torch

from evalkit.kernels.testing import run_json_script
from evalkit.model import load_model
from tests.helpers.gpu_paths import assert_triton_matches_cpu


def test_triton_path_matches_cpu_path(tiny_hybrid_ckpt):
    assert_triton_matches_cpu(tiny_hybrid_ckpt, long_len=70, new_tokens=4)


KERNEL_SCRIPT = textwrap.dedent("""
    import json
    import torch
    from evalkit.kernels.mla_decode import kernel, wrapper as M
    assert type(kernel._mla_partial_kernel).__name__ == "InterpretedFunction"
    g = torch.Generator().manual_seed(0)
    H, R, P, bs = 3, 32, 16, 16
    lens = [1, 37, 2048, 2049, 4500]
    nb = [-(-n // bs) for n in lens]
    perm = torch.randperm(sum(nb) + 1, generator=g)[1:]  # scrambled blocks, never block 0
    tables = torch.zeros(len(lens), max(nb), dtype=torch.int32)
    k = 0
    for i, n in enumerate(nb):
        tables[i, :n] = perm[k:k + n].int()
        k += n
    pool = torch.randn((sum(nb) + 1) * bs, R + P, generator=g)
    q_lat, q_rot = torch.randn(len(lens), H, R, generator=g), torch.randn(len(lens), H, P, generator=g)
    ctx = torch.tensor(lens, dtype=torch.int32)
    scale = 0.3
    ref = []
    for i, n in enumerate(lens):
        t = torch.arange(n)
        rows = tables[i, t // bs].long() * bs + t % bs
        lat = pool[rows]
        sc = (q_lat[i] @ lat[:, :R].T + q_rot[i] @ lat[:, R:].T) * scale
        ref.append(torch.softmax(sc.double(), -1).float() @ lat[:, :R])
    ref = torch.stack(ref)
    a = M.mla_decode_attention(q_lat, q_rot, pool, tables, ctx, scale, bs, num_splits=3)
    b = M.mla_decode_attention(q_lat, q_rot, pool, tables, ctx, scale, bs, num_splits=8)
    c = M.mla_decode_attention(q_lat[:3], q_rot[:3], pool, tables[:3], ctx[:3], scale, bs, num_splits=2,
                               rows=2)
    print(json.dumps({"err": float((a - ref).abs().max()), "grid_invariant": bool(torch.equal(a, b)),
                      "rows_invariant": bool(torch.equal(c[:2], a[:2])), "zeros": bool((c[2] == 0).all()),
                      "executed": [f"{len(lens)} contexts", "num_splits 3, 8, 2"]}))
""")


def test_split_kv_mla_decode_kernel():
    """Contexts across split boundaries, scrambled blocks; the result of a row does not depend on
    the grid (num_splits) or on which rows are computed."""
    out = run_json_script(KERNEL_SCRIPT, timeout=600)
    assert out["err"] < 1e-4 and out["grid_invariant"] and out["rows_invariant"] and out["zeros"]


def test_grouped_moe_equals_dense(tiny_hybrid_ckpt):
    moe = load_model(tiny_hybrid_ckpt, tokenizer=False).model.layers[1].mlp
    x = torch.randn(37, moe.w13.shape[-1], generator=torch.Generator().manual_seed(0))
    idx, w = moe.route(x)
    assert idx.unique().numel() == moe.E  # every expert gets rows
    dense = moe._dense_all(x, idx)
    grouped = moe._grouped(x, idx)
    assert torch.allclose(grouped, dense, rtol=1e-5, atol=1e-6)
    # routing: weights from the sigmoid scores without the bias, renormalised and scaled
    s = torch.sigmoid(x @ moe.gate_weight.T)
    top = torch.topk(s + moe.e_bias, moe.top_k, dim=-1).indices
    assert torch.equal(idx.sort(-1).values, top.sort(-1).values)
    ws = s.gather(1, idx)
    assert torch.allclose(w, ws / ws.sum(-1, keepdim=True) * moe.scale)
    assert moe.e_bias.abs().max() > 0.1  # the bias really is in play


def test_mla_pool_rows_follow_block_tables(tiny_hybrid_ckpt):
    """Out-of-order blocks: the latents written at prefill are read back at decode."""
    from evalkit.engine import LLMEngine, SamplingParams, Sequence

    eng = LLMEngine(str(tiny_hybrid_ckpt), device="cpu", block_size=4, max_num_seqs=3)
    eng.state._free_blocks.reverse()  # hand out blocks in descending order
    tokens = list(range(10, 40))
    seq = Sequence(tokens, SamplingParams())
    eng.runner.attach(seq, 40)
    assert seq.block_table != sorted(seq.block_table)
    a = eng.runner.prefill([(seq, 29)], all_logits=True)[0]
    b = eng.runner.decode([seq])
    eng.runner.detach(seq)
    ref = LLMEngine(eng.loaded, device="cpu", max_num_seqs=3)
    seq2 = Sequence(tokens, SamplingParams())
    ref.runner.attach(seq2)
    full = ref.runner.prefill([(seq2, 30)], all_logits=True)[0]
    assert torch.allclose(torch.cat([a, b]), full, rtol=0, atol=1e-5)
