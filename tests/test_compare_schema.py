"""compare's JSON follows the published JSON Schema (evalkit/compare/schema.json), units included
(fractions, not percent) — issue 43."""

import json
from importlib import resources
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from evalkit.cli import main
from evalkit.compare import JSON_KEYS, SCHEMA_VERSION, build_report, render_json
from evalkit.store import RunWriter, config_hash, load_run, prompt_hash

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "results" / "compare-example"
SCHEMA = json.loads(resources.files("evalkit.compare").joinpath("schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _errors(report) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(report)]


def test_the_schema_is_a_valid_draft_2020_12_schema_of_this_version():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["schema_version"]["const"] == SCHEMA_VERSION
    assert set(JSON_KEYS) <= set(SCHEMA["$defs"]["row"]["required"])
    assert "FRACTION" in SCHEMA["description"]


def test_compare_json_on_the_cli_validates(monkeypatch, capsys):
    if not (EXAMPLE / "fp32" / "samples.jsonl").exists():
        pytest.skip("compare example not generated")
    monkeypatch.chdir(REPO)
    rc = main(["compare", "results/compare-example/fp32", "results/compare-example/fp16", "--format", "json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert _errors(report) == []
    assert _errors(json.loads((EXAMPLE / "report.json").read_text())) == []


def _write(path, arm, outcomes, lengths):
    cfg = {"lengths": lengths}
    manifest = {
        "model": {"path": "m"},
        "backend": {"name": "local"},
        "arm": {"label": arm, "state_dtype": arm},
        "tasks": {"niah": {"config": cfg, "hash": config_hash(cfg)}},
    }
    w = RunWriter.open(path, manifest, durable=False)
    for (doc, length), right in outcomes.items():
        w.append(
            {
                "task": "niah",
                "doc_id": doc,
                "length": length,
                "prompt_hash": prompt_hash(f"{doc}@{length}"),
                "target": "x",
                "response": "x" if right else "y",
                "correct": {"string_match": right},
                "error": None,
            }
        )
    w.finish()
    return load_run(path)


def test_a_multi_length_report_with_a_gate_validates(tmp_path):
    rng = np.random.default_rng(3)
    lengths = [4096, 8192]
    base = {(d, n): bool(rng.random() < 0.8) for d in range(60) for n in lengths}
    cand = {k: v and rng.random() > 0.1 for k, v in base.items()}
    report = build_report(
        _write(tmp_path / "b", "fp32", base, lengths),
        _write(tmp_path / "c", "fp16", cand, lengths),
        fail_on="loss",
    )
    assert [r["length"] for r in report["rows"]] == lengths
    assert _errors(json.loads(render_json(report))) == []


def test_the_schema_rejects_percent_where_fractions_belong():
    """The schema can fail: accuracy in percent (96.7) or a verdict outside the enum is refused."""
    report = json.loads((EXAMPLE / "report.json").read_text())
    report["rows"][0]["acc_baseline"] = 96.74
    report["rows"][1]["verdict"] = "worse"
    errors = _errors(report)
    assert any("96.74" in e for e in errors) and any("worse" in e for e in errors)
    del report["rows"][0]["diff"]
    assert any("'diff' is a required property" in e for e in _errors(report))
