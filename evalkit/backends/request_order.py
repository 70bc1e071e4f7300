"""The order a server run sends its requests in (`evalkit run --server --request-order`).

A server batches whatever is in flight together, so the order requests arrive in (with the
concurrency) decides which questions share a batch and at which batch width each is computed.
Replaying the baseline in another order is one way to measure a server's numerics floor:
"given" keeps the task's order, "shuffled:SEED" a seeded permutation of it (the same seed, the
same order on every machine)."""

from __future__ import annotations

import random

from evalkit.errors import InputError

GIVEN = "given"


def parse_request_order(text: str) -> str:
    """'given' or 'shuffled:SEED' (SEED a non-negative integer), normalised; else one-line InputError."""
    if text == GIVEN:
        return GIVEN
    kind, sep, seed = text.partition(":") if isinstance(text, str) else ("", "", "")
    if kind == "shuffled" and sep and seed.isascii() and seed.isdigit() and len(seed) <= 18:
        return f"shuffled:{int(seed)}"
    raise InputError(
        f"--request-order must be 'given' or 'shuffled:SEED' (e.g. shuffled:7), got {text!r:.40}"
    )


def request_sequence(n: int, order: str) -> list[int]:
    """Indices 0..n-1 in the order they are sent."""
    order = parse_request_order(order)
    indices = list(range(n))
    if order != GIVEN:
        random.Random(int(order.split(":", 1)[1])).shuffle(indices)
    return indices


def describe_order(order: str | None) -> str:
    """'given' or 'shuffled (seed 7)'; runs made before the order was recorded sent it as given."""
    order = order or GIVEN
    return GIVEN if order == GIVEN else f"shuffled (seed {order.split(':', 1)[1]})"
