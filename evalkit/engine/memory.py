"""GPU memory planning: how many bytes the state pools and the MLA cache may take (how many
sequences of a given context fit in them: `evalkit.engine.capacity`)."""

from __future__ import annotations

import math

import torch

from ..kernels import SSD_PREFILL_BLOCK
from ..model.config import KimiArch
from ..model.nemotron_h.config import Mamba2Vocabulary
from .config import EngineConfig


def activation_reserve(arch: KimiArch, c: EngineConfig) -> int:
    """Bytes kept free for the largest forward pass (a padded prefill batch; MoE token-expert
    pairs dominate), the decode logits, CUDA-graph buffers, and expanding the longest MLA context."""
    hid, T, k = arch.hidden_size, c.max_num_batched_tokens, arch.num_experts_per_tok
    act = T * (hid * 24 + k * (hid * 8 + arch.moe_intermediate_size * 8))
    # the chunked KDA prefill's fp32 work buffers (~8 per-token rows of H*K, chunk states)
    act += 8 * arch.kda_dim * 4 * T + (T // 64 + 1) * arch.linear_num_heads * arch.linear_head_dim**2 * 4
    if c.kernels.ssd_prefill == "split" and isinstance(arch, Mamba2Vocabulary):
        # the split SSD prefill's scratch: the incoming fp32 state of every block of tokens
        blocks = T // SSD_PREFILL_BLOCK + c.max_num_seqs
        act += blocks * math.prod(arch.recurrent_state_shape) * 4
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
