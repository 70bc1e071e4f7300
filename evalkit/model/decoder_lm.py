"""What every causal LM the engine runs shares: token embeddings, a stack of decoder layers, a final
norm and an untied lm_head, with fp32 logits over fixed-size row blocks (batch invariance). A model
family subclasses `DecoderLM` with its layer class and its own `hidden_states` (which norm, which
per-row inputs its layers take).

The numerics switches (`evalkit.kernel_choice.KernelChoice`) reach the layers through the model:
`use_kernels(choice)` hands the choice to every module that reads one (a class attribute
`kernels`, the default choice), once, when an engine takes the model."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from evalkit.kernel_choice import KernelChoice

from .batch import ForwardBatch


def frozen_parameter(*shape: int, dtype: torch.dtype, device: torch.device | str) -> nn.Parameter:
    """An uninitialised inference-only weight (filled by the loader or random init)."""
    return nn.Parameter(torch.empty(*shape, dtype=dtype, device=device), requires_grad=False)


class DecoderLM(nn.Module):
    kernels: KernelChoice = KernelChoice()

    def __init__(
        self,
        arch,
        layer: Callable[..., nn.Module],
        dtype: torch.dtype,
        device: torch.device | str,
    ):
        """`layer(arch, i, dtype, device)` builds decoder layer i."""
        super().__init__()
        self.arch, self.dtype, self.device = arch, dtype, torch.device(device)
        hid = arch.hidden_size
        self.embed_tokens = frozen_parameter(arch.vocab_size, hid, dtype=dtype, device=device)
        self.layers = nn.ModuleList(layer(arch, i, dtype, device) for i in range(arch.num_hidden_layers))
        self.norm = frozen_parameter(hid, dtype=dtype, device=device)
        self.lm_head = frozen_parameter(arch.vocab_size, hid, dtype=dtype, device=device)

    def use_kernels(self, choice: KernelChoice) -> None:
        """Every module that reads a `KernelChoice` (its class declares `kernels`) reads `choice`."""
        for m in self.modules():
            if hasattr(type(m), "kernels"):
                m.kernels = choice

    def hidden_states(self, batch: ForwardBatch, state) -> torch.Tensor:
        """Final-normed hidden states of every row [T_pad, hidden]."""
        raise NotImplementedError

    def logits(self, h: torch.Tensor, block: int = 0) -> torch.Tensor:
        """fp32 logits of rows h; with `block` > 0 the lm_head GEMM always sees exactly `block` rows."""
        if block <= 0 or h.shape[0] == block:
            return F.linear(h, self.lm_head).float()
        out = []
        for s in range(0, h.shape[0], block):
            part = h[s : s + block]
            m = part.shape[0]
            if m < block:
                part = F.pad(part, (0, 0, 0, block - m))
            out.append(F.linear(part, self.lm_head).float()[:m])
        return torch.cat(out) if out else h.new_zeros(0, self.arch.vocab_size, dtype=torch.float32)

    def forward(self, batch: ForwardBatch, state) -> torch.Tensor:
        """fp32 logits of `batch.logits_indices` (every real row when None)."""
        h = self.hidden_states(batch, state)
        if batch.logits_indices is not None:
            h = h[batch.logits_indices]
        else:
            h = h[: batch.num_tokens]
        return self.logits(h, batch.logits_block)
