"""Request parameters and results of the engine.

Greedy decoding (temperature 0, the default) is a plain argmax. With temperature > 0 the next
token is drawn by Gumbel-max, argmax_v(logit_v / T + G_v) with G_v = -log(-log U_v), where U_v
comes from a counter-based hash of (seed, sample index, generated position, v) rather than from
a stateful generator: two arms with identical logits and the same key draw identical tokens (the
coupled sampling of the decision protocol), each arm's marginal is exactly softmax(logit / T)
(after top-k / top-p truncation), and a request's tokens do not depend on its batch.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from typing import Any

import torch

from evalkit.errors import InputError

MAX_LOGPROBS = 20  # top-k log-probabilities per token (vLLM's default max_logprobs)


@dataclass
class SamplingParams:
    """Greedy unless `temperature` > 0. `seed` keys the coupled randomness (drawn at random per
    request when None): give each question its own seed, the same in both arms, so that pairs
    are coupled and questions stay independent; `sample_index` tells apart the samples of one
    question (n > 1).
    `logprobs=k`: the chosen token's log-probability and the top k per generated token;
    `prompt_logprobs=k`: the same for every prompt token after the first."""

    max_new_tokens: int = 256
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False
    min_tokens: int = 0
    stop_token_ids: list[int] = field(default_factory=list)
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: no top-k truncation
    seed: int | None = None
    sample_index: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None

    def __post_init__(self):
        if not (math.isfinite(self.temperature) and self.temperature >= 0.0):
            raise InputError(f"temperature must be a finite number >= 0 (got {self.temperature})")
        if not (math.isfinite(self.top_p) and 0.0 < self.top_p <= 1.0):
            raise InputError(f"top_p must lie in (0, 1] (got {self.top_p})")
        if self.top_k < -1:
            raise InputError(f"top_k must be -1 (off), 0 (off) or >= 1 (got {self.top_k})")
        if self.seed is not None and not (0 <= self.seed < 2**64):
            raise InputError(f"seed must lie in [0, 2**64) (got {self.seed})")
        if self.sample_index < 0:
            raise InputError("sample_index must be >= 0")
        for name in ("logprobs", "prompt_logprobs"):
            k = getattr(self, name)
            if k is not None and not (0 <= k <= MAX_LOGPROBS):
                raise InputError(f"{name} must lie in [0, {MAX_LOGPROBS}] (got {k})")
        if self.max_new_tokens < 0 or self.min_tokens < 0:
            raise InputError("max_new_tokens and min_tokens must be >= 0")
        self.stop = [s for s in (self.stop or []) if s]

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def request_seed(self) -> int:
        """The seed of one request: the given one, else a fresh random one (uncoupled)."""
        return self.seed if self.seed is not None else secrets.randbits(64)


@dataclass(frozen=True)
class TokenLogprob:
    """One token's log-probability under the model (natural log, before temperature) and the
    `k` most likely tokens at that position, best first."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


# ---- the counter-based hash ------------------------------------------------------------------

_M32 = 0xFFFFFFFF


def _mul32(x: Any, c: int) -> Any:
    """(x * c) mod 2**32 for x in [0, 2**32), without overflowing int64 (tensors or ints)."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & _M32


def fmix32(h: Any) -> Any:
    """MurmurHash3's finaliser: a bijection of 32-bit words with full avalanche."""
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def row_key(seed: int, sample_index: int, position: int) -> tuple[int, int]:
    """Two 32-bit words keyed by (seed, sample index, generated position): one row of uniforms."""
    h = fmix32((seed >> 32) & _M32)
    h = fmix32(h ^ (seed & _M32))
    h = fmix32(h ^ (sample_index & _M32))
    h = fmix32(h ^ (position & _M32))
    return h, fmix32(h ^ 0x68E31DA4)


def uniforms(keys: list[tuple[int, int]], vocab: int, device: Any) -> torch.Tensor:
    """U[i, v] in (0, 1), float64 with 53 random bits, a pure function of (keys[i], v)."""
    v = torch.arange(vocab, dtype=torch.int64, device=device)
    k = torch.tensor(keys, dtype=torch.int64, device=device)
    w1 = fmix32(fmix32(v[None, :] ^ k[:, :1]) ^ 0x1B873593)
    w2 = fmix32(fmix32(v[None, :] ^ k[:, 1:]) ^ 0xCC9E2D51)
    bits = (w1 << 21) | (w2 >> 11)  # 53 bits
    return (bits.double() + 0.5) * 2.0**-53


def truncate(z: torch.Tensor, top_k: list[int], top_p: list[float]) -> torch.Tensor:
    """Rows of scaled logits ([B, V]) with the tokens outside each row's top-k / top-p nucleus
    set to -inf (a row with top_k 0 or -1 and top_p 1 is left whole)."""
    ks = torch.tensor([k if 0 < k < z.shape[-1] else 0 for k in top_k], device=z.device)
    if bool((ks > 0).any()):
        kmax = int(ks.max())
        top = torch.topk(z, kmax, dim=-1).values
        kth = top.gather(1, (ks.clamp(min=1) - 1)[:, None])
        kth = torch.where(ks[:, None] > 0, kth, torch.full_like(kth, -math.inf))
        z = z.masked_fill(z < kth, -math.inf)
    ps = torch.tensor(top_p, dtype=z.dtype, device=z.device)
    if bool((ps < 1.0).any()):
        sorted_z, order = torch.sort(z, dim=-1, descending=True)
        probs = torch.softmax(sorted_z, dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs  # mass of the tokens ranked above
        drop_sorted = (before >= ps[:, None]) & (ps[:, None] < 1.0)
        drop = torch.zeros_like(drop_sorted).scatter(1, order, drop_sorted)
        z = z.masked_fill(drop, -math.inf)
    return z


def sample_rows(logits: torch.Tensor, params: list[SamplingParams], keys: list[tuple[int, int]]) -> list[int]:
    """Gumbel-max draws for rows of logits ([B, V]), one (params, row key) per row; each row's
    draw depends on its own logits, parameters and key only (one device sync for the batch)."""
    u = uniforms(keys, logits.shape[-1], logits.device)
    gumbel = -torch.log(-torch.log(u))
    temps = torch.tensor([p.temperature for p in params], dtype=torch.float64, device=logits.device)
    z = truncate(logits.double() / temps[:, None], [p.top_k for p in params], [p.top_p for p in params])
    return torch.argmax(z + gumbel, dim=-1).tolist()


def token_logprobs(logits: torch.Tensor, chosen: list[int], k: list[int]) -> list[TokenLogprob]:
    """Per row of logits ([B, V]): the chosen token's log-probability and the top `k[i]`."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    picked = logp.gather(1, torch.tensor(chosen, device=logits.device)[:, None])[:, 0].tolist()
    kmax = max(k, default=0)
    top_v, top_i = torch.topk(logp, kmax) if kmax else (logp[:, :0], logp[:, :0].long())
    top_v, top_i = top_v.tolist(), top_i.tolist()
    return [
        TokenLogprob(chosen[r], picked[r], tuple(zip(top_i[r][: k[r]], top_v[r][: k[r]])))
        for r in range(len(chosen))
    ]


@dataclass
class Output:
    request_id: int
    token_ids: list[int]  # generated tokens only
    text: str  # decoded generation, cut before the first stop string
    finish_reason: str  # "stop" (stop string) | "eos" | "length"
    n_prompt: int
    n_generated: int
    flags: list[str] = field(default_factory=list)  # "nan", "inf", "overflow", "repetition"
    state_max_abs: float | None = None  # largest |recurrent state| seen for this sequence
    state_layer_max_abs: list[float] | None = None  # the same per KDA layer (None: no KDA layer)
    state_nonfinite: int | None = None  # most non-finite state elements seen at one health check
    timings: dict[str, float] = field(default_factory=dict)
    forced: Any = None  # an evalkit.engine.forced.ForcedScore for a teacher-forced request
    logprobs: list[TokenLogprob] | None = None  # per generated token, when asked
    prompt_logprobs: list[TokenLogprob | None] | None = None  # per prompt token (first: None)
