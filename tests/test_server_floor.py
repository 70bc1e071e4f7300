"""issue 38: a server's numerics floor from a replicate of the baseline: `evalkit run --server
--concurrency N --request-order shuffled:SEED` sends the requests in the seeded order and records
both in the manifest; `compare --floor` takes that replicate (the same server and state dtype),
names what differs and sets the candidate's departures against the floor's; a "floor" with another
state dtype is refused. A fake OpenAI-compatible server stands in for vLLM: its answer depends on
the position a request arrives at, as a batching server's numerics do."""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler

import pytest

from evalkit.backends.request_order import request_sequence
from evalkit.cli import main as cli
from evalkit.tasks.data import BUNDLED_DIR
from tests.helpers.local_server import LocalServer

KEY = re.compile(r"The pass key is (\d+)\.")


class PositionServer(LocalServer):
    """Answers the pass key, wrong at every `wrong_every`-th arrival; reports its state dtype."""

    def __init__(self, state_dtype: str, wrong_every: int):
        self.state_dtype, self.wrong_every = state_dtype, wrong_every
        self.arrivals: list[str] = []
        super().__init__()

    def reset(self) -> None:
        self.arrivals.clear()

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/") != "/v1/models":
                    return self._send(404, {"error": "not here"})
                card = {"id": "fake", "object": "model", "mamba_ssm_cache_dtype": fake.state_dtype}
                self._send(200, {"object": "list", "data": [card]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = json.dumps(body.get("messages") or body.get("prompt"))
                key = KEY.search(prompt).group(1)
                fake.arrivals.append(key)
                position = len(fake.arrivals)
                text = " 0." if position % fake.wrong_every == 0 else f" {key}."
                choice = {"index": 0, "text": text, "finish_reason": "stop"}
                if "messages" in body:
                    choice = {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
                self._send(
                    200,
                    {
                        "id": "x",
                        "object": "text_completion",
                        "model": "fake",
                        "choices": [choice],
                        "usage": usage,
                    },
                )

        return Handler


def _run(ckpt, server, out, arm, *extra):
    args = ["run", "--model", str(ckpt), "--server", server.base_url + "/v1", "--arm", arm]
    args += ["--tasks", "passkey", "--lengths", "512", "--limit", "10", "--no-progress"]
    args += ["--data-dir", str(BUNDLED_DIR), "--out", str(out), *extra]
    server.reset()
    assert cli(args) == 0
    return list(server.arrivals)


@pytest.fixture(scope="module")
def runs(tiny_hybrid_ckpt, tmp_path_factory):
    root = tmp_path_factory.mktemp("server-floor")
    with PositionServer("float32", 4) as fp32, PositionServer("bfloat16", 2) as bf16:
        given = _run(tiny_hybrid_ckpt, fp32, root / "base", "fp32", "--concurrency", "1")
        shuffled = _run(
            tiny_hybrid_ckpt,
            fp32,
            root / "floor",
            "fp32",
            "--concurrency",
            "2",
            "--request-order",
            "shuffled:7",
        )
        _run(tiny_hybrid_ckpt, bf16, root / "cand", "bf16", "--concurrency", "1")
        _run(
            tiny_hybrid_ckpt,
            bf16,
            root / "other",
            "fp32",
            "--concurrency",
            "1",
            "--request-order",
            "shuffled:7",
        )
    return root, given, shuffled


def test_the_request_order_is_the_seeded_permutation_and_is_recorded(runs):
    root, given, shuffled = runs
    assert sorted(shuffled) == sorted(given) and shuffled != given
    # two workers take the requests in the seeded order: when one arrives, a request from earlier in
    # that order can still be on its way only in the other worker's hands, so at most one of them
    # arrives later (however the threads are scheduled: no bound on how far it is displaced)
    want = [given[i] for i in request_sequence(len(given), "shuffled:7")]
    assert len(set(want)) == len(want)
    place = {key: i for i, key in enumerate(want)}
    overtaken = [sum(place[b] < place[a] for b in shuffled[j + 1 :]) for j, a in enumerate(shuffled)]
    assert max(overtaken) <= 1
    backend = json.loads((root / "floor" / "manifest.json").read_text())["backend"]
    assert backend["request_order"] == "shuffled:7" and backend["concurrency_per_server"] == 2
    base = json.loads((root / "base" / "manifest.json").read_text())["backend"]
    assert base["request_order"] == "given" and base["concurrency_per_server"] == 1


def test_compare_takes_the_replicate_as_the_floor_and_names_what_differs(runs, capsys):
    root, _, _ = runs
    capsys.readouterr()
    rc = cli(
        [
            "compare",
            str(root / "base"),
            str(root / "cand"),
            "--floor",
            str(root / "floor"),
            "--format",
            "json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert rc == 0
    aa = report["aa"]
    assert aa["floor_differs_in"] == ["concurrency 1 → 2", "order shuffled (seed 7)"]
    assert (
        aa["note"]
        == "Numerics floor: the baseline arm again with concurrency 1 → 2; order shuffled (seed 7)."
    )
    row = aa["rows"][0]
    dep = row["departures"]
    # a departure is a different answer text: count them from the samples themselves
    texts = {}
    for name in ("base", "cand", "floor"):
        for line in (root / name / "samples.jsonl").read_text().splitlines():
            s = json.loads(line)
            texts.setdefault(name, {})[s["doc_id"]] = s["response"]
    docs = sorted(texts["base"])
    assert dep["n"] == 10
    assert dep["ab_discordant"] == sum(texts["base"][d] != texts["cand"][d] for d in docs)
    assert dep["aa_discordant"] == sum(texts["base"][d] != texts["floor"][d] for d in docs)
    assert dep["ab_discordant"] == 3  # arrivals 2, 6, 10 (at 4 and 8 both servers answer 0)
    cli(["compare", str(root / "base"), str(root / "cand"), "--floor", str(root / "floor")])
    md = capsys.readouterr().out
    assert (
        f"the candidate's generations depart from the baseline's on {dep['ab_discordant']} of 10 questions, "
        f"the floor run's on {dep['aa_discordant']}"
    ) in md


def test_a_floor_with_another_state_dtype_is_refused(runs, capsys):
    root, _, _ = runs
    capsys.readouterr()
    rc = cli(["compare", str(root / "base"), str(root / "cand"), "--floor", str(root / "other")])
    err = capsys.readouterr().err
    assert rc == 2 and "is not a replicate of the baseline (state dtype fp32 → bf16/fp32)" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "extra, why",
    [
        (
            ["--server", "http://127.0.0.1:9/v1", "--request-order", "random"],
            "must be 'given' or 'shuffled:SEED'",
        ),
        (["--request-order", "shuffled:3"], "--request-order is for --server runs"),
    ],
)
def test_a_bad_request_order_exits_2_before_anything_runs(tmp_path, capsys, extra, why):
    rc = cli(["run", "--arm", "fp32", "--tasks", "passkey", "--out", str(tmp_path / "r"), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and why in err and len(err.strip().splitlines()) == 1
