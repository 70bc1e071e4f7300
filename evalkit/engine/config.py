"""`EngineConfig`: every knob of the in-process engine, with defaults that depend on the device.

The defaults make evaluation runs reproducible: `batch_invariant=True` gives every dense GEMM a
fixed shape (decode batches padded to `decode_width` rows, prefill batches to
`max_num_batched_tokens` rows, lm_head on blocks of `decode_width` rows) and cuts each prompt into
prefill chunks at fixed multiples of `prefill_chunk_size`, so a sequence's numerics do not depend
on which other sequences share its batch, nor on `max_num_seqs`."""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields
from typing import Any

import torch

from evalkit.errors import InputError
from evalkit.kernels.formats import FormatError, StateFormat, parse_format


@dataclass
class EngineConfig:
    model: Any = None  # path / hub id, or an already loaded evalkit.model.LoadedModel
    # the arm: storage format of the recurrent KDA state pool, any `evalkit.kernels.formats` name
    # (fp32 | fp16 | bf16 | fp8_e4m3 | fp8_e5m2 | mN, optionally -sr[:SEED] or -rtz)
    state_dtype: str = "fp32"
    device: str | None = None  # "cuda" when available, else "cpu"
    max_num_seqs: int | None = None  # concurrent sequences (= state slots); GPU 256, CPU 16
    max_num_batched_tokens: int | None = None  # tokens per prefill forward; GPU 16384, CPU 512
    prefill_chunk_size: int | None = (
        None  # a prompt is cut at multiples of this; GPU = max_num_batched_tokens, CPU 256
    )
    decode_width: int | None = None  # rows of every decode forward when batch_invariant; GPU 256, CPU 8
    max_model_len: int | None = None  # longest prompt + generation; default min(config, 136k)
    block_size: int = 64  # tokens per MLA cache block
    kv_cache_tokens: int | None = None  # MLA cache capacity in tokens; default: what memory allows
    gpu_memory_utilization: float = 0.92
    cpu_kv_cache_bytes: int = 256 << 20
    intra_chunk_dtype: str | None = None  # round the carried state inside prefill chunks (None: no)
    kda_chunk_size: int = 64  # the chunked prefill kernel's chunk
    twin_check: int = 0  # n > 0: check one rounding KDA launch in n against its fp32 twin (no CUDA graphs)
    enforce_eager: bool = False  # no CUDA graphs
    batch_invariant: bool = True
    health_interval: int | None = None  # decode steps between state-magnitude checks; GPU 16, CPU 1
    overflow_threshold: float = 32768.0  # |state| at or above this flags "overflow" (fp16 max is 65504)
    dtype: str | None = None  # weights/activations: default bf16 on GPU, fp32 on CPU
    trust_remote_code: bool = False  # let a checkpoint's own tokenizer code run (--trust-remote-code)

    @property
    def state_format(self) -> StateFormat:
        """The arm's storage format (`state_dtype` parsed)."""
        return parse_format(self.state_dtype)

    def resolved(self, max_position_embeddings: int) -> EngineConfig:
        """A copy with every device-dependent default filled in and the values checked."""
        # Shallow on purpose: `model` may be a loaded model holding the weights (asdict would
        # deep-copy them: a second copy of a 98 GB model).
        kept = {f.name: copy.copy(getattr(self, f.name)) for f in fields(self) if f.name != "model"}
        c = EngineConfig(**kept)
        c.model = self.model
        if c.device is None:
            c.device = "cuda" if torch.cuda.is_available() else "cpu"
        gpu = c.device.startswith("cuda")
        if gpu and not torch.cuda.is_available():
            raise InputError("device 'cuda' was requested but no CUDA GPU is available")
        c.max_num_seqs = c.max_num_seqs or (256 if gpu else 16)
        # a larger prefill chunk than the default budget raises the budget (one chunk must fit)
        default_budget = max(16384 if gpu else 512, c.prefill_chunk_size or 0)
        c.max_num_batched_tokens = c.max_num_batched_tokens or default_budget
        c.prefill_chunk_size = c.prefill_chunk_size or (
            c.max_num_batched_tokens if gpu else min(256, c.max_num_batched_tokens)
        )
        c.decode_width = c.decode_width or (256 if gpu else 8)
        c.max_model_len = c.max_model_len or min(max_position_embeddings, 139264)
        c.twin_check = int(c.twin_check)
        c.health_interval = c.health_interval or (16 if gpu else 1)
        try:
            c.state_dtype = parse_format(c.state_dtype).name  # canonical name, e.g. float16 -> fp16
        except FormatError as exc:
            raise InputError(f"state_dtype: {exc}") from None
        if c.intra_chunk_dtype not in (None, "fp32", "fp16", "bf16"):
            raise InputError(
                f"intra_chunk_dtype must be fp32, fp16, bf16 or None, got {c.intra_chunk_dtype!r}"
            )
        if gpu and c.intra_chunk_dtype == "fp16":
            raise InputError("on the GPU the prefill kernel rounds intra-chunk states to fp32 or bf16 only")
        if gpu and c.kda_chunk_size != 64:
            raise InputError("on the GPU the chunked prefill kernel uses kda_chunk_size 64")
        if c.prefill_chunk_size > c.max_num_batched_tokens:
            raise InputError(
                f"prefill_chunk_size ({c.prefill_chunk_size}) must not exceed "
                f"max_num_batched_tokens ({c.max_num_batched_tokens})"
            )
        for name in (
            "max_num_seqs",
            "max_num_batched_tokens",
            "prefill_chunk_size",
            "decode_width",
            "block_size",
        ):
            if getattr(c, name) < 1:
                raise InputError(f"{name} must be >= 1")
        return c
