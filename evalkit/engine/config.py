"""`EngineConfig`: every knob of the in-process engine, with defaults that depend on the device.

What a run computes is `arm` (`evalkit.arm.Arm`: the state format and the store points, the same
on every device) and `kernels` (`evalkit.kernel_choice.KernelChoice`: every other numerics switch);
the rest are capacities and checks.

The defaults make evaluation runs reproducible: `batch_invariant=True` gives every dense GEMM a
fixed shape (decode batches padded to `decode_width` rows, prefill batches to
`max_num_batched_tokens` rows, lm_head on blocks of `decode_width` rows) and cuts each prompt into
prefill chunks at fixed multiples of the arm's `prefill_chunk_size`, so a sequence's numerics do
not depend on which other sequences share its batch, nor on `max_num_seqs`."""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields
from typing import Any

import torch

from evalkit.arm import DEFAULT_PREFILL_CHUNK, Arm, parse_arm
from evalkit.errors import InputError
from evalkit.kernel_choice import KernelChoice, parse_kernels
from evalkit.kernels import use_triton
from evalkit.kernels.formats import FormatError, StateFormat, parse_format


def state_dtype_name(value: Any, option: str) -> str:
    """'fp16' for 'fp16', 'float16' or torch.float16 (a value of the loose spelling `option`)."""
    try:
        return parse_format(value).name
    except FormatError as exc:
        raise InputError(f"{option}: {exc}") from None


# the loose spellings a direct `LLMEngine(path, state_dtype="fp16")` call may still use, each parsed
# once into `arm` / `kernels` by `EngineConfig.with_options`
ARM_OPTIONS = ("state_dtype", "prefill_chunk_size", "intra_chunk_dtype")
KERNEL_OPTIONS = ("dtype",)
# what the CPU's float32 prefill computes: other values choose a Triton kernel
TRITON_PREFILL_DEFAULTS = {"kda_prefill": "stream", "ssd_prefill": "walk", "prefill_dots": "fp32"}


@dataclass
class EngineConfig:
    model: Any = None  # path / hub id, or an already loaded evalkit.model.LoadedModel
    arm: Arm = Arm()  # the state format and the store points (default fp32, every 2048 tokens)
    kernels: KernelChoice = KernelChoice()  # every other numerics switch, weights dtype included
    device: str | None = None  # "cuda" when available, else "cpu"
    max_num_seqs: int | None = None  # concurrent sequences (= state slots); GPU 256, CPU 16
    # tokens per prefill forward (rows every prefill is padded to); GPU 16384, CPU 2048, at least
    # the arm's chunk; the store points are the arm's whatever this is
    max_num_batched_tokens: int | None = None
    # the most store chunks of one sequence a prefill forward folds (each stored before the next, see
    # evalkit.model.store_rounds); None: as many as max_num_batched_tokens holds; 1: a forward per chunk
    chunks_per_forward: int | None = None
    decode_width: int | None = None  # rows of every decode forward when batch_invariant; GPU 256, CPU 8
    max_model_len: int | None = None  # longest prompt + generation; default min(config, 136k)
    block_size: int = 64  # tokens per MLA cache block
    kv_cache_tokens: int | None = None  # MLA cache capacity in tokens; default: what memory allows
    gpu_memory_utilization: float = 0.92
    cpu_kv_cache_bytes: int = 256 << 20
    kda_chunk_size: int = 64  # the chunked prefill kernel's chunk
    twin_check: int = 0  # n > 0: check one rounding KDA launch in n against its fp32 twin (no CUDA graphs)
    enforce_eager: bool = False  # no CUDA graphs
    batch_invariant: bool = True
    health_interval: int | None = None  # decode steps between state-magnitude checks; GPU 16, CPU 1
    overflow_threshold: float | None = (
        None  # |state| at or above this flags "overflow"; None: the format's max
    )
    trust_remote_code: bool = False  # let a checkpoint's own tokenizer code run (--trust-remote-code)

    @property
    def state_format(self) -> StateFormat:
        """The arm's storage format."""
        return self.arm.format

    @property
    def prefill_chunk_size(self) -> int:
        """The arm's store points: a prompt is cut at multiples of this."""
        return self.arm.prefill_chunk_size

    def with_options(self, **options: Any) -> EngineConfig:
        """A copy with EngineConfig fields and the loose arm/kernel spellings (`ARM_OPTIONS`,
        `KERNEL_OPTIONS`: `state_dtype="fp16"`, `prefill_chunk_size=64`, `dtype="bf16"`) set; the
        loose ones are parsed here, once, into `arm` and `kernels`."""
        names = {f.name for f in fields(EngineConfig)}
        unknown = sorted(set(options) - names - set(ARM_OPTIONS) - set(KERNEL_OPTIONS))
        if unknown:
            raise InputError(f"unknown engine option {unknown[0]!r}")
        arm = parse_arm(options.pop("arm", self.arm))
        loose = {k: options.pop(k) for k in ARM_OPTIONS if k in options}
        if loose:
            try:
                fmt = parse_format(loose.get("state_dtype") or arm.format)
            except FormatError as exc:
                raise InputError(f"state_dtype: {exc}") from None
            chunk = loose.get("prefill_chunk_size") or arm.prefill_chunk_size
            intra = loose.get("intra_chunk_dtype", arm.intra_chunk_dtype)
            intra = None if intra is None else state_dtype_name(intra, "intra_chunk_dtype")
            arm = Arm(fmt, int(chunk), intra)
        kernels = parse_kernels(options.pop("kernels", self.kernels))
        if "dtype" in options:
            weights = options.pop("dtype")
            name = state_dtype_name(weights, "dtype") if weights else "auto"
            kernels = parse_kernels(f"weights={name}", base=kernels)
        kept = {f.name: getattr(self, f.name) for f in fields(self)}
        return EngineConfig(**{**kept, **options, "arm": arm, "kernels": kernels})

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
        default_budget = max(16384 if gpu else DEFAULT_PREFILL_CHUNK, c.prefill_chunk_size)
        c.max_num_batched_tokens = c.max_num_batched_tokens or default_budget
        c.decode_width = c.decode_width or (256 if gpu else 8)
        c.max_model_len = c.max_model_len or min(max_position_embeddings, 139264)
        c.twin_check = int(c.twin_check)
        c.health_interval = c.health_interval or (16 if gpu else 1)
        if gpu and c.arm.intra_chunk_dtype == "fp16":
            raise InputError("on the GPU the prefill kernel rounds intra-chunk states to fp32 or bf16 only")
        if gpu and c.kda_chunk_size != 64:
            raise InputError("on the GPU the chunked prefill kernel uses kda_chunk_size 64")
        triton_prefill = {k: v for k, v in vars(c.kernels).items() if k in TRITON_PREFILL_DEFAULTS}
        if not (gpu or use_triton(torch.empty(0))) and triton_prefill != TRITON_PREFILL_DEFAULTS:
            chosen = ",".join(
                f"{k}={v}" for k, v in triton_prefill.items() if v != TRITON_PREFILL_DEFAULTS[k]
            )
            raise InputError(
                f"--kernels {chosen}: a choice of the Triton prefill kernel (GPU); the CPU runs its "
                "float32 form (kda_prefill=stream,ssd_prefill=walk,prefill_dots=fp32)"
            )
        if c.prefill_chunk_size > max(c.max_model_len, DEFAULT_PREFILL_CHUNK):
            raise InputError(
                f"the arm's chunk ({c.prefill_chunk_size} tokens) is longer than the model's context "
                f"({c.max_model_len} tokens)"
            )
        if c.prefill_chunk_size > c.max_num_batched_tokens:
            raise InputError(
                f"the arm's chunk (prefill_chunk_size {c.prefill_chunk_size}) must not exceed "
                f"max_num_batched_tokens ({c.max_num_batched_tokens})"
            )
        if c.chunks_per_forward is not None and c.chunks_per_forward < 1:
            raise InputError("chunks_per_forward must be >= 1 (or unset: as many as the budget holds)")
        for name in (
            "max_num_seqs",
            "max_num_batched_tokens",
            "decode_width",
            "block_size",
        ):
            if getattr(c, name) < 1:
                raise InputError(f"{name} must be >= 1")
        return c
