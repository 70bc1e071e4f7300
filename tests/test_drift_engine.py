"""`evalkit drift` on tiny transformers-built Kimi-Linear checkpoints through evalkit's engine.

The done-when orderings, measured on real runs (not constants): an fp32 arm against the fp32
baseline gives exactly zero; bf16 drifts more than fp16 on the same tokens; decode mode (state
rounded every token) drifts more than prefill mode (rounded once per chunk).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from evalkit.backends.local_probe import EngineDriftModel
from evalkit.cli import main as cli_main
from evalkit.drift.teacher_forced import run_teacher_forced

L, CHUNK = 256, 32


def _tokens(model: EngineDriftModel, n: int) -> torch.Tensor:
    from evalkit.drift.inputs import gsm8k_text
    from evalkit.testing.tiny_models import gsm8k_dir

    ids, _ = gsm8k_text(model.tokenize, n, str(gsm8k_dir()))
    return torch.tensor(ids)


@pytest.fixture(scope="module")
def hybrid(tiny_hybrid_ckpt):
    return EngineDriftModel.load(str(tiny_hybrid_ckpt), device="cpu", max_len=1024, chunk_size=CHUNK)


@pytest.fixture(scope="module")
def runs(hybrid):
    toks = _tokens(hybrid, L)
    return {
        mode: run_teacher_forced(
            hybrid, toks, ["fp32", "fp16", "bf16"], mode, chunk_size=CHUNK, decode_block=128
        )
        for mode in ("prefill", "decode")
    }


def _kl(res, arm):
    b = res.traces[arm].buckets["kl"]
    return b.total.sum() / b.count.sum()


def _state_err(res, arm):
    """Mean over KDA layers of the relative state error at the last position."""
    rows = res.traces[arm].states
    last = max(r["position"] for r in rows)
    vals = [r["rel_fro"] for r in rows if r["position"] == last]
    return sum(vals) / len(vals)


def test_fp32_arm_against_fp32_is_exactly_zero(runs):
    for res in runs.values():
        tr = res.traces["fp32"]
        assert tr.buckets["kl"].count.sum() == L and tr.buckets["kl"].total.sum() == 0.0
        assert tr.buckets["kl"].maximum.max() == 0.0
        assert tr.buckets["top1_disagree"].total.sum() == 0.0  # 100% top-1 agreement
        assert tr.buckets["abs_dnll"].maximum.max() == 0.0
        assert tr.states and all(r["rel_fro"] == 0.0 for r in tr.states)


def test_bf16_drifts_more_than_fp16(runs):
    for res in runs.values():
        assert 0 < _kl(res, "fp16") < _kl(res, "bf16")
        assert 0 < _state_err(res, "fp16") < _state_err(res, "bf16")


def test_decode_rounds_more_than_prefill(runs):
    for arm in ("fp16", "bf16"):
        assert _state_err(runs["decode"], arm) > 2 * _state_err(runs["prefill"], arm)
        assert _kl(runs["decode"], arm) > _kl(runs["prefill"], arm)
    # prefill: the first chunk never reads a rounded state back, so it is exact
    kl = runs["prefill"].traces["bf16"].buckets["kl"]
    first_chunk = kl.edges[1:] - 1 <= CHUNK
    assert kl.total[first_chunk].sum() == 0.0 and kl.total[~first_chunk].sum() > 0


def test_block_decode_matches_engine_decode_steps(hybrid):
    """The fast decode (per-token recurrence inside a batched forward) against the engine's own
    decode steps: the same numbers in fp32, the same size of drift in bf16."""
    toks = _tokens(hybrid, 96)
    out = {}
    for impl in ("block", "steps"):
        hybrid.decode_impl = impl
        try:
            for arm in ("fp32", "bf16"):
                s = hybrid.open_session(arm)
                logits = torch.cat([s.prefill(toks[:32]), s.decode(toks[32:])])
                out[impl, arm] = (logits, [x.float().clone() for x in s.states()])
                s.close()
        finally:
            hybrid.decode_impl = "block"
    a, b = out["block", "fp32"][0], out["steps", "fp32"][0]
    assert (a - b).abs().max() <= 1e-4 * b.abs().max()

    def err(impl):
        ref, arm = out[impl, "fp32"][1], out[impl, "bf16"][1]
        return sum(float((x - r).norm() / r.norm()) for x, r in zip(arm, ref)) / len(ref)

    assert err("block") > 0 and err("steps") > 0
    assert 1 / 3 < err("block") / err("steps") < 3


def test_cli_writes_a_run_directory(tiny_hybrid_ckpt, tmp_path, capsys):
    out = tmp_path / "run"
    rc = cli_main(
        [
            "drift",
            "--model",
            str(tiny_hybrid_ckpt),
            "--task",
            "passkey",
            "--prompts",
            "3",
            "--length",
            "160",
            "--chunk-size",
            "32",
            "--generate",
            "12",
            "--prompt-length",
            "48",
            "--out",
            str(out),
            "--no-progress",
            "--device",
            "cpu",
        ]
    )
    assert rc == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "%|" not in captured.err, captured.err  # --no-progress: no bar, building prompts either
    assert "drift vs the fp32 arm: 3 prompts" in printed and "free running" in printed
    assert "prefill mode: KL(fp32‖fp16) per token" in printed and "across 3 prompts" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kind"] == "drift" and set(summary["study"]) == {"prefill", "decode"}
    assert set(summary["study"]["decode"]["arms"]) == {"fp16", "bf16", "fp32-aa"}
    prompts = json.loads((out / "prompts.json").read_text())
    assert [p["doc_index"] for p in prompts] == [0, 1, 2] and {p["task"] for p in prompts} == {"passkey"}
    assert len({p["sha256"] for p in prompts}) == 3 and len({p["length"] for p in prompts}) == 1
    for f in ("kl.png", "top1.png", "nll.png", "state.png", "buckets.csv", "states.csv", "summary.md"):
        assert (out / f).is_file()
    man = json.loads((out / "manifest.json").read_text())
    assert man["model"]["kda_layers"] == 3 and man["model"]["mla_layers"] == 1
    cmd = man["command"]
    assert cmd[:2] == ["evalkit", "drift"] and cmd[cmd.index("--length") + 1] == "160"
    fr = summary["free_running"]
    assert fr["n_tokens"] == 12 and set(fr["arms"]) == {"fp16", "bf16"}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--arms", "fp8"], "--arms: arm 'fp8': unknown state format 'fp8'"),
        (["--arms", "fp16@chunk=16,bf16@chunk=32"], "drift compares arms at one chunk"),
        (["--arms", "fp16@chunk=16", "--chunk-size", "32"], "drift compares arms at one chunk"),
        (["--arms", "fp16,float16"], "lists an arm twice"),
        (["--arms", "fp32-aa"], "is the A/A floor arm"),
        (["--prompts", "2"], "--input is one prompt"),
        (["--length", "4x"], "bad length"),
        (["--length", "100k"], "fewer than --length"),
    ],
)
def test_cli_refuses_bad_input(tiny_hybrid_ckpt, tmp_path, capsys, argv, message):
    text = tmp_path / "in.txt"
    text.write_text("A short text. " * 20)
    rc = cli_main(
        [
            "drift",
            "--model",
            str(tiny_hybrid_ckpt),
            "--input",
            str(text),
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
            *argv,
        ]
    )
    assert rc == 2
    assert message in capsys.readouterr().err


def test_an_arm_the_engine_cannot_store_is_a_one_line_error(tiny_hybrid_ckpt, tmp_path, capsys, monkeypatch):
    from evalkit.kernels import KernelInputError

    def refuse(self, state_dtype):
        if state_dtype != "fp32":
            raise KernelInputError(f"unknown state dtype {state_dtype!r}; supported: fp32, fp16, bf16")
        return orig(self, state_dtype)

    orig = EngineDriftModel.open_session
    monkeypatch.setattr(EngineDriftModel, "open_session", refuse)
    text = tmp_path / "in.txt"
    text.write_text("A short text. " * 20)
    argv = [
        "drift",
        "--model",
        str(tiny_hybrid_ckpt),
        "--input",
        str(text),
        "--length",
        "40",
        "--chunk-size",
        "16",
    ]
    rc = cli_main([*argv, "--arms", "m3-rtz", "--out", str(tmp_path / "r"), "--no-progress", "--no-plots"])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown state dtype 'm3-rtz'" in err and "Traceback" not in err


def test_cli_without_model_or_reference_is_a_clear_error(tmp_path, capsys, monkeypatch):
    # the reference model's files are not where evalkit looks (an empty copy location)
    monkeypatch.setenv("EVALKIT_REFERENCE_MODEL", str(tmp_path / "no-model-here"))
    assert cli_main(["drift", "--out", str(tmp_path / "r")]) == 2
    assert "pass --model PATH" in capsys.readouterr().err


def test_inputs_give_the_requested_tokens(hybrid, tmp_path):
    from evalkit.drift import inputs
    from evalkit.drift.prompts import task_prompts
    from evalkit.testing.tiny_models import gsm8k_dir

    ids, info = inputs.gsm8k_text(hybrid.tokenize, 700, str(gsm8k_dir()))
    assert len(ids) == 700 and "GSM8K" in info["source"]
    text = hybrid.tokenizer.decode(ids[:50])
    assert hybrid.tokenize(text)[:40] == ids[:40]  # real text, round-trips through the tokenizer
    (p,) = task_prompts("passkey", hybrid.tokenizer, hybrid.tokenize, 400, 1, seed=3, show_progress=False)
    ids, info = p.ids, p.info
    # the task's own count of its prompt, in the same tokenizer (filler granularity: <= target)
    assert len(ids) == info["task_meta"]["length"] <= 400 and len(ids) > 300 and info["task"] == "passkey"
    f = tmp_path / "ids.json"
    f.write_text(json.dumps(list(range(30))))
    assert inputs.from_file(str(f), hybrid.tokenize, 20)[0] == list(range(20))
    a, _ = inputs.random_ids(512, 50, seed=1)
    b, _ = inputs.random_ids(512, 50, seed=1)
    assert a == b and max(a) < 512 and len(set(a)) > 30


@pytest.mark.parametrize("arm, plain", [("m3", "fp32"), ("bf16-rtz", "bf16"), ("fp16-sr", "fp16")])
def test_block_decode_stores_every_format_the_way_decode_steps_do(hybrid, arm, plain):
    """The per-token recurrence inside a batched forward must round each token's state the arm's
    way, as the engine's decode steps do: an mN format keeps an fp32 pool (a store that ignored the
    format would leave it exact), and truncation or stochastic rounding must not silently become
    round-to-nearest. `plain` is what a format-blind store would give."""
    toks = _tokens(hybrid, 96)
    states = {}
    for impl in ("block", "steps"):
        hybrid.decode_impl = impl
        try:
            for a in (arm, plain):
                s = hybrid.open_session(a)
                s.prefill(toks[:32])
                s.decode(toks[32:])
                states[impl, a] = [x.float().clone() for x in s.states()]
                s.close()
        finally:
            hybrid.decode_impl = "block"

    def dist(x, y):
        return sum(float((a - b).norm() / b.norm()) for a, b in zip(x, y)) / len(x)

    block = states["block", arm]
    assert dist(block, states["steps", arm]) < 0.5 * dist(block, states["steps", plain])


def test_cli_resume_continues_a_run_and_refuses_a_changed_one(tiny_hybrid_ckpt, tmp_path, capsys):
    """`evalkit drift --resume`: a second run with more --prompts runs only the new ones; without
    --resume the folder is refused, and with other arms the resume is a one-line error."""
    out = tmp_path / "r"
    argv = ["drift", "--model", str(tiny_hybrid_ckpt), "--random-tokens", "--length", "48"]
    argv += ["--chunk-size", "16", "--arms", "fp16", "--out", str(out), "--no-progress", "--no-plots"]
    assert cli_main([*argv, "--prompts", "1"]) == 0
    assert cli_main([*argv, "--prompts", "2"]) == 2 and "already holds a drift run" in capsys.readouterr().err
    assert cli_main([*argv, "--prompts", "2", "--resume"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert {m: s["n_prompts"] for m, s in summary["study"].items()} == {"prefill": 2, "decode": 2}
    # a full arm says the same chunk: the same study, resumed (nothing left to run)
    same = [a if a != "fp16" else "fp16@chunk=16" for a in argv if a not in ("--chunk-size", "16")]
    assert cli_main([*same, "--prompts", "2", "--resume"]) == 0
    changed = [a if a != "fp16" else "bf16" for a in argv]
    assert cli_main([*changed, "--prompts", "3", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "drift.arms is ['fp16'] there but ['bf16'] now" in err and "Traceback" not in err


def test_a_study_records_which_weights_it_measured():
    """v1 and v2 of the reference model share a config; only the weights fingerprint tells their
    studies apart (a resumed study of one must refuse the other)."""
    from evalkit.reference_model import ASSET_DIR

    v2 = EngineDriftModel.load(str(ASSET_DIR), device="cpu", max_len=1024, chunk_size=CHUNK)
    v1_dir = Path(__file__).resolve().parents[1] / "models" / "reference-model-v1"
    v1 = EngineDriftModel.load(str(v1_dir), device="cpu", max_len=1024, chunk_size=CHUNK)
    d1, d2 = v1.describe(), v2.describe()
    assert d1["config_hash"] == d2["config_hash"]
    assert len(d2["weights_fingerprint"]) == 64
    assert d1["weights_fingerprint"] != d2["weights_fingerprint"]


def test_a_study_names_the_kernel_that_steps_its_state():
    """Decode mode's kernel is part of a study's identity, per recurrence: a Mamba2 model's study
    names the SSD kernels (its one-launch kernel and its per-token launches need not agree to the
    last bit on a GPU), a KDA model's the KDA ones. The Mamba2 model's H200 study, written when
    the description named the KDA kernel whatever stepped the state, is not resumed by this code."""
    from evalkit.reference_model import ASSET_DIR

    repo = Path(__file__).resolve().parents[1]
    mamba2 = EngineDriftModel.load(
        str(repo / "models" / "reference-model-mamba2"), device="cpu", max_len=1024
    )
    kda = EngineDriftModel.load(str(ASSET_DIR), device="cpu", max_len=1024)
    assert "kernels.ssd_decode.recurrent" in mamba2.describe()["decode_kernel"]
    assert "kernels.kda_decode.recurrent" in kda.describe()["decode_kernel"]
    mamba2.fused_decode = kda.fused_decode = False
    assert mamba2.describe()["decode_kernel"] == "kernels.ssd_decode per token"
    assert kda.describe()["decode_kernel"] == "kernels.kda_decode per token"
    old = repo / "results" / "reference-model-mamba2" / "h200" / "drift-32k" / "runs" / "ref-fp32-weights"
    recorded = json.loads((old / "manifest.json").read_text())["model"]["decode_kernel"]
    assert "kda_decode" in recorded
