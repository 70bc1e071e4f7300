"""The local engine's state probe (`backends.probe.DriftModel`) over `evalkit.engine.ModelRunner`.

One session = one sequence with its own `StatePools` (KDA state pool in the arm's dtype, conv
state and MLA cache) and its own `ModelRunner`, all over the same loaded weights, so the fp32
arm and the arms under test can run side by side on the same chunk.

Decode mode has two implementations that round the state identically (after every token):
- "steps": the engine's real decode path, one forward per token (CUDA graphs on GPU). Exact,
  but a 27-layer 48B model needs ~ms per token, too slow for 64k tokens × 3 arms;
- "block" (default): the block of teacher-forced tokens runs as one prefill-shaped forward,
  except that each KDA layer's recurrence steps token by token: load, fp32 update, a store
  rounded the arm's way (its state format, SR seed and the token's position), every token; for a
  plain round-to-nearest fp32/fp16/bf16 pool on the GPU in one launch per layer and block
  (`evalkit.kernels.kda_decode.recurrent`, tested against the decode kernel), otherwise through
  `kernels.kda_decode` per token; a Mamba2 SSD layer likewise, in one launch per block for every
  storage format (`evalkit.kernels.ssd_decode.recurrent`). Teacher forcing makes this
  legitimate: layer l sees all its inputs for the block once layer l-1 is done. The dense parts
  (projections, MoE, MLA, conv) then run batched over the block, which changes their fp32
  rounding only in the last bits and equally for every arm (`tests/test_drift_engine.py`
  checks block == steps to 1e-4 on the tiny checkpoints).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import torch

from evalkit.arm import DEFAULT_PREFILL_CHUNK
from evalkit.errors import InputError
from evalkit.kernel_choice import KernelChoice

DECODE_IMPLS = ("block", "steps")


class _PerTokenRecurrence:
    """The KDA ops a block decode hands the model (`StatePools.kda_ops`): prefill steps the
    recurrence token by token, with drift's one-launch kernel where Triton runs (`fused`), else
    through `kda_decode` once per token; decode steps are passed through."""

    def __init__(self, ops, fused: bool):
        self._ops, self._fused = ops, fused

    def kda_decode(self, *args, **kwargs):
        return self._ops.kda_decode(*args, **kwargs)

    def kda_prefill(
        self,
        q,
        k,
        v,
        g_raw,
        beta_raw,
        A_log,
        dt_bias,
        state_pool,
        slots,
        cu_seqlens,
        has_initial_state,
        *,
        fmt=None,
        sr_seed: int = 0,
        positions=None,
        **_chunking,  # chunk_size, intra_chunk_dtype: every token is a store here
    ):
        from evalkit import kernels

        out = torch.empty(q.shape[0], q.shape[1], v.shape[-1], dtype=q.dtype, device=q.device)
        cu = cu_seqlens.tolist()
        init = has_initial_state.tolist()
        fused = self._fused and kernels.use_triton(q) and _rounds_to_nearest_in_pool_dtype(fmt)
        if fused:
            from evalkit.kernels.kda_decode.recurrent import kda_recurrent_rounded
        for i in range(len(cu) - 1):
            slot = slots[i : i + 1]
            s, e = cu[i], cu[i + 1]
            if fused:
                out[s:e] = kda_recurrent_rounded(
                    q[s:e],
                    k[s:e],
                    v[s:e],
                    g_raw[s:e],
                    beta_raw[s:e],
                    A_log,
                    dt_bias,
                    state_pool,
                    int(slot.item()),
                    bool(init[i]),
                )
                continue
            if not init[i]:
                state_pool[slot].zero_()
            for t in range(s, e):
                store = {}
                if fmt is not None:  # `positions` holds each sequence's last position: token t's is before it
                    pos = None if positions is None else positions[i : i + 1] - (e - 1 - t)
                    store = {"fmt": fmt, "sr_seed": sr_seed, "positions": pos}
                out[t] = self._ops.kda_decode(
                    q[t : t + 1],
                    k[t : t + 1],
                    v[t : t + 1],
                    g_raw[t : t + 1],
                    beta_raw[t : t + 1],
                    A_log,
                    dt_bias,
                    state_pool,
                    slot,
                    **store,
                )[0]
        return out

    # the Mamba2 SSD ops (NemotronH, Granite-4.0-H): decode passes through, prefill steps per token
    # (in one launch per sequence where Triton runs and `fused`, for every storage format)
    def ssd_decode(self, *args, **kwargs):
        return self._ops.ssd_decode(*args, **kwargs)

    def ssd_prefill(
        self,
        x,
        dt_raw,
        B,
        C,
        A_log,
        dt_bias,
        D,
        state_pool,
        slots,
        cu_seqlens,
        has_initial_state,
        *,
        fmt=None,
        sr_seed: int = 0,
        positions=None,
        **_chunking,  # chunk_size, intra_chunk_dtype: every token is a store here
    ):
        from evalkit import kernels
        from evalkit.kernels.ssd_decode.recurrent import decode_loop, ssd_recurrent_rounded

        out = torch.empty_like(x)
        cu = cu_seqlens.tolist()
        init = has_initial_state.tolist()
        fused = self._fused and kernels.use_triton(x)  # every storage format: see ssd_recurrent_rounded
        for i in range(len(cu) - 1):
            slot = slots[i : i + 1]
            s, e = cu[i], cu[i + 1]
            last = None if positions is None else positions[i]  # the sequence's last position
            args = (x[s:e], dt_raw[s:e], B[s:e], C[s:e], A_log, dt_bias, D, state_pool)
            if fused:
                last = None if last is None else int(last)
                out[s:e] = ssd_recurrent_rounded(
                    *args, int(slot.item()), bool(init[i]), fmt=fmt, sr_seed=sr_seed, position_last=last
                )
                continue
            if not init[i]:
                state_pool[slot].zero_()
            out[s:e] = decode_loop(
                self._ops.ssd_decode, *args, slot, fmt=fmt, sr_seed=sr_seed, position_last=last
            )
        return out


def _rounds_to_nearest_in_pool_dtype(fmt) -> bool:
    """What the one-launch kernel does: round-to-nearest into an fp32/fp16/bf16 pool (no mN,
    truncation, stochastic rounding or fp8: those go through `kda_decode` per token)."""
    return fmt is None or (
        fmt.rounding == "rtne" and fmt.mantissa_bits is None and fmt.storage in ("fp32", "fp16", "bf16")
    )


@contextlib.contextmanager
def per_token_recurrence(pools, fused: bool = True):
    """While active, the model's KDA layers round the state of `pools` after every token, also
    inside a prefill-shaped forward (see the module doc)."""
    previous = pools.kda_ops
    pools.kda_ops = _PerTokenRecurrence(previous, fused)
    try:
        yield
    finally:
        pools.kda_ops = previous


class EngineSession:
    """One sequence in one state dtype (see `evalkit.backends.probe.ArmSession`)."""

    def __init__(self, owner: EngineDriftModel, state_dtype: str):
        from evalkit.arm import Arm, parse_arm
        from evalkit.engine.config import EngineConfig
        from evalkit.engine.model_runner import ModelRunner
        from evalkit.engine.sampling import SamplingParams
        from evalkit.engine.sequence import Sequence
        from evalkit.engine.state import StatePools

        self.owner, self.state_dtype = owner, state_dtype
        m, arch = owner.model, owner.model.arch
        block = owner.block_size
        named = parse_arm(state_dtype)  # an arm's name without its chunk: the study holds that once
        arm = Arm(named.format, owner.chunk_size, named.intra_chunk_dtype)
        cfg = EngineConfig(
            arm=arm,
            kernels=owner.kernels,
            device=str(m.device),
            max_num_seqs=1,
            max_num_batched_tokens=owner.chunk_size,
            decode_width=1,
            max_model_len=owner.max_len,
            block_size=block,
            batch_invariant=False,
            enforce_eager=owner.enforce_eager,
            kda_chunk_size=owner.kda_chunk_size,
        )
        cfg = cfg.resolved(max(owner.max_len, arch.max_position_embeddings))
        n_blocks = (-(-owner.max_len // block) + 1) if arch.mla_layers else 0
        self.pools = StatePools(
            arch, 1, arm, m.dtype, m.device, n_blocks, block, kda_chunk_size=owner.kda_chunk_size
        )
        self.runner = ModelRunner(m, self.pools, cfg)
        self.seq = Sequence([], SamplingParams(max_new_tokens=0))
        self.runner.attach(self.seq, owner.max_len)
        self.kda_layers = list(arch.kda_layers)

    def _room(self, n: int) -> None:
        if len(self.seq.token_ids) + n > self.owner.max_len:
            raise InputError(f"drift session holds at most {self.owner.max_len} tokens")

    @torch.inference_mode()
    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        ids = tokens.reshape(-1).tolist()
        self._room(len(ids))
        self.seq.token_ids.extend(ids)
        return self.runner.prefill([(self.seq, len(ids))], all_logits=True)[0]

    @torch.inference_mode()
    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        ids = tokens.reshape(-1).tolist()
        self._room(len(ids))
        if self.owner.decode_impl == "block":
            self.seq.token_ids.extend(ids)
            with per_token_recurrence(self.pools, self.owner.fused_decode):
                return self.runner.prefill([(self.seq, len(ids))], all_logits=True)[0]
        rows = []
        for t in ids:
            self.seq.token_ids.append(t)
            rows.append(self.runner.decode([self.seq])[0].clone())
        return torch.stack(rows)

    def states(self) -> list[torch.Tensor]:
        return [self.pools.kda_state(layer, self.seq.slot) for layer in self.kda_layers]

    def close(self) -> None:
        if self.runner is not None:
            self.runner.detach(self.seq)
            self.runner = None
            self.pools = None


class EngineDriftModel:
    """A loaded Kimi-Linear model opened for drift (see `evalkit.backends.probe.DriftModel`)."""

    def __init__(
        self,
        model,
        tokenizer=None,
        *,
        max_len: int,
        chunk_size: int = DEFAULT_PREFILL_CHUNK,
        decode_impl: str = "block",
        enforce_eager: bool = False,
        kda_chunk_size: int = 64,
        block_size: int = 64,
        fused_decode: bool = True,
        info: dict[str, Any] | None = None,
        kernels: KernelChoice | None = None,
    ):
        """`kernels`: the numerics switches besides the state (handed to the model's layers)."""
        if decode_impl not in DECODE_IMPLS:
            raise InputError(f"decode_impl must be one of {DECODE_IMPLS}, got {decode_impl!r}")
        self.model, self.tokenizer = model, tokenizer
        self.vocab_size = model.arch.vocab_size
        self.device = model.device
        self.max_len, self.chunk_size = int(max_len), int(chunk_size)
        self.decode_impl, self.enforce_eager = decode_impl, enforce_eager
        self.kda_chunk_size, self.block_size = kda_chunk_size, block_size
        self.fused_decode = fused_decode
        self.info = dict(info or {})
        self.kernels = kernels or KernelChoice()
        model.use_kernels(self.kernels)

    @classmethod
    def load(
        cls, path: str, *, device: str | None = None, dtype: torch.dtype | None = None, **kw
    ) -> EngineDriftModel:
        """`dtype`: weights and activations (default bf16 on GPU, fp32 on CPU)."""
        from evalkit.model import load_model

        dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
        from evalkit.model.checkpoint import weights_fingerprint

        loaded = load_model(path, device=dev, dtype=dtype)
        # the config hash alone cannot tell a retrained model from its predecessor (v1 and v2 of
        # the reference model share a config), so a study records which weights it measured
        info = {"path": str(loaded.path), "weights_fingerprint": weights_fingerprint(Path(loaded.path))}
        return cls(loaded.model, loaded.tokenizer, info=info, **kw)

    def open_session(self, state_dtype: str) -> EngineSession:
        return EngineSession(self, state_dtype)

    def describe(self) -> dict[str, Any]:
        a = self.model.arch
        dtype = str(self.model.dtype).replace("torch.", "")
        return {
            **self.info,
            "config_hash": a.config_hash,
            "dtype": dtype,
            "device": str(self.device),
            "layers": a.num_hidden_layers,
            "kda_layers": len(a.kda_layers),
            "mla_layers": len(a.mla_layers),
            "hidden_size": a.hidden_size,
            "vocab_size": a.vocab_size,
            "kda_heads": a.linear_num_heads,
            "kda_head_dim": a.linear_head_dim,
            "decode_impl": self.decode_impl,
            "kda_chunk_size": self.kda_chunk_size,
            # MLA prefill attention path: a resumed study must not change it between calls
            **({"mla_prefill": self.kernels.mla_prefill} if a.mla_layers else {}),
            "kernels": self.kernels.describe(),
            "decode_kernel": decode_kernel_description(a.recurrence, self.fused_decode),
            **({"decode_layout": decode_layouts()} if self.device.type == "cuda" else {}),
        }

    def tokenize(self, text: str) -> list[int]:
        if self.tokenizer is None:
            raise InputError("this model has no tokenizer; give token ids (--random-tokens) instead of text")
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def decode_kernel_description(recurrence: str, fused: bool) -> str:
    """The code that steps the state in decode mode, in a study's identity: "kda" (KDA and Gated
    DeltaNet layers) or "ssd" (Mamba2 layers). A resumed study must not mix two of them: the SSD's
    one-launch kernel and its per-token launches round alike but did not agree to the last bit over
    32k tokens on an H100 (`results/reference-model-mamba2/drift-32k-h100/`), so each is named."""
    if fused:
        return f"one-launch per block (evalkit.kernels.{recurrence}_decode.recurrent) where Triton runs"
    return f"kernels.{recurrence}_decode per token"


def decode_layouts() -> dict[str, str]:
    """The decode tile's layout per state dtype (BV x warps, VEC): it sets the order of the sums over
    K, so a study resumed under another layout would mix two arithmetics; recorded in the model's
    identity, which a resume must match."""
    from evalkit.kernels.kda_decode.wrapper import DECODE_TILES

    return {
        n: f"{t.BV}x{t.num_warps} vec{t.VEC}"
        for n, t in DECODE_TILES.items()
        if n in ("fp32", "fp16", "bf16")
    }
