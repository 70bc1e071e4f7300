"""`ModelRunner`: turns scheduled sequences into `ForwardBatch`es, runs the model, returns logits.

Low-level API (stable; `evalkit drift` and tests drive the model through it):

    runner = ModelRunner(model, state, config)           # or engine.runner
    seq = Sequence(token_ids, SamplingParams())          # a sequence to push tokens through
    runner.attach(seq)                                   # takes a state slot (+ MLA cache blocks)
    logits = runner.prefill([(seq, n)], all_logits=True)[0]   # next n tokens; fp32 [n, vocab]
    runner.state.kda_state(layer, seq.slot)              # the stored state [H, K, V] of that layer
    seq.token_ids.append(tok); logits = runner.decode([seq])  # one token per sequence, [B, vocab]
    runner.detach(seq)                                   # zero and free the slot and blocks

`prefill` folds `n` more tokens of each sequence (from `seq.token_ids[seq.num_computed:]`) into
its state, stored at every multiple of the arm's chunk it passes and at its end, and advances
`num_computed`; `decode` does the same for exactly one token. With
`all_logits=False` prefill returns only the rows the engine needs (last prompt token, or the
scored continuation) and None for sequences that need none.

Batch invariance (config.batch_invariant): prefill forwards are padded to
`max_num_batched_tokens` rows and decode forwards to `decode_width` rows (more than that many
sequences take several forwards), and lm_head runs on blocks of `decode_width` rows. On CUDA,
decode replays a CUDA graph per width (one width when batch-invariant)."""

from __future__ import annotations

import torch

from ..model.batch import ForwardBatch
from ..model.kimi import KimiLinearLM
from ..model.layers.mla import MLA_DECODE_SPLIT
from ..model.store_rounds import store_rounds
from .config import EngineConfig
from .sequence import Sequence
from .state import StatePools

GRAPH_SPLITS = 4  # decode CUDA graphs serve contexts up to GRAPH_SPLITS * MLA_DECODE_SPLIT tokens
_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 192, 256, 320, 384, 448, 512, 768, 1024)


class ModelRunner:
    def __init__(self, model: KimiLinearLM, state: StatePools, config: EngineConfig):
        self.model, self.state, self.config = model, state, config
        self.device = model.device
        self.has_mla = bool(model.arch.mla_layers)
        bs = state.block_size
        self.max_blocks = -(-config.max_model_len // bs)
        # per slot: its block table (row S-1, the scratch slot, points at scratch block 0)
        self.block_tables = torch.zeros(
            state.num_slots + 1, self.max_blocks if self.has_mla else 1, dtype=torch.int32, device=self.device
        )
        self._graphs: dict[int, tuple[torch.cuda.CUDAGraph, dict[str, torch.Tensor]]] = {}
        self._graph_pool = None
        # the fp32-twin check compares on the host after every checked launch: not capturable
        self.use_graphs = self.device.type == "cuda" and not config.enforce_eager and not config.twin_check
        self.graph_error: str | None = None

    # -- sequence lifetime ---------------------------------------------------------------------
    def attach(self, seq: Sequence, n_tokens: int | None = None) -> None:
        """Give `seq` a zeroed slot and cache blocks for `n_tokens` (default: seq.max_len)."""
        seq.slot = self.state.alloc_slot()
        seq.block_table = self.state.alloc_blocks(self.state.blocks_needed(n_tokens or seq.max_len))
        self.bind(seq)

    def bind(self, seq: Sequence) -> None:
        """Publish the block table of an admitted sequence to the device-side table."""
        if self.has_mla and seq.block_table:
            bt = torch.tensor(seq.block_table, dtype=torch.int32)
            self.block_tables[seq.slot, : len(seq.block_table)] = bt.to(self.device)

    def detach(self, seq: Sequence) -> None:
        if seq.slot is not None:
            self.block_tables[seq.slot].zero_()
            self.state.free_slot(seq.slot)
            seq.slot = None
        self.state.free_blocks_of(seq.block_table)
        seq.block_table = []

    # -- helpers -------------------------------------------------------------------------------
    def _rows(self, slot: int, start: int, end: int) -> torch.Tensor:
        """MLA pool rows of positions [start, end) of the sequence in `slot`."""
        bs = self.state.block_size
        pos = torch.arange(start, end, device=self.device)
        return self.block_tables[slot, pos // bs].long() * bs + pos % bs

    def _want_rows(self, seq: Sequence, start: int, n: int, all_logits: bool) -> list[int]:
        """Positions (absolute, within [start, start+n)) whose logits this chunk must return."""
        end = start + n
        if all_logits or seq.prompt_logprobs is not None:
            return list(range(start, end))
        if seq.is_scoring:
            lo, hi = max(seq.score_from - 1, start), min(seq.n_prompt - 1, end)
            return list(range(lo, hi))
        return [end - 1] if end == seq.n_prompt else []

    # -- prefill -------------------------------------------------------------------------------
    @torch.inference_mode()
    def prefill(
        self, chunks: list[tuple[Sequence, int]], all_logits: bool = False
    ) -> list[torch.Tensor | None]:
        cfg, dev = self.config, self.device
        ids: list[int] = []
        cu = [0]
        slots, has_init, want_idx, new_lens, ctx_rows, slot_map = [], [], [], [], [], []
        store_pos = []
        per_seq_wanted = []
        for seq, n in chunks:
            c = seq.num_computed
            ids.extend(seq.token_ids[c : c + n])
            wanted = self._want_rows(seq, c, n, all_logits)
            per_seq_wanted.append(len(wanted))
            want_idx.extend(cu[-1] + (p - c) for p in wanted)
            cu.append(cu[-1] + n)
            slots.append(seq.slot)
            has_init.append(c > 0)
            store_pos.append(c + n - 1)
            new_lens.append(n)
            if self.has_mla:
                ctx_rows.append(self._rows(seq.slot, 0, c + n))
                slot_map.append(ctx_rows[-1][c:])
        T = len(ids)
        T_pad = max(T, cfg.max_num_batched_tokens) if cfg.batch_invariant else T
        input_ids = torch.zeros(T_pad, dtype=torch.long)
        input_ids[:T] = torch.tensor(ids, dtype=torch.long)
        cu_cpu = torch.tensor(cu, dtype=torch.int32)
        batch = ForwardBatch(
            is_decode=False,
            input_ids=input_ids.to(dev),
            num_tokens=T,
            slots=torch.tensor(slots, dtype=torch.long, device=dev),
            cu_seqlens=cu_cpu.to(dev),
            cu_seqlens_cpu=cu_cpu,
            has_initial_state=torch.tensor(has_init, dtype=torch.bool, device=dev),
            state_positions=torch.tensor(store_pos, dtype=torch.long, device=dev),
            mla_slot_mapping=torch.cat(slot_map) if slot_map else None,
            context_rows=ctx_rows,
            new_lens=new_lens,
            store_chunk=cfg.prefill_chunk_size,
            block_size=self.state.block_size,
            logits_indices=torch.tensor(want_idx, dtype=torch.long, device=dev),
            logits_block=cfg.decode_width if cfg.batch_invariant else 0,
            store_rounds=store_rounds(
                [seq.num_computed for seq, _ in chunks],
                new_lens,
                slots,
                cfg.prefill_chunk_size,
                dev,
            ),
        )
        logits = self.model(batch, self.state)
        for seq, n in chunks:
            seq.num_computed += n
        out: list[torch.Tensor | None] = []
        start = 0
        for k in per_seq_wanted:
            out.append(logits[start : start + k] if k else None)
            start += k
        return out

    # -- decode --------------------------------------------------------------------------------
    def decode_width(self, n: int) -> int:
        if self.config.batch_invariant:
            return self.config.decode_width
        return next((b for b in _BUCKETS if b >= n), n)

    @torch.inference_mode()
    def decode(self, seqs: list[Sequence], copy_logits: bool = True) -> torch.Tensor:
        """Fold each sequence's last token into its state; fp32 logits [len(seqs), vocab].
        `copy_logits=False`: the logits may be a view of a CUDA graph's output buffer, which the
        next decode overwrites (the engine reads them within its step; copying 512 rows of a
        163,840-word vocabulary moves 670 MB a step)."""
        outs = []
        width = self.decode_width(len(seqs))
        for s in range(0, len(seqs), width):
            outs.append(self._decode_group(seqs[s : s + width], width, copy_logits or len(seqs) > width))
        for seq in seqs:
            seq.num_computed += 1
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    def _decode_group(self, seqs: list[Sequence], width: int, copy_logits: bool = True) -> torch.Tensor:
        B = len(seqs)
        ids = torch.zeros(width, dtype=torch.long)
        slots = torch.full((width,), self.state.scratch_slot, dtype=torch.long)
        ctx = torch.ones(width, dtype=torch.int32)
        ids[:B] = torch.tensor([s.token_ids[s.num_computed] for s in seqs], dtype=torch.long)
        slots[:B] = torch.tensor([s.slot for s in seqs], dtype=torch.long)
        ctx[:B] = torch.tensor([s.num_computed + 1 for s in seqs], dtype=torch.int32)
        if self.use_graphs and int(ctx[:B].max()) <= GRAPH_SPLITS * MLA_DECODE_SPLIT:
            self.capture_graphs([width])  # no-op when captured; on failure: eager from now on
        if self.use_graphs and int(ctx[:B].max()) <= GRAPH_SPLITS * MLA_DECODE_SPLIT:
            graph, static = self._graphs[width]
            static["input_ids"].copy_(ids, non_blocking=True)
            static["slots"].copy_(slots, non_blocking=True)
            static["context_lens"].copy_(ctx, non_blocking=True)
            graph.replay()
            logits = static["logits"][:B]
            return logits.clone() if copy_logits else logits  # the next replay overwrites the buffer
        rows = [self._rows(s.slot, 0, s.num_computed + 1) for s in seqs] if self.has_mla else []
        splits = -(-int(ctx[:B].max()) // MLA_DECODE_SPLIT)  # longer contexts: eager, grid to fit
        return self._decode_forward(
            ids.to(self.device),
            slots.to(self.device),
            ctx.to(self.device),
            B,
            context_rows=rows,
            mla_splits=splits,
            rows=B,
        )[:B]

    def _decode_forward(
        self,
        input_ids,
        slots,
        context_lens,
        num_real: int,
        context_rows=(),
        mla_splits: int = 0,
        rows: int | None = None,
    ) -> torch.Tensor:
        """The fixed-shape decode pass (also what a CUDA graph captures): device ops only."""
        for pool in self.state.kda.values():
            pool[self.state.scratch_slot].zero_()
        for pool in self.state.conv.values():
            pool[self.state.scratch_slot].zero_()
        batch = ForwardBatch(
            is_decode=True,
            input_ids=input_ids,
            num_tokens=input_ids.shape[0],
            slots=slots,
            block_size=self.state.block_size,
            logits_block=input_ids.shape[0],
            mla_splits=mla_splits,
            decode_rows=rows,
            state_positions=(context_lens - 1).long(),  # device op: graph-capturable
            real_rows=slots != self.state.scratch_slot,
        )
        if self.has_mla:
            bs = self.state.block_size
            bt = self.block_tables[slots]
            pos = (context_lens - 1).long()
            batch.block_tables = bt
            batch.context_lens = context_lens
            batch.mla_slot_mapping = bt.gather(1, (pos // bs)[:, None])[:, 0].long() * bs + pos % bs
            batch.context_rows = list(context_rows)
            batch.new_lens = [1] * len(batch.context_rows)
        return self.model(batch, self.state)

    def _graph(self, width: int):
        if width in self._graphs:
            return self._graphs[width]
        dev = self.device
        static = {
            "input_ids": torch.zeros(width, dtype=torch.long, device=dev),
            "slots": torch.full((width,), self.state.scratch_slot, dtype=torch.long, device=dev),
            "context_lens": torch.ones(width, dtype=torch.int32, device=dev),
        }
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # compile / autotune outside the capture
                self._decode_forward(
                    static["input_ids"],
                    static["slots"],
                    static["context_lens"],
                    width,
                    mla_splits=GRAPH_SPLITS,
                )
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._graph_pool):
            static["logits"] = self._decode_forward(
                static["input_ids"], static["slots"], static["context_lens"], width, mla_splits=GRAPH_SPLITS
            )
        self._graph_pool = graph.pool()
        self._graphs[width] = (graph, static)
        return self._graphs[width]

    def release_graphs(self) -> None:
        self._graphs.clear()
        self._graph_pool = None

    def capture_graphs(self, widths: list[int] | None = None) -> None:
        """Capture the decode graphs now; if capture fails, fall back to eager decode (and say why)."""
        if not self.use_graphs:
            return
        try:
            for w in widths or [self.decode_width(self.config.max_num_seqs)]:
                self._graph(w)
        except Exception as exc:  # noqa: BLE001 -- eager decode is slower but correct
            self.release_graphs()
            self.use_graphs = False
            self.graph_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            print(f"[evalkit] CUDA graph capture failed, decoding eagerly: {self.graph_error}", flush=True)
