"""Progress of a run in questions and in tokens, with an ETA from tokens.

Why tokens: a long-context run spends most of its time prefilling, and an in-process engine
batches every prompt, so no question finishes until most of the work is done. Counted in
questions such a run showed an ETA of 1:12:23 at 2/40 and finished in 6:46. Here the work is the
prompt tokens to prefill plus the tokens to generate:

- the local engine reports each step as it happens (`observe_step`): prompt tokens prefilled or
  sequences advanced one token, and the step's time goes to that kind, so the ETA is the
  remaining prompt tokens at the measured prefill rate plus the remaining generation at the
  measured decode rate;
- a server reports tokens only when a request finishes (`update`): the ETA then scales the
  elapsed time by the remaining share of all tokens.

Prompt sizes are known before the run (`prompt_tokens`: the task's length, a tokenizer count, or
characters/4) and calibrated against the counts the backend reports. The generation still to come
is each pending request's budget scaled by the share of budget finished requests used.

Output: a tqdm bar on a terminal; a plain line every `interval` seconds when stderr is not a
terminal (CI logs, `nohup`); nothing with `enabled=False` (`--no-progress`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from evalkit.engine.step_result import StepResult

LINE_INTERVAL_S = 30.0


def progress_mode(enabled: bool, stream: TextIO | None = None) -> str:
    """ "bar" on a terminal, "lines" otherwise, "off" when disabled."""
    if not enabled:
        return "off"
    stream = stream or sys.stderr
    return "bar" if getattr(stream, "isatty", lambda: False)() else "lines"


def estimate_prompt_tokens(prompt: Any, length: int | None, view: Any = None) -> int:
    """Tokens a prompt will prefill: its fitted length, else a tokenizer count, else chars/4."""
    if length:
        return int(length)
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
        return len(prompt)
    text = prompt if isinstance(prompt, str) else " ".join(str(m.get("content", "")) for m in prompt or [])
    if view is not None:
        try:
            return view.count(text)
        except Exception:  # noqa: BLE001 -- an estimate; never fail a run over it
            pass
    return max(1, len(text) // 4)


def _si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.1f}{unit}"
    return f"{x:.0f}"


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    return f"{h}:{rem // 60:02d}:{rem % 60:02d}" if h else f"{rem // 60:d}:{rem % 60:02d}"


class RunProgress:
    """Counts questions (docs), not requests (one long-decode prompt answers many questions), and
    tokens; see the module docstring for the ETA."""

    def __init__(
        self,
        total: int,
        already_done: int,
        *,
        enabled: bool = True,
        desc: str = "run",
        prompt_tokens: Sequence[int] = (),
        gen_budgets: Sequence[int] = (),
        stream: TextIO | None = None,
        interval: float = LINE_INTERVAL_S,
        clock: Any = time.perf_counter,
    ) -> None:
        self.total, self.done, self.desc = total, already_done, desc
        self.stream = stream or sys.stderr
        self.mode = progress_mode(enabled, self.stream)
        self.interval = interval
        self._clock = clock
        self._start = self._last_step = self._last_line = clock()
        self.errors = 0
        self.tokens = 0  # generated
        self.prompt_tokens = 0  # prefilled
        self.prompt_total_est = float(sum(prompt_tokens))
        self.gen_budget_left = float(sum(gen_budgets))
        self._est_done = 0.0  # estimated prompt tokens of the finished requests
        self._prompt_reported = 0  # their prompt tokens as the backend counted them
        self._budget_done = 0.0
        self._gen_done = 0
        self._live = False  # the backend reports steps (local engine)
        self._time = {"prefill": 0.0, "decode": 0.0}
        self._bar: Any = None
        if self.mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                initial=already_done,
                desc=desc,
                unit="q",
                file=self.stream,
                mininterval=0.5,
                dynamic_ncols=True,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} q [{elapsed}{postfix}]",
            )

    # -- what the backend and the runner report ------------------------------------------------
    def observe_step(self, step: StepResult) -> None:
        """One engine step: its prompt tokens prefilled, or its sequences advanced one token."""
        now = self._clock()
        self._live = True
        kind = "prefill" if step.prefilled_tokens > 0 else "decode"
        self._time[kind] += now - self._last_step
        self._last_step = now
        self.prompt_tokens += step.prefilled_tokens
        self.tokens += step.decoded_sequences
        self._show(now)

    def update(
        self,
        questions: int,
        tokens: int,
        errors: int = 0,
        *,
        prompt_tokens: int | None = None,
        estimated_prompt: int = 0,
        budget: int = 0,
    ) -> None:
        """A request finished: its questions, generated tokens, errors and token counts."""
        self.done += questions
        self.errors += errors
        self._est_done += estimated_prompt
        self._prompt_reported += prompt_tokens if prompt_tokens is not None else estimated_prompt
        self._budget_done += budget
        self._gen_done += tokens
        self.gen_budget_left = max(0.0, self.gen_budget_left - budget)
        if not self._live:
            self.tokens += tokens
            self.prompt_tokens += prompt_tokens if prompt_tokens is not None else estimated_prompt
        if self._bar is not None:
            self._bar.update(questions)
        self._show(self._clock())

    def close(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(self._postfix(), refresh=True)
            self._bar.close()
        elif self.mode == "lines":
            self._print_line()

    # -- the numbers ---------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        return max(self._clock() - self._start, 1e-9)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.elapsed

    @property
    def prompt_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.elapsed

    def prompt_total(self) -> float:
        """All prompt tokens of this run, the estimate calibrated by what the backend counted."""
        scale = self._prompt_reported / self._est_done if self._est_done > 0 else 1.0
        return max(self.prompt_total_est * scale, float(self.prompt_tokens))

    def gen_left(self) -> float:
        used = self._gen_done / self._budget_done if self._budget_done > 0 else 1.0
        remaining = self.gen_budget_left * min(max(used, 0.0), 1.0)
        if self._live:  # tokens generated by requests still running are already counted
            remaining = max(0.0, remaining - (self.tokens - self._gen_done))
        return remaining

    def eta(self) -> tuple[float | None, bool]:
        """(seconds left, whether that covers all the work). While the engine has only prefilled,
        the decode rate is unknown: the prefill left is a lower bound (shown as "≥")."""
        prompt_left = max(0.0, self.prompt_total() - self.prompt_tokens)
        gen_left = self.gen_left()
        if self._live:
            rate_p = self.prompt_tokens / self._time["prefill"] if self._time["prefill"] > 0 else None
            rate_g = (self.tokens / self._time["decode"]) if self._time["decode"] > 0 else None
            parts = [(prompt_left, rate_p), (gen_left, rate_g)]
            known = [left / rate for left, rate in parts if left and rate]
            complete = all(rate or not left for left, rate in parts)
            return (sum(known) if known or complete else None), complete
        done = self.prompt_tokens + self.tokens
        return (self.elapsed * (prompt_left + gen_left) / done if done else None), True

    def _eta_text(self) -> str:
        seconds, complete = self.eta()
        return _clock(seconds) if complete or seconds is None else f"≥{_clock(seconds)}"

    def _postfix(self) -> str:
        parts = [
            f"prompt {_si(self.prompt_tokens)}/{_si(self.prompt_total())} tok "
            f"{self.prompt_tokens_per_s:.0f}/s",
            f"gen {_si(self.tokens)} tok {self.tokens_per_s:.1f}/s",
            f"ETA {self._eta_text()}",
        ]
        if self.errors:
            parts.append(f"{self.errors} errors")
        return ", ".join(parts)

    def line(self) -> str:
        """The plain progress line (non-terminal output)."""
        return f"{self.desc}: {self.done}/{self.total} q, {self._postfix()}, elapsed {_clock(self.elapsed)}"

    def _print_line(self) -> None:
        print(self.line(), file=self.stream, flush=True)

    def _show(self, now: float) -> None:
        if self._bar is not None:
            if now - self._last_line >= self._bar.mininterval:  # engine steps can be many per second
                self._last_line = now
                self._bar.set_postfix_str(self._postfix(), refresh=True)
        elif self.mode == "lines" and now - self._last_line >= self.interval:
            self._last_line = now
            self._print_line()
