"""Property: whatever a `--config` file or a GSM8K `--data-dir` holds, evalkit either takes it or
says what is wrong in one line (exit 2 / an InputError), never a traceback (issue 43, item 7;
the compare and serve fuzzers are test_compare_fuzz and test_serve_fuzz). Derandomized, bounded."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evalkit.commands import run
from evalkit.config_file import parse_with_config
from evalkit.errors import EvalkitError, InputError
from evalkit.tasks.data import BUNDLED_DIR, locate_gsm8k

TRAIN_ROWS = b"".join(
    (BUNDLED_DIR / "train.jsonl").read_bytes().splitlines(keepends=True)[:8]
)  # 5 shots drawn
SETTINGS = settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(
        ["", "no", "yes", "0", "-1", "4k", "gsm8k", "gsm8k:num_fewshot=2", "auto", "a=b", "1e9"]
    )
    | st.text(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
)
RUN_OPTIONS = [
    "tasks", "lengths", "limit", "seed", "task-option", "server", "arm", "gold-logprob", "no-progress",
    "data-parallel", "max-new-tokens", "concurrency", "timeout", "max-retries", "include-path", "api-key",
]  # fmt: skip
option_names = st.sampled_from(RUN_OPTIONS) | st.text(max_size=6)


def _validate_like_run(args: argparse.Namespace) -> None:
    """What `evalkit run` checks before any model loads or server is asked."""
    run._check(args)
    run._split(args.server)
    tasks = run._split([args.tasks]) if args.tasks is not None else ["gsm8k"]
    if args.lengths:
        from evalkit.tasks.registry import parse_lengths

        parse_lengths(args.lengths)
    run.parse_task_options(args.task_option, tasks)


@SETTINGS
@given(st.dictionaries(option_names, values, max_size=5))
def test_any_config_file_is_taken_or_one_line(options):
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "run.yaml"
        config.write_text(yaml.safe_dump(options, allow_unicode=True))
        parser = argparse.ArgumentParser(prog="evalkit run")
        run.add_arguments(parser)
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = parse_with_config(parser, ["--config", str(config), "--arm", "x"])
        except SystemExit as exc:
            lines = err.getvalue().strip().splitlines()
            assert exc.code == 2 and len(lines) == 1 and lines[0].startswith("evalkit run: error: "), lines
            return
        try:
            _validate_like_run(args)
        except EvalkitError:
            pass


lines = st.one_of(
    st.binary(max_size=12),
    st.builds(lambda v: json.dumps(v).encode(), values),
    st.builds(
        lambda q, a: json.dumps({"question": q, "answer": a}).encode(),
        scalars,
        scalars,
    ),
)


GOOD_ROW = b'{"question": "1+1?", "answer": "2\\n#### 2"}'


@settings(SETTINGS, max_examples=40)
@given(st.lists(lines, max_size=4))
@example([GOOD_ROW])
@example([b"", GOOD_ROW, b"  "])
def test_any_gsm8k_test_file_is_read_or_refused_in_one_line(rows):
    """Refused in one line by the check, or read by lm-eval's loader into requests: the check is
    neither looser than the loader (a traceback) nor stricter than the data."""
    from evalkit.tasks.gsm8k import GSM8KTask

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "train.jsonl").write_bytes(TRAIN_ROWS)
        (folder / "test.jsonl").write_bytes(b"\n".join(rows))
        try:
            locate_gsm8k(folder)
        except InputError as exc:
            assert "\n" not in str(exc)
            return
        reqs = GSM8KTask().requests(data_dir=str(folder), show_progress=False)
        assert len(reqs) == sum(1 for r in rows if r.strip())
