"""Progress that tells the truth: tokens as well as questions, an ETA from tokens, a plain line
instead of a bar when stderr is not a terminal, nothing with --no-progress."""

from __future__ import annotations

import io
from pathlib import Path

from helpers.faulty_server import FaultyServer

from evalkit.cli import main
from evalkit.engine.step_result import StepResult
from evalkit.runner.progress import RunProgress, estimate_prompt_tokens, progress_mode

TASKS_DIR = Path(__file__).parent / "data" / "lm_eval_tasks"


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _progress(clock, stream=None, **kw) -> RunProgress:
    kw = {"prompt_tokens": [100_000] * 4, "gen_budgets": [16] * 4, **kw}
    return RunProgress(4, 0, stream=stream or io.StringIO(), clock=clock, interval=10, **kw)


def test_a_batched_local_prefill_has_a_token_eta_before_any_question_finishes():
    """The engine prefills every prompt before any finishes: counted in questions the ETA is
    unknown (0/4 done), counted in tokens it is the remaining prefill at the measured rate."""
    clock = Clock()
    p = _progress(clock)
    clock.t = 10.0
    p.observe_step(StepResult(prefilled_tokens=50_000))  # 50k prompt tokens in 10 s
    assert p.done == 0 and p.prompt_tokens == 50_000
    # decoding has not run yet: the prefill left (350k at 5k tok/s) is a lower bound, shown so
    assert p.eta() == (70.0, False) and "ETA ≥1:10" in p.line()
    clock.t = 80.0
    p.observe_step(StepResult(prefilled_tokens=350_000))  # all 400k prefilled, 5k tok/s
    clock.t = 82.0
    p.observe_step(StepResult(decoded_sequences=4))  # 4 sequences decoded one token each in 2 s: 2 tok/s
    assert p.eta() == ((64 - 4) / 2, True)  # no prompt left; 60 tokens of budget at 2 tok/s
    clock.t = 84.0
    p.update(1, 1, prompt_tokens=100_000, estimated_prompt=100_000, budget=16)  # stopped early
    # the finished request used 1/16 of its budget: the others are expected to use as little
    assert p.gen_left() == 0 and p.eta() == (0, True)
    assert p.prompt_tokens == 400_000 and p.tokens == 4  # live counts are not counted twice


def test_a_server_run_scales_elapsed_time_by_the_tokens_left_and_calibrates_prompt_sizes():
    clock = Clock()
    p = _progress(clock)
    clock.t = 30.0
    # the estimate said 100k, the server counted 150k: the other prompts are 150k too
    p.update(1, 16, prompt_tokens=150_000, estimated_prompt=100_000, budget=16)
    assert p.prompt_total() == 600_000 and p.gen_left() == 48
    assert p.eta() == (30.0 * (450_000 + 48) / (150_000 + 16), True)
    assert p.prompt_tokens_per_s == 5000 and p.tokens_per_s == 16 / 30


def test_off_a_terminal_a_plain_line_every_interval_and_nothing_without_progress():
    clock, out = Clock(), io.StringIO()
    p = _progress(clock, out)
    assert p.mode == "lines"
    for t in (1, 2, 12, 13):
        clock.t = float(t)
        p.update(1, 16, prompt_tokens=100_000, estimated_prompt=100_000, budget=16)
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in out.getvalue()  # one at 12 s, one at the end
    assert lines[-1].startswith("run: 4/4 q, prompt 400.0k/400.0k tok 30769/s, gen 64 tok")
    assert "ETA 0:00" in lines[-1]
    silent = io.StringIO()
    q = RunProgress(4, 0, enabled=False, stream=silent, clock=clock)
    q.update(4, 64)
    q.close()
    assert silent.getvalue() == "" and q.tokens == 64


def test_on_a_terminal_a_bar():
    term = Terminal()
    assert progress_mode(True, term) == "bar" and progress_mode(False, term) == "off"
    p = RunProgress(2, 0, stream=term, prompt_tokens=[10, 10], gen_budgets=[4, 4])
    p.update(2, 8, prompt_tokens=20, estimated_prompt=20, budget=8)
    p.close()
    assert "\r" in term.getvalue() and "2/2 q" in term.getvalue() and "prompt 20/20 tok" in term.getvalue()


def test_prompt_size_estimates():
    assert estimate_prompt_tokens("x" * 400, 4096) == 4096  # a long-context doc's fitted length
    assert estimate_prompt_tokens([1, 2, 3], None) == 3
    assert estimate_prompt_tokens("x" * 400, None) == 100
    assert estimate_prompt_tokens([{"role": "user", "content": "y" * 80}], None) == 20


def test_a_run_off_a_terminal_prints_lines_not_bars_and_prompt_tok_s_at_the_end(tmp_path, capsys):
    argv = ["run", "--tasks", "tiny_arith", "--include-path", str(TASKS_DIR), "--arm", "a"]
    with FaultyServer(lambda key, attempt: "ok") as server:
        assert main([*argv, "--server", server.url, "--out", str(tmp_path / "run")]) == 0
    out, err = capsys.readouterr()
    assert "a: 6/6 q, prompt" in err and "\r" not in err and "it/s" not in err  # no library bars
    assert "prompt tok/s, " in out.splitlines()[-1] and "generated tok/s" in out.splitlines()[-1]


def test_the_local_engine_reports_prefill_and_decode_steps_as_they_happen(tiny_pure_kda_ckpt):
    from evalkit.backends.base import GenRequest
    from evalkit.backends.local import LocalBackend

    backend = LocalBackend(str(tiny_pure_kda_ckpt), state_dtype="fp16", device="cpu")
    steps: list[int] = []  # > 0: prompt tokens prefilled, < 0: sequences decoded
    results: list[tuple[int, int]] = []  # (steps seen when the result came, its n_prompt)
    backend.step_observer = lambda step: steps.append(step.prefilled_tokens - step.decoded_sequences)
    reqs = [GenRequest(prompt="hello " * k, max_new_tokens=4, ignore_eos=True) for k in (20, 30)]
    backend.generate(reqs, lambda i, r: results.append((len(steps), r.n_prompt)))
    assert sum(n for n in steps if n > 0) == sum(n for _, n in results)  # every prompt token
    assert sum(-n for n in steps if n < 0) + 2 == 8  # decode steps (the first token comes with prefill)
    assert min(seen for seen, _ in results) > 1  # progress was reported before anything finished
