"""transformers' `KimiLinearForCausalLM` over the engine's own weight tensors (no second copy).

The benchmark compares against transformers on the same random 48B weights, which fit the GPU
only once; the fused engine parameters are handed to transformers as views (q/k/v/f_a/g_a/b slices
of the fused projection, the conv weight with its channel axis, the stacked experts as is).
Only `A_log` is copied: transformers keeps it as [1, 1, H, 1] in the model dtype."""

from __future__ import annotations

from typing import Any

import torch

from .kimi import KimiLinearLM


def hf_config(raw_or_arch: Any):
    """A transformers KimiLinearConfig for the same architecture."""
    from transformers import KimiLinearConfig

    a = raw_or_arch
    full = [i + 1 for i in a.mla_layers]
    kda = [i + 1 for i in a.kda_layers]
    return KimiLinearConfig(
        vocab_size=a.vocab_size,
        hidden_size=a.hidden_size,
        num_hidden_layers=a.num_hidden_layers,
        intermediate_size=a.intermediate_size,
        moe_intermediate_size=a.moe_intermediate_size,
        num_local_experts=a.num_local_experts,
        num_experts_per_tok=a.num_experts_per_tok,
        n_shared_experts=a.n_shared_experts,
        norm_topk_prob=a.norm_topk_prob,
        routed_scaling_factor=a.routed_scaling_factor,
        n_group=a.n_group,
        topk_group=a.topk_group,
        rms_norm_eps=a.rms_norm_eps,
        num_attention_heads=a.num_attention_heads,
        num_key_value_heads=a.num_attention_heads,
        kv_lora_rank=a.kv_lora_rank,
        qk_nope_head_dim=a.qk_nope_head_dim,
        qk_rope_head_dim=a.qk_rope_head_dim,
        v_head_dim=a.v_head_dim,
        linear_attn_config={
            "full_attn_layers": full,
            "kda_layers": kda,
            "num_heads": a.linear_num_heads,
            "head_dim": a.linear_head_dim,
            "short_conv_kernel_size": a.linear_conv_kernel_dim,
        },
        mlp_layer_types=list(a.mlp_layer_types),
        tie_word_embeddings=False,
        bos_token_id=a.bos_token_id,
        eos_token_id=a.eos_token_id[0] if a.eos_token_id else None,
        pad_token_id=a.pad_token_id,
    )


def _engine_tensors(lm: KimiLinearLM) -> dict[str, torch.Tensor]:
    """transformers' state-dict names (in-memory spelling) -> tensors sharing the engine's storage."""
    out: dict[str, torch.Tensor] = {
        "model.embed_tokens.weight": lm.embed_tokens,
        "model.norm.weight": lm.norm,
        "lm_head.weight": lm.lm_head,
    }
    for i, layer in enumerate(lm.layers):
        p = f"model.layers.{i}"
        out[f"{p}.input_layernorm.weight"] = layer.input_layernorm
        out[f"{p}.post_attention_layernorm.weight"] = layer.post_attention_layernorm
        at = layer.attn
        if layer.is_kda:
            D, K, H = at.D, at.K, at.H
            w = at.in_proj
            s = f"{p}.self_attn"
            out[f"{s}.q_proj.weight"] = w[0:D]
            out[f"{s}.k_proj.weight"] = w[D : 2 * D]
            out[f"{s}.v_proj.weight"] = w[2 * D : 3 * D]
            out[f"{s}.forget_gate.f_a_proj.weight"] = w[3 * D : 3 * D + K]
            out[f"{s}.g_a_proj.weight"] = w[3 * D + K : 3 * D + 2 * K]
            out[f"{s}.b_proj.weight"] = w[3 * D + 2 * K : 3 * D + 2 * K + H]
            out[f"{s}.conv1d.weight"] = at.conv_weight.unsqueeze(1)
            out[f"{s}.forget_gate.f_b_proj.weight"] = at.f_b
            out[f"{s}.forget_gate.A_log"] = at.A_log.to(lm.dtype).view(1, 1, H, 1)
            out[f"{s}.forget_gate.dt_bias"] = at.dt_bias
            out[f"{s}.g_b_proj.weight"] = at.g_b
            out[f"{s}.o_norm.weight"] = at.o_norm
            out[f"{s}.o_proj.weight"] = at.o_proj
        else:
            s = f"{p}.self_attn"
            nq = at.H * at.qk
            out[f"{s}.q_proj.weight"] = at.in_proj[:nq]
            out[f"{s}.kv_a_proj_with_mqa.weight"] = at.in_proj[nq:]
            out[f"{s}.kv_a_layernorm.weight"] = at.kv_a_layernorm
            out[f"{s}.kv_b_proj.weight"] = at.kv_b
            out[f"{s}.o_proj.weight"] = at.o_proj
        m = layer.mlp
        if layer.is_moe:
            out[f"{p}.mlp.gate.weight"] = m.gate_weight
            out[f"{p}.mlp.gate.e_score_correction_bias"] = m.e_bias
            out[f"{p}.mlp.experts.gate_up_proj"] = m.w13
            out[f"{p}.mlp.experts.down_proj"] = m.w2
            mlps = [(f"{p}.mlp.shared_experts", m.shared)]
        else:
            mlps = [(f"{p}.mlp", m)]
        for name, mlp in mlps:
            inter = mlp.down.shape[1]
            out[f"{name}.gate_proj.weight"] = mlp.gate_up[:inter]
            out[f"{name}.up_proj.weight"] = mlp.gate_up[inter:]
            out[f"{name}.down_proj.weight"] = mlp.down
    return out


def _alternate_spellings(lm: KimiLinearLM, t: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Checkpoint spellings too (other transformers versions): gate params directly under self_attn,
    separate q/k/v convs, per-expert w1/w2/w3, and block_sparse_moe.* for every MLP."""
    alt: dict[str, torch.Tensor] = {}
    for key, val in t.items():
        if ".forget_gate." in key:
            alt[key.replace(".forget_gate.", ".")] = val
        if ".mlp." in key:
            alt[key.replace(".mlp.", ".block_sparse_moe.")] = val
    for i, layer in enumerate(lm.layers):
        p = f"model.layers.{i}"
        if layer.is_kda:
            D = layer.attn.D
            for j, n in enumerate("qkv"):
                alt[f"{p}.self_attn.{n}_conv1d.weight"] = layer.attn.conv_weight[
                    j * D : (j + 1) * D
                ].unsqueeze(1)
        if layer.is_moe:
            m = layer.mlp
            inter = m.w2.shape[-1]
            for e in range(m.E):
                for pre in (f"{p}.mlp", f"{p}.block_sparse_moe"):
                    alt[f"{pre}.experts.{e}.w1.weight"] = m.w13[e, :inter]
                    alt[f"{pre}.experts.{e}.w3.weight"] = m.w13[e, inter:]
                    alt[f"{pre}.experts.{e}.w2.weight"] = m.w2[e]
    return {**alt, **t}


def transformers_model(lm: KimiLinearLM, attn_implementation: str = "sdpa"):
    """A KimiLinearForCausalLM whose parameters are the engine's tensors (built on the meta device)."""
    from transformers import KimiLinearForCausalLM

    cfg = hf_config(lm.arch)
    cfg._attn_implementation = attn_implementation
    with torch.device("meta"):
        hf = KimiLinearForCausalLM(cfg)
    tensors = _alternate_spellings(lm, _engine_tensors(lm))
    want = hf.state_dict()
    missing = sorted(set(want) - set(tensors))
    if missing:
        raise RuntimeError(f"cannot map transformers' weights {missing[:4]} to the engine's")
    chosen = {}
    for name, meta in want.items():
        val = tensors[name]
        if val.numel() != meta.numel():
            raise RuntimeError(
                f"{name}: transformers wants {tuple(meta.shape)}, engine has {tuple(val.shape)}"
            )
        chosen[name] = val.view(meta.shape) if tuple(val.shape) != tuple(meta.shape) else val
    hf.load_state_dict(chosen, strict=True, assign=True)
    left = [n for n, t in list(hf.named_parameters()) + list(hf.named_buffers()) if t.is_meta]
    if left:
        raise RuntimeError(f"transformers tensors still on the meta device: {left[:4]}")
    return hf.eval()
