"""GPU memory planning: how many bytes the state pools and the MLA cache may take, and how many
sequences of a given context length fit (the benchmark's capacity numbers come from here)."""

from __future__ import annotations

import torch

from ..model.config import KimiArch
from .config import EngineConfig
from .state import StatePools


def activation_reserve(arch: KimiArch, c: EngineConfig) -> int:
    """Bytes kept free for the largest forward pass (a padded prefill batch; MoE token-expert
    pairs dominate), the decode logits, CUDA-graph buffers, and expanding the longest MLA context."""
    hid, T, k = arch.hidden_size, c.max_num_batched_tokens, arch.num_experts_per_tok
    act = T * (hid * 24 + k * (hid * 8 + arch.moe_intermediate_size * 8))
    # the chunked KDA prefill's fp32 work buffers (~8 per-token rows of H*K, chunk states)
    act += 8 * arch.kda_dim * 4 * T + (T // 64 + 1) * arch.linear_num_heads * arch.linear_head_dim**2 * 4
    act += c.decode_width * arch.vocab_size * 8 + (2 << 30)
    if arch.mla_layers:
        act += c.max_model_len * arch.num_attention_heads * (arch.qk_head_dim + arch.v_head_dim) * 2 * 3
    return act


def gpu_pool_budget(arch: KimiArch, c: EngineConfig, device: torch.device) -> int:
    """Bytes left for the pools: utilisation x total, minus what is already used (the weights),
    minus the activation reserve."""
    torch.cuda.synchronize(device)
    free, total = torch.cuda.mem_get_info(device)
    usable = int(total * c.gpu_memory_utilization) - (total - free)
    return max(usable - activation_reserve(arch, c), 0)


def bytes_per_sequence(
    arch: KimiArch, state_dtype: torch.dtype, model_dtype: torch.dtype, context_len: int, block_size: int
) -> int:
    """One sequence's recurrent + conv state and its MLA cache for `context_len` tokens."""
    blocks = -(-context_len // block_size) if arch.mla_layers else 0
    cache = blocks * block_size * StatePools.bytes_per_token(arch, model_dtype)
    return StatePools.bytes_per_slot(arch, state_dtype, model_dtype) + cache


def max_concurrent(
    arch: KimiArch,
    c: EngineConfig,
    state_dtype: torch.dtype,
    model_dtype: torch.dtype,
    context_len: int,
    budget: int,
) -> int:
    """Most sequences of `context_len` tokens whose state and cache fit in `budget` bytes."""
    per = bytes_per_sequence(arch, state_dtype, model_dtype, context_len, c.block_size)
    return max(int(budget // per) - 1, 0)  # one slot is scratch
