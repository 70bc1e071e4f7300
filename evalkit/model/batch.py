"""What one forward pass needs to know besides the token ids: which rows belong to which sequence,
where each sequence's recurrent state and MLA cache live, and which rows need logits.

Two modes:
- prefill: rows are packed chunks of N sequences (`cu_seqlens`); rows >= `num_tokens` are padding
  (present only so that every dense GEMM has the same shape, see `EngineConfig.batch_invariant`)
  and are skipped by every per-sequence op (conv, KDA, MLA).
- decode: one row per sequence; rows >= `num_tokens` are dummy sequences that read and write a
  scratch state slot and a scratch MLA row, so that a CUDA graph of fixed width can replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class ForwardBatch:
    is_decode: bool
    input_ids: torch.Tensor  # [T_pad] int64
    num_tokens: int  # real rows; prefill: tokens, decode: sequences
    slots: torch.Tensor  # [N] int64: recurrent/conv state slot per sequence (decode: per row)
    cu_seqlens: torch.Tensor | None = None  # [N+1] int32, prefill only
    # the same on the host: the KDA prefill needs the values there, and reading them back from
    # the device is a sync per layer (None: read from cu_seqlens)
    cu_seqlens_cpu: torch.Tensor | None = None
    has_initial_state: torch.Tensor | None = None  # [N] bool, prefill only
    # [N] int64: per sequence, the position of the last token this pass folds into its recurrent
    # state, i.e. where the state is stored (stochastic rounding hashes it; never the slot)
    state_positions: torch.Tensor | None = None
    # prefill: when a sequence folds several of the arm's store chunks, the recurrent core's calls,
    # one per store round (`store_rounds`); empty: one call on this batch
    store_rounds: list[StoreRound] = field(default_factory=list)
    # MLA cache (None for pure-KDA models)
    mla_slot_mapping: torch.Tensor | None = None  # [num rows written] int64: pool row of each new token
    block_tables: torch.Tensor | None = None  # [N, max_blocks] int32
    context_lens: torch.Tensor | None = None  # [N] int32: cached tokens after this pass (incl. new ones)
    block_size: int = 0  # tokens per cache block
    mla_splits: int = 0  # decode: split-KV grid size (0: from the longest context, a host sync)
    decode_rows: int | None = None  # decode: MLA attention only for the first rows (eager; None: all)
    # decode: [T_pad] bool on the device, False for the dummy sequences (a device op, so a CUDA
    # graph replays it for any number of real rows); the MoE routes them to no expert
    real_rows: torch.Tensor | None = None
    context_rows: list[torch.Tensor] = field(default_factory=list)  # per real sequence: pool rows, in order
    new_lens: list[int] = field(default_factory=list)  # per real sequence: new tokens in this pass
    # prefill: the arm's store chunk; the attention layers cut each sequence's new rows (and MLA its
    # context's expansion) at its multiples, the calls a forward per store chunk makes (0: uncut)
    store_chunk: int = 0
    # logits
    logits_indices: torch.Tensor | None = None  # [R] rows whose logits are wanted; None = every real row
    logits_block: int = 0  # >0: run lm_head on blocks of exactly this many rows (batch invariance)

    @property
    def cu_seqlens_readable(self) -> torch.Tensor | None:
        """cu_seqlens for ops that read its values on the host (the KDA prefill's chunk table, the
        short conv's): the host copy when there is one, so that reading it is not a device sync."""
        return self.cu_seqlens_cpu if self.cu_seqlens_cpu is not None else self.cu_seqlens

    @property
    def num_seqs(self) -> int:
        return int(self.slots.numel()) if not self.is_decode else self.num_tokens


@dataclass(frozen=True)
class StoreRound:
    """One call of the recurrent core within a prefill forward that folds several store chunks of a
    sequence (`evalkit.model.store_rounds`): these packed rows, as a prefill batch of their own."""

    ranges: tuple[tuple[int, int], ...]  # [start, end) rows of the forward's packed tokens, per segment
    # slots, cu_seqlens, has_initial_state, state_positions of the segments
    batch: ForwardBatch
