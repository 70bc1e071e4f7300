"""Continuous batching over a fixed pool of state slots and MLA cache blocks.

Each step is either a prefill step (prompt chunks of admitted sequences, then newly admitted ones,
up to `max_num_batched_tokens`) or a decode step (one token for every sequence whose prompt is
in). Prefill goes first, so new requests join as soon as a slot frees.

Admission needs a free slot and, for models with MLA layers, cache blocks for the whole request
(prompt + max_new_tokens): a running sequence never waits for memory and is never preempted, so
no work is recomputed and the numerics of a request never depend on memory pressure.

A sequence's piece of a forward ends at a multiple of `prefill_chunk_size` (never where the token
budget happened to run out) and may span several such chunks (`chunks_per_forward`), the state
stored at each multiple inside the forward (`evalkit.model.store_rounds`), so the places where a
16-bit state is stored mid-prompt are the same whatever the batch."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from evalkit.errors import InputError

from .config import EngineConfig
from .sequence import Sequence, Status
from .state import StatePools


class Scheduler:
    def __init__(
        self,
        config: EngineConfig,
        state: StatePools,
        on_admit: Callable[[Sequence], None] | None = None,
        on_release: Callable[[Sequence], None] | None = None,
    ):
        self.config = config
        self.state = state
        self.on_admit = on_admit  # e.g. ModelRunner.bind: publish the block table
        self.on_release = on_release  # e.g. ModelRunner.detach: zero and free slot and blocks
        self.waiting: deque[Sequence] = deque()
        self.prefilling: list[Sequence] = []
        self.decoding: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        if seq.n_prompt == 0:
            raise InputError("empty prompt")
        if seq.max_len > self.config.max_model_len:
            raise InputError(
                f"request needs {seq.max_len} tokens (prompt {seq.n_prompt} + max_new_tokens "
                f"{seq.max_len - seq.n_prompt}), more than max_model_len={self.config.max_model_len}"
            )
        need = self.state.blocks_needed(seq.max_len) + self.state.blocks_needed(seq.fork_len)
        if need and need > self.state.num_blocks - 1:
            raise InputError(
                f"request needs {need * self.state.block_size} cache tokens; the MLA cache holds "
                f"{(self.state.num_blocks - 1) * self.state.block_size}"
            )
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.prefilling or self.decoding)

    @property
    def num_running(self) -> int:
        """Running sequences, counting the forks reserved by prefilling ones."""
        forks = sum(1 for s in self.prefilling if s.fork_slot is not None)
        return len(self.prefilling) + len(self.decoding) + forks

    def _next_chunk(self, seq: Sequence, budget: int) -> int:
        """Tokens of `seq` for this forward: up to its next store point, then whole store chunks
        while `budget` and `chunks_per_forward` allow (more than `budget` only when even the first
        chunk does not fit: the caller then leaves the sequence for a later forward)."""
        C = self.config.prefill_chunk_size
        left = seq.n_prompt - seq.num_computed
        first = C - seq.num_computed % C
        more = max(0, budget - first) // C
        if self.config.chunks_per_forward is not None:
            more = min(more, self.config.chunks_per_forward - 1)
        return min(left, first + more * C)

    def _admit(self, seq: Sequence) -> bool:
        slots = 1 if seq.fork_answer is None else 2  # a fork's slot is reserved up front
        if slots > self.config.max_num_seqs:  # it could never be admitted: the engine would spin for ever
            raise InputError(
                f"max_num_seqs {self.config.max_num_seqs} leaves no slot for the gold answer's copy of "
                "the state (2 per question): use --max-num-seqs 2 or more, or --no-gold-logprob"
            )
        if self.num_running + slots > self.config.max_num_seqs or self.state.free_slots < slots:
            return False
        need = self.state.blocks_needed(seq.max_len)
        fork_need = self.state.blocks_needed(seq.fork_len)
        if need + fork_need > self.state.free_blocks:
            return False
        seq.slot = self.state.alloc_slot()
        seq.block_table = self.state.alloc_blocks(need)
        if seq.fork_answer is not None:
            seq.fork_slot = self.state.alloc_slot()
            seq.fork_blocks = self.state.alloc_blocks(fork_need)
        seq.status = Status.PREFILL
        self.prefilling.append(seq)
        if self.on_admit is not None:
            self.on_admit(seq)
        return True

    def schedule(self) -> tuple[str, list[tuple[Sequence, int]]]:
        """('prefill', [(seq, n_new_tokens), ...]) or ('decode', [(seq, 1), ...]) or ('idle', [])."""
        budget = self.config.max_num_batched_tokens
        chunks: list[tuple[Sequence, int]] = []
        for seq in self.prefilling:
            n = self._next_chunk(seq, budget)
            if n > budget:
                break
            chunks.append((seq, n))
            budget -= n
        else:
            while self.waiting and budget > 0:
                seq = self.waiting[0]
                n = self._next_chunk(seq, budget)
                if n > budget or not self._admit(seq):
                    break
                self.waiting.popleft()
                chunks.append((seq, n))
                budget -= n
        if chunks:
            return "prefill", chunks
        if self.decoding:
            return "decode", [(s, 1) for s in self.decoding]
        return "idle", []

    def after_prefill(self, seq: Sequence) -> None:
        """Prompt fully folded in: generation starts (scoring requests finish instead)."""
        if seq.num_computed >= seq.n_prompt:
            self.prefilling.remove(seq)
            if not seq.is_scoring:
                seq.status = Status.DECODE
                self.decoding.append(seq)

    def finish(self, seq: Sequence) -> None:
        if seq in self.decoding:
            self.decoding.remove(seq)
        if seq in self.prefilling:
            self.prefilling.remove(seq)
        seq.status = Status.FINISHED
        if seq.fork_slot is not None:  # finished before its fork was taken (aborted)
            self.state.free_slot(seq.fork_slot)
            self.state.free_blocks_of(seq.fork_blocks)
            seq.fork_slot, seq.fork_blocks = None, []
        if self.on_release is not None:
            self.on_release(seq)
            return
        if seq.slot is not None:
            self.state.free_slot(seq.slot)
            seq.slot = None
        self.state.free_blocks_of(seq.block_table)
        seq.block_table = []
