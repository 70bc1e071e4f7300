"""compare on lm-eval --log_samples files (issue 43): continuous per-question metrics go through the
paired continuous test with every question (lm-eval records 0 and 1 like any other value), RULER's
per-length metric names fill the length column, and the arms get short labels."""

import json

import numpy as np
from scipy import stats

from evalkit.compare import build_report, render_markdown
from evalkit.store import load_run, prompt_hash

LENGTHS = (4096, 8192)
FILE = "samples_niah_single_1_2026-02-03T04-05-06.789012.jsonl"


def _values(flip: bool) -> list[float]:
    """Per document: all items found (1.0), half (0.5) or none (0.0); the candidate loses some."""
    out = []
    for doc in range(60):
        v = 1.0 if doc % 5 else 0.5
        if flip and doc % 7 == 0:
            v = 0.0 if v == 0.5 else 0.5
        out.append(v)
    return out


def _write(root, arm, flip):
    folder = root / arm / "org__tiny-kda"  # lm-eval: OUTPUT/<model_name_sanitized>/samples_...
    folder.mkdir(parents=True)
    lines = []
    for doc, value in enumerate(_values(flip)):
        length = LENGTHS[doc % 2]
        line = {
            "doc_id": doc,
            "doc": {},
            "target": "['x']",
            "arguments": {"gen_args_0": {"arg_0": f"p{doc}", "arg_1": {}}},
            "resps": [["x"]],
            "filtered_resps": ["x"],
            "filter": "none",
            "metrics": [str(n) for n in LENGTHS],
            "doc_hash": "h",
            "prompt_hash": prompt_hash(f"p{doc}"),
            "target_hash": "t",
        }
        line.update({str(n): value if n == length else -1 for n in LENGTHS})
        lines.append(line)
    (folder / FILE).write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


def _report(tmp_path):
    base = load_run(_write(tmp_path, "out-fp32", False))
    cand = load_run(_write(tmp_path, "out-fp16", True) / FILE)
    return build_report(base, cand)


def test_item_fractions_use_every_question_in_the_paired_continuous_test(tmp_path):
    report = _report(tmp_path)
    base, cand = np.array(_values(False)), np.array(_values(True))
    cells = {c["length"]: c for c in report["item_scores"]}
    assert sorted(cells) == list(LENGTHS)
    for i, length in enumerate(LENGTHS):
        b, c = base[i::2], cand[i::2]
        cell = cells[length]
        assert cell["n"] == b.size == 30  # not only the questions with a fraction on both sides
        assert cell["baseline_mean"] == b.mean()
        assert cell["mean_diff"] == (c - b).mean()
        assert cell["questions_changed"] == int(np.count_nonzero(c - b))
        expected = stats.wilcoxon(c - b, zero_method="wilcox").pvalue
        assert cell["wilcoxon_pvalue"] == expected


def test_ruler_lengths_fill_the_length_column_and_labels_are_short(tmp_path):
    report = _report(tmp_path)
    assert [(r["metric"], r["length"]) for r in report["rows"]] == [("score", n) for n in LENGTHS]
    assert (report["baseline"]["label"], report["candidate"]["label"]) == ("out-fp32", "out-fp16")
    md = render_markdown(report)
    assert "| out-fp32 (base) % | out-fp16 (cand) % |" in md
    assert FILE not in md.splitlines()[0]
