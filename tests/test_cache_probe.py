"""`evalkit cache-probe`: a server whose cached answers differ (cached states in another dtype, as
once in SGLang) is reported as depending on its prefix cache; one whose do not, and `evalkit serve`
on the CPU, are not. The fake servers are real HTTP servers driven through the CLI."""

from __future__ import annotations

import json

import pytest
from helpers.cached_server import CachedServer
from scipy import stats

from evalkit.cache_probe.probe import WARM_FLOOR, QuestionProbe
from evalkit.cache_probe.server import Reply
from evalkit.cache_probe.verdict import judge, sign_test
from evalkit.cli import main


def _probe(tmp_path, url, *extra):
    out = tmp_path / "probe"
    rc = main(
        [
            "cache-probe",
            "--server",
            url,
            "--limit",
            "9",
            "--shots",
            "2",
            "--max-tokens",
            "6",
            "--out",
            str(out),
            *extra,
        ]
    )
    return rc, json.loads((out / "cache_probe.json").read_text()), (out / "cache_probe.md").read_text()


@pytest.mark.parametrize("flush_path", ["/reset_prefix_cache", "/flush_cache"])
def test_a_server_whose_cached_answers_differ_is_reported(tmp_path, flush_path, capsys):
    with CachedServer(cache_dtype_bug=True, flush_path=flush_path) as server:
        rc, record, md = _probe(tmp_path, server.url)
    assert rc == 1
    r = record["cache_probe"]
    assert r["depends"] and r["cold_method"] == f"flush {flush_path}" and r["floor"] == "cold-cold"
    # every warm answer was a cache hit, every cold one a miss
    assert [cached for _, cached in server.requests] == [False, False, True] * 9
    assert server.flushes == 1 + 2 * 9  # the probe for the endpoint, then two per question
    flips = sum(server.flips(p) for p, cached in server.requests if cached)
    assert 0 < flips < 9 and r["floor_text_departures"] == 0
    assert r["warm_text_departures"] == r["text_warm_only"] == flips and r["text_floor_only"] == 0
    assert r["logprob_warm_above"] == 9 and r["logprob_warm_below"] == 0
    assert r["logprob_p"] == pytest.approx(0.5**9)
    assert (
        "answers depend on the prefix cache" in md
        and "answers depend on the prefix cache" in capsys.readouterr().out
    )
    assert record["server"]["model"] == "cached-model" and record["settings"]["shots"] == 2
    assert len(record["questions"]) == 9 and record["source_hash"]


def test_a_server_whose_cached_answers_do_not_differ_passes(tmp_path):
    with CachedServer(cache_dtype_bug=False) as server:
        rc, record, md = _probe(tmp_path, server.url)
    r = record["cache_probe"]
    assert rc == 0 and not r["depends"] and "no dependence on the prefix cache shown" in md
    assert r["warm_text_departures"] == r["floor_text_departures"] == 0
    assert r["logprob_warm_above"] == r["logprob_warm_below"] == 0 and r["p_holm"] == [1.0, 1.0]


def test_without_a_flush_endpoint_a_unique_prefix_makes_cold_and_two_warm_answers_the_floor(tmp_path):
    with CachedServer(cache_dtype_bug=True, flush_path=None) as server:
        rc, record, md = _probe(tmp_path, server.url)
    r = record["cache_probe"]
    assert rc == 1 and r["depends"] and r["cold_method"] == "unique-prefix" and r["floor"] == "warm-warm"
    assert "unique prefix" in md and "| warm vs warm (floor) | 0 |" in md
    assert [cached for _, cached in server.requests] == [False, True, True] * 9
    prompts = [p for p, _ in server.requests]
    assert all(prompts[i] == prompts[i + 1] == prompts[i + 2] for i in range(0, 27, 3))
    assert len(set(prompts)) == 9 and all(p.startswith("[") for p in prompts)  # a new prefix each


def test_no_flush_leaves_the_cache_alone_and_the_key_is_not_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    with CachedServer(cache_dtype_bug=True) as server:
        rc, record, _ = _probe(tmp_path, server.url, "--no-flush")
    assert rc == 1 and server.flushes == 0 and record["cache_probe"]["cold_method"] == "unique-prefix"
    assert "sk-secret-123" not in (tmp_path / "probe" / "cache_probe.json").read_text()


def _reply(text, lps):
    return Reply(text, tuple(f"t{i}" for i in range(len(lps))), tuple(lps))


def test_the_verdict_pairs_warm_with_the_floor_per_question():
    """A noisy floor (cold answers that differ among themselves) absorbs warm departures of the
    same size: warm must depart beyond it, question by question."""
    same, moved = _reply("a", [-1.0, -2.0]), _reply("a", [-1.0, -2.1])
    noisy = [QuestionProbe(i, same, moved, moved) for i in range(10)]  # warm = replicate: floor noise
    r = judge(noisy, "flush /x")
    assert (r.logprob_warm_above, r.logprob_warm_below) == (0, 0) and not r.depends
    beyond = [QuestionProbe(i, same, same, moved) for i in range(6)] + [QuestionProbe(6, same, moved, same)]
    r = judge(beyond, "flush /x")
    assert (r.logprob_warm_above, r.logprob_warm_below) == (6, 1)
    assert r.logprob_p == pytest.approx(stats.binom.sf(5, 7, 0.5))  # P(X >= 6), X ~ Bin(7, 1/2)
    assert r.p_holm[1] == pytest.approx(min(1.0, 2 * r.logprob_p)) and r.depends == (r.p_holm[1] <= 0.05)
    assert sign_test(0, 0) == 1.0
    # without a flush the floor is warm against warm again: cold is not part of it
    warm_floor = [QuestionProbe(i, same, moved, moved, WARM_FLOOR) for i in range(8)]
    r = judge(warm_floor, "unique-prefix")
    assert r.floor == "warm-warm" and r.floor_text_departures == 0
    assert (r.logprob_warm_above, r.logprob_warm_below) == (8, 0) and r.depends


def test_bad_input_is_one_line(tmp_path, capsys):
    assert main(["cache-probe", "--server", "127.0.0.1:9", "--limit", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--limit must be at least 1" in err[0]


def test_evalkit_serve_on_the_cpu_does_not_depend_on_a_cache(tmp_path, tiny_hybrid_ckpt):
    from evalkit.engine import LLMEngine
    from evalkit.serve.server import Server

    engine = LLMEngine(str(tiny_hybrid_ckpt), state_dtype="fp16", device="cpu")
    with Server(engine, model_name="tiny") as srv:
        out = tmp_path / "probe"
        argv = ["cache-probe", "--server", srv.url, "--limit", "4", "--shots", "1", "--max-tokens", "6"]
        rc = main([*argv, "--out", str(out)])
    r = json.loads((out / "cache_probe.json").read_text())["cache_probe"]
    assert rc == 0 and not r["depends"] and r["cold_method"] == "unique-prefix"
    assert r["logprob_questions"] == 4  # evalkit serve returns the log-probabilities
    # no prefix cache and a deterministic engine: warm equals cold, and the warm floor is 0 too
    assert r["warm_text_departures"] == r["floor_text_departures"] == 0
    assert r["logprob_warm_above"] == r["logprob_warm_below"] == 0
