"""The results store: hashing, manifest identity, RunWriter (checks, resume, repair), summary, load_run."""

import hashlib
import json
import threading

import pytest
import torch

from evalkit import stats as st
from evalkit.errors import InputError, MismatchError
from evalkit.store import RunWriter, base_manifest, config_hash, load_run, prompt_hash, sample_key


def manifest(**over):
    m = {
        "command": ["evalkit", "run"],
        "model": {"path": "m", "config_hash": "abc"},
        "backend": {"name": "local", "base_urls": None},
        "arm": {"label": "fp16", "state_dtype": "float16", "note": "free text"},
        "tasks": {"gsm8k": {"config": {"k": 1}, "hash": config_hash({"k": 1})}},
        "seeds": {"fewshot": 1234},
        "lengths": None,
    }
    for dotted, value in over.items():
        cur = m
        *path, last = dotted.split("__")
        for part in path:
            cur = cur[part]
        cur[last] = value
    return m


def sample(doc, right=True, length=None, task="gsm8k", error=None, **extra):
    s = {
        "task": task,
        "doc_id": doc,
        "length": length,
        "prompt_hash": prompt_hash(f"q{doc}@{length}"),
        "target": "1",
        "response": "1" if right else "2",
        "correct": {} if error else {"strict-match": right, "flexible-extract": right},
        "error": error,
    }
    s.update(extra)
    return s


def test_prompt_hash_equals_lm_eval_for_text_and_is_stable_for_ids_and_messages():
    from lm_eval.utils import hash_string

    text = "Question: 2+2?\nAnswer:"
    assert prompt_hash(text) == hash_string(text) == hashlib.sha256(text.encode()).hexdigest()
    assert prompt_hash([1, 2, 3]) == hashlib.sha256(b"[1,2,3]").hexdigest()
    a = [{"role": "user", "content": "hi"}]
    b = [{"content": "hi", "role": "user"}]
    assert prompt_hash(a) == prompt_hash(b) != prompt_hash([{"role": "user", "content": "hi "}])
    assert prompt_hash("1") != prompt_hash([1])
    with pytest.raises(TypeError):
        prompt_hash(3.5)


def test_config_hash_ignores_key_order():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_base_manifest_records_provenance():
    m = base_manifest(["evalkit", "run", "--x"])
    assert m["command"] == ["evalkit", "run", "--x"]
    assert m["evalkit_version"] and m["started_at"] and m["finished_at"] is None
    assert len(m["git_commit"] or "0" * 40) == 40
    assert m["hardware"]["cpu"] and "numpy" in m["libraries"] and "scipy" in m["libraries"]


def test_new_run_writes_manifest_samples_and_summary(tmp_path):
    out = tmp_path / "run"
    w = RunWriter.open(out, manifest())
    assert json.loads((out / "manifest.json").read_text())["arm"]["state_dtype"] == "float16"
    rights = [True] * 7 + [False] * 3
    for i, ok in enumerate(rights):
        w.append(sample(i, ok))
    w.append(sample(10, error="timeout after 3 retries"))
    assert ("gsm8k", "3", None) in w.done_keys and len(w.done_keys) == 11
    summary = w.finish({"backend": {"name": "local", "engine": "x"}})
    cell = summary["gsm8k"]["strict-match"]["all"]
    assert cell == {"n": 10, "accuracy": 0.7, "stderr": pytest.approx(st.lmeval_stderr(7, 10)), "errors": 1}
    assert json.loads((out / "summary.json").read_text()) == json.loads(json.dumps(summary))
    m = json.loads((out / "manifest.json").read_text())
    assert m["finished_at"] and m["backend"]["engine"] == "x"
    run = load_run(out)
    assert len(run.samples) == 11 and run.label == "fp16" and run.kind == "evalkit"


def test_summary_per_length_and_scores(tmp_path):
    w = RunWriter.open(tmp_path / "r", manifest())
    for i in range(4):
        for length in (1024, 4096):
            w.append(
                sample(
                    i,
                    right=(i + length // 1024) % 2 == 0,
                    length=length,
                    task="niah",
                    score={"strict-match": 0.5},
                )
            )
    s = w.finish()["niah"]["strict-match"]
    assert set(s) == {"1024", "4096", "all"}
    assert s["1024"]["n"] == 4 and s["all"]["n"] == 8 and s["all"]["mean_score"] == 0.5


@pytest.mark.parametrize("field", ["task", "doc_id", "prompt_hash", "target", "response", "correct", "error"])
def test_append_refuses_a_missing_required_field(tmp_path, field):
    w = RunWriter.open(tmp_path / "r", manifest())
    s = sample(0)
    del s[field]
    with pytest.raises(ValueError, match=f"missing field '{field}'"):
        w.append(s)
    assert (tmp_path / "r" / "samples.jsonl").read_bytes() == b""


@pytest.mark.parametrize(
    "bad,msg",
    [
        ({"correct": {"x": "yes"}}, "true/false"),
        ({"length": -3}, "length"),
        ({"doc_id": True}, "doc_id"),
        ({"correct": {}}, "empty"),
        ({"score": {"x": float("nan")}}, "score"),
    ],
)
def test_append_refuses_bad_types(tmp_path, bad, msg):
    w = RunWriter.open(tmp_path / "r", manifest())
    with pytest.raises(ValueError, match=msg):
        w.append({**sample(0), **bad})


def test_append_refuses_a_duplicate_key(tmp_path):
    w = RunWriter.open(tmp_path / "r", manifest())
    w.append(sample(0))
    with pytest.raises(ValueError, match="already in"):
        w.append(sample(0, right=False))
    w.append(sample(0, length=1024))  # another length is another question


def test_resume_skips_done_keys_and_records_the_resume(tmp_path):
    out = tmp_path / "r"
    w = RunWriter.open(out, manifest())
    for i in range(3):
        w.append(sample(i))
    w.close()
    w2 = RunWriter.open(out, manifest(command=["evalkit", "run", "--again"]))
    assert w2.done_keys == {("gsm8k", str(i), None) for i in range(3)}
    w2.append(sample(3))
    w2.finish()
    m = json.loads((out / "manifest.json").read_text())
    assert m["resumes"][0]["samples_on_disk"] == 3 and m["resumes"][0]["command"][-1] == "--again"
    assert [s["doc_id"] for s in load_run(out).samples] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "override,field",
    [
        ({"model__path": "other"}, "model.path"),
        ({"model__config_hash": "zzz"}, "model.config_hash"),
        ({"backend__name": "openai"}, "backend.name"),
        ({"arm__state_dtype": "bfloat16"}, "arm.state_dtype"),
        ({"arm__label": "bf16"}, "arm.label"),
        ({"tasks__gsm8k__hash": "f" * 64}, "tasks.gsm8k.hash"),
        ({"seeds": {"fewshot": 1}}, "seeds"),
        ({"lengths": [1024]}, "lengths"),
        ({"tasks": {"other": {"hash": "1"}}}, "tasks"),
    ],
)
def test_resume_refuses_a_different_identity_naming_the_field(tmp_path, override, field):
    out = tmp_path / "r"
    RunWriter.open(out, manifest()).close()
    with pytest.raises(MismatchError, match=rf"{field.replace('.', '[.]')} is .* there but .* now"):
        RunWriter.open(out, manifest(**override))


def test_resume_refuses_other_weights_of_the_same_config(tmp_path):
    """A retrained checkpoint keeps its config hash; the weights fingerprint tells it apart."""
    out = tmp_path / "r"
    RunWriter.open(out, manifest(model__weights_fingerprint="a" * 64)).close()
    with pytest.raises(MismatchError, match=r"model[.]weights_fingerprint is .* there but .* now"):
        RunWriter.open(out, manifest(model__weights_fingerprint="b" * 64))


def test_a_run_written_before_weights_were_fingerprinted_still_resumes(tmp_path):
    out = tmp_path / "r"
    RunWriter.open(out, manifest()).close()
    RunWriter.open(out, manifest(model__weights_fingerprint="a" * 64)).close()


def test_weights_fingerprint_tells_same_size_checkpoints_apart(tmp_path):
    from safetensors.torch import save_file

    from evalkit.model.checkpoint import weights_fingerprint

    prints = []
    for seed in (0, 0, 1):
        d = tmp_path / f"ckpt{len(prints)}"
        d.mkdir()
        g = torch.Generator().manual_seed(seed)
        save_file({"w": torch.randn(300, 1000, generator=g)}, str(d / "model.safetensors"))
        prints.append(weights_fingerprint(d))
    assert prints[0] == prints[1] != prints[2]


def test_provenance_changes_do_not_block_resume(tmp_path):
    out = tmp_path / "r"
    RunWriter.open(out, manifest()).close()
    RunWriter.open(
        out, manifest(arm__note="changed", backend__base_urls=["http://x"], command=["other"])
    ).close()


def test_resume_false_refuses_an_existing_run(tmp_path):
    RunWriter.open(tmp_path / "r", manifest()).close()
    with pytest.raises(InputError, match="already holds a run"):
        RunWriter.open(tmp_path / "r", manifest(), resume=False)


def test_torn_last_line_is_repaired_with_a_one_line_notice(tmp_path, capsys):
    out = tmp_path / "r"
    w = RunWriter.open(out, manifest())
    w.append(sample(0))
    w.close()
    with open(out / "samples.jsonl", "ab") as fh:
        fh.write(b'{"task": "gsm8k", "doc_id": 1, "pro')
    with pytest.raises(InputError, match=r"samples.jsonl:2: truncated last line"):
        load_run(out)  # readers refuse; only the writer repairs
    capsys.readouterr()
    w = RunWriter.open(out, manifest())
    err = capsys.readouterr().err.strip().splitlines()  # issue 43: not a raw Python warning
    assert (
        len(err) == 1 and err[0].startswith("evalkit: notice: ") and "dropped a truncated last line" in err[0]
    )
    assert w.done_keys == {("gsm8k", "0", None)}
    w.append(sample(1))
    w.close()
    assert [s["doc_id"] for s in load_run(out).samples] == [0, 1]


def test_complete_last_line_without_newline_is_kept(tmp_path):
    out = tmp_path / "r"
    RunWriter.open(out, manifest()).close()
    (out / "samples.jsonl").write_text(json.dumps(sample(0)))
    w = RunWriter.open(out, manifest())
    assert w.done_keys == {("gsm8k", "0", None)}
    w.append(sample(1))
    w.close()
    assert len(load_run(out).samples) == 2


def test_concurrent_appends_never_interleave(tmp_path):
    w = RunWriter.open(tmp_path / "r", manifest())
    threads = [
        threading.Thread(target=lambda k=k: [w.append(sample(k * 100 + i)) for i in range(50)])
        for k in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    assert len(load_run(tmp_path / "r").samples) == 200


def test_sample_key_normalises_doc_id_and_length():
    assert sample_key({"task": "t", "doc_id": 5, "length": 1024.0}) == ("t", "5", 1024)
    assert sample_key({"task": "t", "doc_id": "5"}) == ("t", "5", None)


def test_load_run_errors_name_file_and_line(tmp_path):
    out = tmp_path / "r"
    RunWriter.open(out, manifest()).close()
    path = out / "samples.jsonl"
    good = json.dumps(sample(0))
    path.write_text(good + "\n{not json}\n" + good + "\n")
    with pytest.raises(InputError, match=r"samples.jsonl:2: malformed JSON line"):
        load_run(out)
    bad = sample(1)
    del bad["correct"]
    path.write_text(good + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(InputError, match=r"samples.jsonl:2: missing field 'correct'"):
        load_run(out)
    path.write_text(good + "\n" + good + "\n")
    with pytest.raises(InputError, match=r"samples.jsonl:2: duplicate sample gsm8k/0 \(first at .*:1\)"):
        load_run(out)
    path.write_text("")
    with pytest.raises(InputError, match="empty run"):
        load_run(out)
    with pytest.raises(InputError, match="no such file"):
        load_run(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="empty run"):
        load_run(tmp_path / "empty")


def test_each_append_is_fsynced_unless_not_durable(tmp_path, monkeypatch):
    import evalkit.store.writer as writer_mod

    calls = []
    real = writer_mod.os.fsync
    monkeypatch.setattr(writer_mod.os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    w = RunWriter.open(tmp_path / "a", manifest())
    before = len(calls)
    w.append(sample(0))
    w.append(sample(1))
    assert len(calls) - before == 2
    w.close()
    w = RunWriter.open(tmp_path / "b", manifest(), durable=False)
    before = len(calls)
    w.append(sample(0))
    assert len(calls) == before
    w.close()


def test_resume_refuses_sample_lines_of_a_task_the_manifest_lacks(tmp_path):
    """Issue 43, item 4: lines of another run's task are not silently counted as done."""
    run = tmp_path / "run"
    with RunWriter.open(run, manifest()) as w:
        w.append(sample(0))
    with open(run / "samples.jsonl", "a") as fh:
        fh.write(json.dumps(sample(0, task="passkey")) + "\n")
    with pytest.raises(InputError, match=r"samples\.jsonl:2: a sample of task 'passkey'.*gsm8k"):
        RunWriter.open(run, manifest())
