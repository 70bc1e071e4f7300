"""Greedy decoding without generate() (which fails for pure-KDA configs in transformers)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


class Decoder:
    """Prefill + cached single-token greedy decoding with transformers' DynamicCache. A pure-KDA
    cache cannot report its length, so masks are passed pre-built (none are needed) and
    positions explicitly."""

    NO_MASK = {"full_attention": None, "linear_attention": None}

    def __init__(self, model: Any, device: torch.device, autocast_dtype: torch.dtype | None = None) -> None:
        import inspect

        self.model, self.device, self.autocast_dtype = model, device, autocast_dtype
        params = inspect.signature(model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"

    def _forward(self, ids: list[int], cache: Any, pos: int) -> torch.Tensor:
        import torch

        x = torch.tensor([ids], device=self.device)
        p = torch.arange(pos, pos + len(ids), device=self.device)[None]
        ctx = (
            torch.autocast(self.device.type, dtype=self.autocast_dtype)
            if self.autocast_dtype
            else torch.autocast(self.device.type, enabled=False)
        )
        with ctx:
            out = self.model(
                input_ids=x,
                attention_mask=self.NO_MASK,
                position_ids=p,
                use_cache=True,
                logits_to_keep=1,
                **{self.cache_kw: cache},
            )
        return out.logits[0, -1].float()

    def generate(
        self, ids: list[int], max_new: int, stop_ids: set[int], reset_at: int | None = None
    ) -> list[int]:
        """Greedy continuation of `ids`. With `reset_at`, the recurrent and conv states are
        zeroed after the first `reset_at` tokens (the state-dependence control)."""
        import torch
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        with torch.no_grad():
            segments = [ids] if reset_at is None else [ids[:reset_at], ids[reset_at:]]
            pos = 0
            for i, seg in enumerate(segments):
                if i:
                    zero_state(cache)
                logits = self._forward(seg, cache, pos)
                pos += len(seg)
            out: list[int] = []
            for _ in range(max_new):
                t = int(logits.argmax())
                if t in stop_ids:
                    break
                out.append(t)
                logits = self._forward([t], cache, pos)
                pos += 1
        return out


def zero_state(cache: Any) -> int:
    """Zero every recurrent and conv state tensor of a transformers cache; returns how many."""
    n = 0
    for layer in cache.layers:
        for attr in ("recurrent_states", "conv_states"):
            states = getattr(layer, attr, None)
            if states is None:
                continue
            items = (
                states.values()
                if isinstance(states, dict)
                else (states if isinstance(states, (list, tuple)) else [states])
            )
            for t in items:
                if t is not None and hasattr(t, "zero_"):
                    t.zero_()
                    n += 1
    return n
