"""The drift drivers end to end on a one-layer KDA toy built on evalkit's kernels (CPU path).

The toy is a real recurrence whose state pool is stored in the arm's dtype by the same kernels
the engine uses, so these orderings are measured, not assumed. The same checks on tiny
transformers-built checkpoints through the engine live in test_drift_engine.py.
"""

from __future__ import annotations

import json

import torch

from evalkit.drift.generate import generate_greedy
from evalkit.drift.prompts import Prompt
from evalkit.drift.report import drift_markdown
from evalkit.drift.rundir import is_drift_run
from evalkit.drift.study import StudyConfig, run_study
from evalkit.drift.teacher_forced import run_teacher_forced
from evalkit.kernels import STATE_DTYPES, kda_decode, kda_prefill


class ToyModel:
    """Embedding -> one KDA layer (long-memory gates) -> tied readout."""

    def __init__(self, vocab: int = 96, H: int = 2, K: int = 16, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        D = H * K
        self.H, self.K, self.vocab_size, self.device = H, K, vocab, torch.device("cpu")
        self.emb = torch.randn(vocab, D, generator=g)
        self.W = {n: torch.randn(D, D, generator=g) / D**0.5 for n in ("q", "k", "v", "g", "o")}
        self.Wb = torch.randn(D, H, generator=g) / D**0.5
        self.A_log = torch.zeros(H)
        self.dt_bias = torch.full((D,), -6.0)  # decay ~0.998 per token: the state keeps a long memory

    def open_session(self, state_dtype: str) -> ToySession:
        return ToySession(self, state_dtype)

    def describe(self) -> dict:
        return {"path": "toy", "config_hash": "toy"}

    def tokenize(self, text: str) -> list[int]:
        return [b % self.vocab_size for b in text.encode()]


class ToySession:
    def __init__(self, m: ToyModel, state_dtype: str):
        self.m, self.state_dtype = m, state_dtype
        self.pool = torch.zeros(1, m.H, m.K, m.K, dtype=STATE_DTYPES[state_dtype])
        self.started = False

    def _inputs(self, tokens):
        m = self.m
        x = m.emb[tokens]
        T = x.shape[0]
        q, k, v, gr = ((x @ m.W[n]).view(T, m.H, m.K) for n in ("q", "k", "v", "g"))
        return q, k, v * 4.0, gr, x @ m.Wb

    def _logits(self, o):
        return (o.reshape(o.shape[0], -1) @ self.m.W["o"]) @ self.m.emb.T

    def prefill(self, tokens):
        q, k, v, gr, b = self._inputs(tokens)
        o = kda_prefill(
            q,
            k,
            v,
            gr,
            b,
            self.m.A_log,
            self.m.dt_bias,
            self.pool,
            torch.tensor([0]),
            torch.tensor([0, len(tokens)], dtype=torch.int32),
            torch.tensor([self.started]),
        )
        self.started = True
        return self._logits(o)

    def decode(self, tokens):
        q, k, v, gr, b = self._inputs(tokens)
        if not self.started:  # a fresh sequence: the pool slot is zero, as the engine guarantees
            self.pool.zero_()
            self.started = True
        outs = [
            kda_decode(
                q[t : t + 1],
                k[t : t + 1],
                v[t : t + 1],
                gr[t : t + 1],
                b[t : t + 1],
                self.m.A_log,
                self.m.dt_bias,
                self.pool,
                torch.tensor([0]),
            )[0]
            for t in range(len(tokens))
        ]
        return self._logits(torch.stack(outs))

    def states(self):
        return [self.pool[0]]

    def close(self):
        pass


TOY = ToyModel()
TOKENS = torch.randint(0, TOY.vocab_size, (600,), generator=torch.Generator().manual_seed(1))


def _final_state_error(res, arm):
    last = max(r["position"] for r in res.traces[arm].states)
    return max(r["rel_fro"] for r in res.traces[arm].states if r["position"] == last)


def test_fp32_against_fp32_is_exactly_zero():
    for mode in ("prefill", "decode"):
        res = run_teacher_forced(TOY, TOKENS[:300], ["fp32"], mode, chunk_size=64, decode_block=50)
        b = res.traces["fp32"].buckets
        assert b["kl"].total.sum() == 0 and b["kl"].count.sum() == 300
        assert b["top1_disagree"].total.sum() == 0 and b["abs_dnll"].maximum.max() == 0
        assert all(r["rel_fro"] == 0 for r in res.traces["fp32"].states)


def test_orderings_bf16_over_fp16_and_decode_over_prefill():
    pre = run_teacher_forced(TOY, TOKENS, ["fp16", "bf16"], "prefill", chunk_size=64)
    dec = run_teacher_forced(TOY, TOKENS, ["fp16", "bf16"], "decode", decode_block=128)
    for res in (pre, dec):
        kl = {a: res.traces[a].buckets["kl"].total.sum() for a in ("fp16", "bf16")}
        assert 0 < kl["fp16"] < kl["bf16"]
        assert 0 < _final_state_error(res, "fp16") < _final_state_error(res, "bf16")
    for arm in ("fp16", "bf16"):
        assert _final_state_error(dec, arm) > _final_state_error(pre, arm)
    # the first prefill chunk never reads a rounded state: exactly zero there
    kl = pre.traces["bf16"].buckets["kl"]
    first_chunk = kl.edges[1:] - 1 <= 64
    assert kl.total[first_chunk].sum() == 0 and kl.total[~first_chunk].sum() > 0


def test_decode_blocks_stop_at_checkpoints():
    res = run_teacher_forced(TOY, TOKENS[:200], ["fp16"], "decode", decode_block=64)
    assert sorted({r["position"] for r in res.traces["fp16"].states}) == [1, 2, 4, 8, 16, 32, 64, 128, 200]


def test_free_running_fp32_twice_is_identical():
    a = generate_greedy(TOY, TOKENS[:40], "fp32", 30, chunk_size=16)
    b = generate_greedy(TOY, TOKENS[:40], "fp32", 30, chunk_size=16)
    assert a.tokens == b.tokens and len(a.tokens) == 30 and a.nonfinite_logits == 0


def _prompts(n: int, length: int) -> list[Prompt]:
    g = torch.Generator().manual_seed(5)
    return [
        Prompt(torch.randint(0, TOY.vocab_size, (length,), generator=g).tolist(), {"seed": i})
        for i in range(n)
    ]


def test_a_study_writes_a_complete_run_directory(tmp_path):
    cfg = StudyConfig(
        arms=["fp16", "bf16"], chunk_size=64, decode_block=128, generate=16, prompt_length=32, title="toy"
    )
    summary = run_study(TOY, _prompts(2, 256), cfg, tmp_path / "run", show_progress=False)
    d = tmp_path / "run"
    for f in (
        "manifest.json",
        "summary.json",
        "prompts.json",
        "buckets.csv",
        "buckets.json",
        "prompt_buckets.csv",
        "prompt_results.csv",
        "states.csv",
        "states.json",
        "state_errors.csv",
        "free_running.json",
        "summary.md",
        "kl.png",
        "top1.png",
        "nll.png",
        "state.png",
    ):
        assert (d / f).is_file(), f
    assert is_drift_run(d) and not is_drift_run(tmp_path)
    man = json.loads((d / "manifest.json").read_text())
    assert man["kind"] == "drift" and man["drift"]["input"] == {"n_prompts": 2, "length": 256}
    assert man["finished_at"] and man["drift"]["floor_arm"] == "fp32-aa"
    st = summary["study"]
    assert set(st) == {"prefill", "decode"}
    for mode in st:
        for arm in ("fp16", "bf16"):
            a = st[mode]["arms"][arm]
            assert a["mean_kl"]["n"] == 2 and a["mean_kl"]["mean"] > 0
            assert set(a["growth"]) == {"kl", "top1_disagree", "abs_dnll", "state_rel_fro"}
    fr = summary["free_running"]
    assert fr["n_tokens"] == 16 and set(fr["arms"]) == {"fp16", "bf16"}
    md = drift_markdown(d)
    assert "Teacher-forced, decode" in md and "| bf16 |" in md and "Free-running" in md
    assert "KL(fp32‖bf16) per token" in md
    rows = json.loads((d / "buckets.json").read_text())
    assert {r["metric"] for r in rows} == {"kl", "top1_disagree", "abs_dnll"}
    assert {r["n_prompts"] for r in rows} == {2}


def test_stopping_between_checkpoints_compares_the_state_there(monkeypatch):
    """Prefill chunks of 40 put checkpoints at 40, 120, 240, 400; a budget that ends after the
    second chunk (position 80, no checkpoint) still compares the states at 80."""
    import types

    from evalkit.drift import teacher_forced

    clock = [0.0]
    monkeypatch.setattr(teacher_forced, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    def tick(n, _L):
        clock[0] += 10.0

    res = run_teacher_forced(
        TOY, TOKENS[:400], ["fp16"], "prefill", chunk_size=40, deadline=15.0, progress=tick
    )
    assert res.length == 80 and res.requested_length == 400
    assert sorted({r["position"] for r in res.traces["fp16"].states}) == [40, 80]


class _BrokenDecode(ToyModel):
    """The bf16 arm fails in decode mode (as an out-of-memory would): the rest must survive."""

    def open_session(self, state_dtype):
        sess = ToySession(self, state_dtype)
        if state_dtype == "bf16":

            def fail(tokens):
                raise RuntimeError("simulated device failure")

            sess.decode = fail
        return sess


def test_a_failing_phase_is_recorded_and_the_others_kept(tmp_path, capsys):
    cfg = StudyConfig(arms=["bf16"], chunk_size=32, decode_block=32, generate=4, prompt_length=8)
    s = run_study(_BrokenDecode(), _prompts(2, 96), cfg, tmp_path / "r", show_progress=False, plots=False)
    assert "prefill" in s["study"] and "decode" not in s["study"]
    phases = [e["phase"] for e in s["errors"]]
    assert phases == ["teacher-forced decode, prompt 0", "free running"]  # free running decodes too
    assert "simulated device failure" in (tmp_path / "r" / "summary.md").read_text()
    assert "simulated device failure" in capsys.readouterr().err
