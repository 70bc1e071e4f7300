"""Stop strings: a sequence's last tokens decoded only after a token that can complete one.

Why: the engine checked every generating sequence with stop strings by decoding its last tokens,
one tokenizer call per sequence per decode step, on the host while the GPU waits for the next step
(results/bench/stop-strings-cpu/), and GSM8K as lm-eval runs it stops on "Question:".

A stop string that was not in the decoded tail before a token and is after it ends in the text that
token adds. When a stop string's last character is ASCII and not a space, that text holds the
character only if the token decoded alone holds it: an ASCII byte is never part of a multi-byte
character, and the tokenizers' decoders change a token's text in context only by spaces (the one
that starts a word, spaces cleaned up around punctuation) or by replacing a broken multi-byte
character. So a token whose own text holds none of the stop strings' last characters completes
none, and the tail is decoded only after tokens that can. Stop sets ending otherwise (a space, a
non-ASCII character) are checked at every token."""

from __future__ import annotations

from typing import Any


def _filterable(stops: tuple[str, ...]) -> frozenset[str] | None:
    """The stop strings' last characters when every one is ASCII and not a space and no stop
    string holds the replacement character (which a tail cut inside a character starts with), else
    None."""
    last = {s[-1] for s in stops}
    if all(c.isascii() and c != " " for c in last) and not any("\ufffd" in s for s in stops):
        return frozenset(last)
    return None


class StopStrings:
    """Stop-string checks for one engine's tokenizer; remembers, per stop set, which token ids can
    end one of its strings (each id decoded alone once, when first generated)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        # per stop set: its strings' last characters and what is known of each token id, or None
        # when the set is checked at every token
        self._enders: dict[tuple[str, ...], tuple[frozenset[str], dict[int, bool]] | None] = {}
        self.tails_decoded = 0  # tails decoded (a check's cost), for tests and profiles

    def completed(self, tokens: list[int], n_generated: int, stops: list[str], checked_before: bool) -> bool:
        """Whether a stop string is in the decoded tail of the last `n_generated` of `tokens` (the
        newest last): its last (longest stop + 4) tokens. `checked_before`: the tail without the
        newest token was checked and held none, so only a token that can end one needs the decode."""
        if checked_before and not self._may_end(tuple(stops), tokens[-1]):
            return False
        n = min(n_generated, max(len(s) for s in stops) + 4)
        self.tails_decoded += 1
        tail = self.tokenizer.decode(tokens[len(tokens) - n :], skip_special_tokens=True)
        return any(s in tail for s in stops)

    def _may_end(self, stops: tuple[str, ...], token: int) -> bool:
        if stops not in self._enders:
            last = _filterable(stops)
            self._enders[stops] = None if last is None else (last, {})
        entry = self._enders[stops]
        if entry is None:
            return True
        last, known = entry
        hit = known.get(token)
        if hit is None:
            text = self.tokenizer.decode([token], skip_special_tokens=True)
            hit = known[token] = any(c in text for c in last)
        return hit
