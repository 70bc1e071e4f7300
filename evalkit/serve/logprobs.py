"""The `logprobs` object of a choice. `/v1/completions`: OpenAI's (and vLLM's) legacy format:
`tokens`, `token_logprobs`, `top_logprobs` (the top k plus the chosen token, as vLLM returns them)
and `text_offset`, with the echoed prompt first when `echo` is set (its first token has no
log-probability: null).

Offsets index the choice's `text`. For a text prompt they come from the tokenizer's offset mapping
(so an answer's characters map to its tokens even when a token does not decode alone, e.g. a
special token); otherwise, as vLLM does, from the cumulative lengths of the decoded tokens.
`/v1/chat/completions`: `{"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}`.
Streamed, each chunk carries the same object for the tokens generated since the previous chunk, as
vLLM streams them: the chunks' lists concatenate to the non-streamed response's."""

from __future__ import annotations

from typing import Any

from evalkit.engine.sampling import TokenLogprob


def token_texts(tokenizer: Any, ids: list[int]) -> list[str]:
    return [tokenizer.decode([t]) for t in ids]


def cumulative_offsets(texts: list[str], start: int = 0) -> list[int]:
    out, pos = [], start
    for t in texts:
        out.append(pos)
        pos += len(t)
    return out


def prompt_offsets(tokenizer: Any, prompt: Any, ids: list[int], texts: list[str]) -> list[int]:
    """Where each prompt token starts in the echoed prompt text."""
    if isinstance(prompt, str) and getattr(tokenizer, "is_fast", False):
        try:
            enc = tokenizer(prompt, return_offsets_mapping=True)
        except Exception:  # noqa: BLE001 -- any failure: fall back to the decoded lengths
            enc = None
        if enc is not None and list(enc["input_ids"]) == list(ids):
            return [int(start) for start, _ in enc["offset_mapping"]]
    return cumulative_offsets(texts)


def _top(tokenizer: Any, lp: TokenLogprob) -> dict[str, float]:
    top = {tokenizer.decode([i]): float(v) for i, v in lp.top}
    top.setdefault(tokenizer.decode([lp.token_id]), float(lp.logprob))
    return top


def completion_logprobs(
    tokenizer: Any,
    generated: list[TokenLogprob],
    echo_text: str | None = None,
    prompt: Any = None,
    prompt_ids: list[int] | None = None,
    prompt_logprobs: list[TokenLogprob | None] | None = None,
) -> dict[str, Any]:
    """The choice's `logprobs`; `echo_text` (the echoed prompt) with its ids and log-probabilities
    puts the prompt's tokens first."""
    tokens: list[str] = []
    lps: list[float | None] = []
    tops: list[dict[str, float] | None] = []
    offsets: list[int] = []
    base = 0
    if echo_text is not None and prompt_ids is not None:
        texts = token_texts(tokenizer, prompt_ids)
        tokens += texts
        offsets += prompt_offsets(tokenizer, prompt, prompt_ids, texts)
        for lp in prompt_logprobs or [None] * len(prompt_ids):
            lps.append(None if lp is None else float(lp.logprob))
            tops.append(None if lp is None else _top(tokenizer, lp))
        base = len(echo_text)
    gen_texts = token_texts(tokenizer, [g.token_id for g in generated])
    tokens += gen_texts
    offsets += cumulative_offsets(gen_texts, base)
    for g in generated:
        lps.append(float(g.logprob))
        tops.append(_top(tokenizer, g))
    return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}


def _chat_entry(tokenizer: Any, token_id: int, logprob: float) -> dict[str, Any]:
    text = tokenizer.decode([token_id])
    return {"token": text, "logprob": float(logprob), "bytes": list(text.encode("utf-8", "surrogatepass"))}


def chat_logprobs(tokenizer: Any, generated: list[TokenLogprob]) -> dict[str, Any]:
    """A chat choice's `logprobs`: per generated token, its log-probability and the top k."""
    return {
        "content": [
            {
                **_chat_entry(tokenizer, g.token_id, g.logprob),
                "top_logprobs": [_chat_entry(tokenizer, i, v) for i, v in g.top],
            }
            for g in generated
        ]
    }


class StreamLogprobs:
    """The `logprobs` of successive stream chunks: each takes the tokens not yet sent; completion
    offsets keep counting from the stream's start (they index the whole streamed text)."""

    def __init__(self, tokenizer: Any, chat: bool) -> None:
        self.tokenizer = tokenizer
        self.chat = chat
        self.sent = 0
        self.offset = 0

    def take(self, generated: list[TokenLogprob] | None) -> dict[str, Any] | None:
        new = (generated or [])[self.sent :]
        if not new:
            return None
        self.sent += len(new)
        if self.chat:
            return chat_logprobs(self.tokenizer, new)
        out = completion_logprobs(self.tokenizer, new)
        out["text_offset"] = [o + self.offset for o in out["text_offset"]]
        self.offset += sum(len(t) for t in out["tokens"])
        return out
