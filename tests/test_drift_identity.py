"""`evalkit drift --resume` checks a study's identity as `evalkit run` checks a run's (one home:
`evalkit.store.writer.RunWriter` with `store.manifest.identity_fields`): another source hash is
refused in one line unless `--allow-source-change`, which the resume records; another kernel
choice or arm is refused naming the field; the study's rows go through the store's writer."""

from __future__ import annotations

import json
import shutil

import pytest

from evalkit.cli import main as cli


def _args(ckpt, out, *extra):
    return ["drift", "--model", str(ckpt), "--random-tokens", "--length", "40", "--chunk-size", "16",
            "--arms", "fp16", "--mode", "decode", "--no-floor", "--generate", "0", "--device", "cpu",
            "--out", str(out), "--no-progress", "--no-plots", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def one_prompt(tiny_hybrid_ckpt, tmp_path_factory):
    out = tmp_path_factory.mktemp("drift-identity") / "run"
    assert cli(_args(tiny_hybrid_ckpt, out, "--prompts", "1")) == 0
    return out


def _manifest(run):
    return json.loads((run / "manifest.json").read_text())


def _copy(run, tmp_path):
    shutil.copytree(run, tmp_path / "run", ignore=shutil.ignore_patterns(".lock"))
    return tmp_path / "run"


def test_the_rows_are_the_run_stores_lines_and_the_manifest_a_runs(one_prompt):
    from evalkit.drift import rows
    from evalkit.store.jsonl import iter_jsonl
    from evalkit.store.manifest import source_hash

    lines = [obj for _, obj in iter_jsonl(one_prompt / "samples.jsonl")]
    assert [(x["mode"], x["prompt"]) for x in lines] == [("decode", 0)]
    assert lines[0]["prompt_hash"] == json.loads((one_prompt / "prompts.json").read_text())[0]["sha256"]
    saved, _ = rows.read(one_prompt)
    assert saved["decode"]["prompt_rows"] == lines[0]["prompt_rows"]
    m = _manifest(one_prompt)
    assert m["source_hash"] == source_hash() and m["kernels"] == m["model"]["kernels"]
    assert m["finished_at"] and m["drift"]["arms"] == ["fp16"]


def test_a_source_change_is_refused_unless_declared_and_then_recorded(
    one_prompt, tiny_hybrid_ckpt, tmp_path, capsys
):
    run = _copy(one_prompt, tmp_path)
    m = _manifest(run)
    m["source_hash"] = "0" * 64  # a study made by other evalkit sources
    (run / "manifest.json").write_text(json.dumps(m))
    capsys.readouterr()
    assert cli(_args(tiny_hybrid_ckpt, run, "--prompts", "2", "--resume")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "source_hash is '000" in err and "--allow-source-change" in err
    assert (run / "samples.jsonl").read_text() == (one_prompt / "samples.jsonl").read_text()
    assert cli(_args(tiny_hybrid_ckpt, run, "--prompts", "2", "--resume", "--allow-source-change")) == 0
    resume = _manifest(run)["resumes"][-1]
    assert resume["source_change_allowed"]["source_hash"]["was"] == repr("0" * 64)
    assert resume["samples_on_disk"] == 1 and _manifest(run)["source_hash"] == "0" * 64
    assert len((run / "samples.jsonl").read_text().splitlines()) == 2  # prompt 0 not measured again


@pytest.mark.parametrize(
    "extra, field",
    [
        (("--kernels", "fused_elementwise=off"), "kernels.fused_elementwise is "),
        (("--arms", "bf16"), "drift.arms is ['fp16'] there but ['bf16'] now"),
        (("--chunk-size", "8"), "drift.chunk_size is 16 there but 8 now"),
    ],
)
def test_another_kernel_choice_or_arm_is_refused_naming_it(
    one_prompt, tiny_hybrid_ckpt, tmp_path, capsys, extra, field
):
    run = _copy(one_prompt, tmp_path)
    capsys.readouterr()
    argv = _args(tiny_hybrid_ckpt, run, "--prompts", "2", "--resume")
    for flag, value in zip(extra[::2], extra[1::2]):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    assert cli(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0] and "use another output directory" in err[0], err
    assert "--allow-source-change" not in err[0]
    assert cli([*argv, "--allow-source-change"]) == 2  # the flag covers the code, not the numerics


def test_the_store_check_is_what_refuses(one_prompt):
    """The refusal comes from the run store's identity, not drift's own: the fields it names."""
    from evalkit.store.manifest import first_identity_difference

    m = _manifest(one_prompt)
    other = {
        **m,
        "drift": {**m["drift"], "title": "another", "input": {**m["drift"]["input"], "n_prompts": 9}},
    }
    assert first_identity_difference(m, other) is None  # a title and more prompts: the same study
    other["model"] = {**m["model"], "decode_impl": "steps"}
    assert first_identity_difference(m, other)[0] == "model.decode_impl"
    run_like = {k: v for k, v in m.items() if k != "kind"}  # a run's manifest: no drift fields checked
    assert first_identity_difference(run_like, {**run_like, "drift": {}}) is None
