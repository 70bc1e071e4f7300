"""The two teacher-forced modes of a drift run and how each feeds the tokens, which sets how
often the stored state is rounded: the one home of their names for the runner and the reports."""

from __future__ import annotations

MODES = ("prefill", "decode")


def mode_description(mode: str, chunk_size: int | None) -> str:
    """How a teacher-forced mode feeds the tokens, and so how often it rounds the stored state."""
    if mode == "prefill":
        return f"chunked prefill, {chunk_size} tokens per chunk (state rounded once per chunk)"
    return "token-by-token decode (state rounded after every token)"
