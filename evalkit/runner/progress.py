"""A progress bar for a run: questions done, generated tokens per second, ETA (tqdm)."""

from __future__ import annotations

import sys
import time
from typing import Any


class RunProgress:
    """Counts questions (docs), not requests: one long-decode prompt answers many questions."""

    def __init__(self, total: int, already_done: int, *, enabled: bool = True, desc: str = "run") -> None:
        self.tokens = 0
        self.errors = 0
        self._start = time.perf_counter()
        self._bar: Any = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                initial=already_done,
                desc=desc,
                unit="q",
                file=sys.stderr,
                mininterval=0.5,
                dynamic_ncols=True,
                smoothing=0.1,
            )

    def grow(self, questions: int, already_done: int) -> None:
        """More questions joined the run (a batch of requests was built), some already on disk."""
        if self._bar is None:
            return
        self._bar.total = (self._bar.total or 0) + questions
        self._bar.n += already_done
        self._bar.refresh()

    def update(self, questions: int, tokens: int, errors: int = 0) -> None:
        self.tokens += tokens
        self.errors += errors
        if self._bar is None:
            return
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        postfix = {"tok/s": f"{self.tokens / elapsed:.1f}"}
        if self.errors:
            postfix["errors"] = str(self.errors)
        self._bar.set_postfix(postfix, refresh=False)
        self._bar.update(questions)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / max(time.perf_counter() - self._start, 1e-9)
