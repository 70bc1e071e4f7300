"""`evalkit run --device cpu,cpu`: two engine processes, questions sharded, results funnelled to the
one writer; the samples equal a one-device run's (the engine is batch-invariant)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.backends.data_parallel import parse_devices
from evalkit.cli import main as cli
from evalkit.errors import InputError
from evalkit.tasks.data import BUNDLED_DIR

COMMON = ["--arm", "fp32", "--tasks", "gsm8k", "--limit", "5", "--max-new-tokens", "8", "--no-progress"]


def _samples(out: Path) -> dict:
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    return {(s["task"], str(s["doc_id"])): s for s in rows}


def test_parse_devices(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert parse_devices(None, None) is None and parse_devices("cuda:1", None) is None
    assert parse_devices("cuda:0, cuda:1", None) == ["cuda:0", "cuda:1"]
    assert parse_devices(None, 2) == ["cuda:0", "cuda:1"] == parse_devices("cuda", 2)
    assert parse_devices("cpu", 3) == ["cpu"] * 3
    assert parse_devices("cpu", 1) is None
    with pytest.raises(InputError):
        parse_devices("cuda:0,cuda:1", 3)
    with pytest.raises(InputError):
        parse_devices(None, 0)


def test_data_parallel_on_a_machine_without_a_gpu_uses_the_cpu(monkeypatch):
    """Issue 43, item 8: `--data-parallel 2` with no --device named a cuda:0 the user never typed."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert parse_devices(None, 2) == ["cpu", "cpu"]


def test_data_parallel_auto_picks_one_engine_per_gpu_or_per_cpu_core(monkeypatch):
    """`--data-parallel auto`: on the CPU one engine per usable core over the engine's threads per
    process; on CUDA one per visible GPU ("cuda:N": one); several --device names are kept."""
    import torch

    from evalkit.backends import data_parallel as dp

    monkeypatch.delenv("EVALKIT_CPU_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(dp.os, "sched_getaffinity", lambda _: set(range(4)), raising=False)
    assert parse_devices("cpu", "auto") == ["cpu"] * 4
    monkeypatch.setenv("EVALKIT_CPU_THREADS", "2")
    assert parse_devices("cpu", "auto") == ["cpu"] * 2
    monkeypatch.setenv("EVALKIT_CPU_THREADS", "4")
    assert parse_devices("cpu", "auto") is None  # one engine: no worker processes
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("EVALKIT_CPU_THREADS", "1")
    assert parse_devices(None, "auto") == ["cpu"] * 4  # the default device is the CPU here
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert parse_devices(None, "auto") == ["cuda:0", "cuda:1"] == parse_devices("cuda", "auto")
    assert parse_devices("cuda:1", "auto") is None
    assert parse_devices("cuda:0,cuda:1", "auto") == ["cuda:0", "cuda:1"]


def test_data_parallel_flag_takes_a_number_or_auto(capsys):
    from evalkit.commands.run import data_parallel_arg

    assert data_parallel_arg("auto") == "auto" and data_parallel_arg("3") == 3
    with pytest.raises(SystemExit) as exc:
        cli(["run", "--arm", "fp32", "--data-parallel", "two"])
    assert exc.value.code == 2 and "whole number or 'auto'" in capsys.readouterr().err


def test_two_cpu_workers_equal_one_device(tiny_hybrid_ckpt, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    data = ["--model", str(tiny_hybrid_ckpt), "--data-dir", str(BUNDLED_DIR), *COMMON]
    assert cli(["run", *data, "--device", "cpu", "--out", str(one)]) == 0
    assert cli(["run", *data, "--device", "cpu,cpu", "--out", str(two)]) == 0
    a, b = _samples(one), _samples(two)
    assert len(a) == 5 and a.keys() == b.keys()
    assert len({s["response"] for s in a.values()}) > 1, "responses too alike to catch a mix-up"
    for k in a:
        for field in ("prompt_hash", "response", "n_generated", "finish_reason", "correct", "error"):
            assert a[k][field] == b[k][field], (k, field)
    backend = json.loads((two / "manifest.json").read_text())["backend"]
    assert backend["devices"] == ["cpu", "cpu"] and backend["name"] == "local"
    assert json.loads((two / "summary.json").read_text()) == json.loads((one / "summary.json").read_text())


def test_a_worker_that_cannot_start_is_one_line(tiny_hybrid_ckpt, tmp_path, capsys):
    args = [
        "run",
        "--model",
        str(tiny_hybrid_ckpt),
        *COMMON,
        "--device",
        "cpu,nodevice",
        "--out",
        str(tmp_path),
    ]
    assert cli(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nodevice" in err[0], err


def test_each_gpu_worker_sees_only_its_gpu():
    from evalkit.backends.data_parallel import pin_visible_gpu

    assert pin_visible_gpu("cuda:1", None) == ("cuda:0", "1")
    assert pin_visible_gpu("cuda", None) == ("cuda:0", "0")
    assert pin_visible_gpu("cuda:1", "4,6") == ("cuda:0", "6")
    assert pin_visible_gpu("cpu", "4,6") == ("cpu", "4,6")
    with pytest.raises(InputError):
        pin_visible_gpu("cuda:2", "4,6")
