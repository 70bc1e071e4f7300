"""The reference-model training script, end to end at toy size on CPU (transformers' torch
fallback, no FLA): the same code path the lead runs once on the H200, so it must work first time.

One tiny run (module fixture, ~20-40 s on 2 cores) feeds the checks of its outputs; the data and
decoding helpers are checked against independent oracles (the generator's own Example, Python's
arithmetic, transformers' full forward)."""

from __future__ import annotations

import csv
import json
import math
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.scripts import SCRIPT

from evalkit.refmodel import batches
from evalkit.refmodel.arithmetic import arithmetic_problem, essay_sentences_for_training
from evalkit.refmodel.batches import WORKER, calibrate, make_batch, task_row
from evalkit.refmodel.bundle import install, unpack_bundle
from evalkit.refmodel.cli import main, parse_args
from evalkit.refmodel.curriculum import Curriculum
from evalkit.refmodel.decoder import Decoder, zero_state
from evalkit.refmodel.mixture import DECODE_ITEMS, build_example, chat_prompt, decode_items, gens
from evalkit.refmodel.settings import ANSWER_WEIGHT, CONTEXT_WEIGHT, SIZES, Settings
from evalkit.refmodel.suite import choose_suite
from evalkit.refmodel.tokenizer import BOS, EOS, PAD
from evalkit.refmodel.warmup import WARM_FIELDS, WARM_WORKER_FLAG, helper_command, rotate_autotune_configs

REPO = Path(__file__).resolve().parents[1]


def bundle_of(out: Path) -> Path:
    """Where the tiny run's --bundle goes (a stand-in for the device's $OUT)."""
    return out.parent / f"{out.name}-device-out" / "refmodel.tar.gz"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("refmodel")
    bundle = bundle_of(out)
    bundle.parent.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--out",
            str(out),
            "--bundle",
            str(bundle),
            "--device",
            "cpu",
            "--tiny",
            "--minutes",
            "0.4",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def worker_globals(tiny_run):
    """The data-building globals as the training process sets them, with the run's tokenizer."""
    from tokenizers import Tokenizer

    s = Settings.tiny_preset(tiny=True, chat_probability=0.0, bos_probability=1.0)
    tok = Tokenizer.from_file(str(tiny_run / "model" / "tokenizer.json"))
    g = gens()
    sentences = essay_sentences_for_training(g.training_rng(s.seed + 3 * 10**9), 500)
    saved = dict(WORKER)
    WORKER.update(
        settings=s,
        tok=tok,
        sentences=sentences,
        calib=calibrate(s, tok, sentences),
        bos_id=tok.token_to_id(BOS),
        pad_id=tok.token_to_id(PAD),
    )
    yield WORKER
    WORKER.clear()
    WORKER.update(saved)


# -- the run's outputs --------------------------------------------------------------------------


def test_tiny_run_writes_a_pure_kda_kimi_linear_checkpoint(tiny_run):
    from safetensors import safe_open

    model_dir = tiny_run / "model"
    cfg = json.loads((model_dir / "config.json").read_text())
    n = cfg["num_hidden_layers"]
    assert cfg["model_type"] == "kimi_linear"
    assert cfg["layer_types"] == ["linear_attention"] * n
    assert cfg["linear_attn_config"]["full_attn_layers"] == []
    assert cfg["linear_attn_config"]["kda_layers"] == list(range(1, n + 1))
    assert cfg["mlp_layer_types"] == ["dense"] * n
    assert cfg["use_cache"] is False  # a plain forward of a pure-KDA model fails with a cache
    with safe_open(str(model_dir / "model.safetensors"), "pt") as f:
        dtypes = {str(f.get_tensor(k).dtype) for k in f.keys()}
    assert dtypes == {"torch.bfloat16"}
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert (model_dir / name).is_file(), name


def test_checkpoint_loads_with_transformers_auto_classes(tiny_run):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = tiny_run / "model"
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    assert type(model).__name__ == "KimiLinearForCausalLM"
    ids = tok("The pass key is 40213.", return_tensors="pt")["input_ids"]
    assert ids[0, 0].item() == tok.bos_token_id  # plain text gets a BOS
    assert tok.convert_ids_to_tokens(ids[0, -6:-1].tolist()) == list("40213")  # one token per digit
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], model.config.vocab_size)
    assert torch.isfinite(logits).all()
    assert tok.eos_token_id == 2 and tok.pad_token_id == 0 and tok.bos_token_id == 1


def test_recipe_loss_curve_eval_and_card_are_recorded(tiny_run):
    recipe = json.loads((tiny_run / "recipe.json").read_text())
    assert recipe["status"] == "finished"
    assert recipe["settings"]["seed"] >= 1_000_000
    assert "training_rng" in recipe["seeds"]["rule"]
    assert recipe["steps"] >= 1 and recipe["tokens"] >= recipe["steps"]
    rows = list(csv.DictReader(open(tiny_run / "loss_curve.csv")))
    assert rows and all(math.isfinite(float(r["loss_weighted"])) for r in rows)
    assert int(rows[-1]["step"]) <= recipe["steps"]
    evald = json.loads((tiny_run / "quick_eval.json").read_text())
    done = {(c["task"], c["control"]) for c in evald["cells"] if c.get("n")}
    assert ("passkey", None) in done and ("passkey", "reset_after_needle") in done
    card = (tiny_run / "MODEL_CARD.md").read_text()
    assert "pure-KDA" in card and "reset_after_needle" in card


def test_curriculum_clock_starts_after_the_kernel_warm_up_and_no_stage_is_skipped(tiny_run):
    recipe = json.loads((tiny_run / "recipe.json").read_text())
    s = Settings.tiny_preset(tiny=True)
    warm = recipe["kernel_warmup"]
    assert [tuple(x) for x in warm["shapes"]] == [(s.tokens_per_step // L, L) for L in s.stages]
    stages = recipe["stages"]
    assert [st["stage"] for st in stages] == list(range(len(s.stages)))
    assert stages[0]["start_s"] >= warm["ended_at_s"]
    assert all(st["end_step"] > st["start_step"] for st in stages)


def _curriculum_steps(s, step_s):
    """The stages a training loop visits when every step takes `step_s` seconds of a fake clock."""
    curriculum = Curriculum(s, start=1000.0, end=1100.0)
    now, seen = 1000.0, []
    while (si := curriculum.next(now)) is not None:
        seen.append(si)
        now += step_s
        assert len(seen) < 100_000
    return seen


@pytest.mark.parametrize("step_s", [0.02, 7.0, 45.0, 250.0])
def test_the_curriculum_never_skips_a_stage_however_slow_a_step_is(step_s):
    """The speed-independent form of the test above: a fake clock, from a fast machine (5k steps)
    to one whose single step outlasts the whole budget; every stage runs, in order."""
    s = Settings.tiny_preset(tiny=True)
    seen = _curriculum_steps(s, step_s)
    assert sorted(set(seen)) == list(range(len(s.stages)))
    assert seen == sorted(seen)  # never back to a shorter stage


def test_warm_up_helpers_start_at_different_autotune_configs(monkeypatch):
    """Each helper rank benchmarks (so compiles) the same configs from its own offset."""
    import triton
    from triton.runtime import autotuner

    original = autotuner.Autotuner.prune_configs

    @triton.jit
    def kernel(x_ptr, BLOCK: triton.language.constexpr):
        pass

    configs = [triton.Config({"BLOCK": b}) for b in (16, 32, 64, 128, 256, 512)]
    tuner = triton.autotune(configs=configs, key=[])(kernel)
    firsts = []
    for rank in range(3):
        monkeypatch.setattr(autotuner.Autotuner, "prune_configs", original)  # restored after the test
        rotate_autotune_configs(rank, 3)
        order = [c.kwargs["BLOCK"] for c in tuner.prune_configs({})]
        assert sorted(order) == [16, 32, 64, 128, 256, 512]  # the same configs, rotated
        firsts.append(order[0])
    assert firsts == [16, 64, 256]


@pytest.mark.parametrize("entry", ["script", "trainer-script", "module"])
def test_a_warm_up_helper_runs_the_training_and_evaluation_shapes(entry, tmp_path):
    """The helper's entry points, on the CPU at toy sizes (on a GPU it compiles the kernels): the
    script's internal flag, and the commands the trainer spawns (from any working directory)."""
    s = Settings.tiny_preset(tiny=True)
    spec = {"vocab": 256, "stages": list(s.stages), "device": "cpu"}
    spec.update({k: getattr(s, k) for k in WARM_FIELDS})
    if entry == "script":
        argv, env, cwd = [sys.executable, str(SCRIPT), WARM_WORKER_FLAG, "1/3", json.dumps(spec)], None, REPO
    else:
        (argv, env), cwd = helper_command(1, 3, spec, SCRIPT if entry == "trainer-script" else None), tmp_path
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "training shapes compiled" in proc.stdout and "evaluation path compiled" in proc.stdout


def test_bundle_holds_the_checkpoint_and_records_in_one_file(tiny_run, tmp_path):
    import tarfile

    bundle = bundle_of(tiny_run)
    with tarfile.open(bundle) as tar:
        names = set(tar.getnames())
    model_files = {f"model/{f.name}" for f in (tiny_run / "model").iterdir()}
    assert model_files <= names and {"recipe.json", "quick_eval.json", "MODEL_CARD.md", "train.log"} <= names
    unpack_bundle(bundle, tmp_path / "x")
    assert (tmp_path / "x" / "model" / "model.safetensors").read_bytes() == (
        tiny_run / "model" / "model.safetensors"
    ).read_bytes()


@pytest.mark.parametrize("source", ["dir", "bundle"])
def test_install_copies_the_model_and_records(tiny_run, tmp_path, monkeypatch, source):
    src = tiny_run if source == "dir" else bundle_of(tiny_run)
    assets, results = tmp_path / "assets", tmp_path / "results"
    results.mkdir()
    readme = (REPO / "results" / "reference-model" / "README.md").read_text()
    (results / "README.md").write_text(readme.replace("Status: ", "Status: (before install) ", 1))
    assert main(["--install-from", str(src), "--assets-dir", str(assets), "--results-dir", str(results)]) == 0
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (assets / name).is_file(), name
    for name in ("recipe.json", "loss_curve.csv", "quick_eval.json", "MODEL_CARD.md"):
        assert (results / name).is_file(), name
    status = [line for line in (results / "README.md").read_text().splitlines() if line.startswith("Status:")]
    assert len(status) == 1 and "installed from" in status[0] and "before install" not in status[0]
    assert "| file | what |" in (results / "README.md").read_text()  # the rest is kept
    from evalkit import reference_model

    monkeypatch.setenv(reference_model.ENV_VAR, str(assets))
    assert reference_model.default_model_path() == assets


def test_install_refuses_a_folder_without_a_checkpoint(tmp_path):
    with pytest.raises(SystemExit, match="no finished checkpoint"):
        install(tmp_path, tmp_path / "a", tmp_path / "r")


# -- data ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "family",
    [
        "passkey",
        "niah_single",
        "niah_distractors",
        "niah_needles",
        "niah_multi",
        "niah_essay",
        "vt",
        "kv",
        "copy",
        "recite",
        "register",
    ],
)
def test_task_rows_weight_exactly_the_answer(worker_globals, monkeypatch, family):
    built = []
    real = build_example
    monkeypatch.setattr(batches, "build_example", lambda *a, **k: built.append(real(*a, **k)) or built[-1])
    tok = worker_globals["tok"]
    for seed in range(3):
        row = task_row(family, random.Random(seed), 2048)
        assert row is not None
        ids, w, _ = row
        assert len(ids) == len(w) <= 2048
        ex = built[-1]  # the example that fitted
        answer = [t for t, x in zip(ids, w) if x == ANSWER_WEIGHT]
        context = [t for t, x in zip(ids, w) if x == CONTEXT_WEIGHT]
        assert tok.decode(answer, skip_special_tokens=False) == " " + ex.answer + EOS
        assert context[0] == worker_globals["bos_id"]
        assert tok.decode(context[1:]) == ex.prompt
        assert all(a in ex.answer for a in ex.answers)


def test_decode_item_counts_span_the_range_and_fit_the_row():
    rng = random.Random(5)
    for family, (_, lo, hi, per_item, fixed) in DECODE_ITEMS.items():
        free = [decode_items(family, rng, None) for _ in range(400)]
        assert min(free) == lo and max(free) > 0.8 * hi and max(free) <= hi
        capped = [decode_items(family, rng, 512) for _ in range(200)]
        assert max(capped) <= max(lo, (512 - fixed) / per_item)


def test_size_presets_set_the_model_shape(tmp_path):
    _, s = parse_args(["--out", str(tmp_path), "--size", "13m"])
    assert (s.layers, s.hidden, s.heads, s.head_dim, s.intermediate) == SIZES["13m"]
    _, s = parse_args(["--out", str(tmp_path), "--size", "10m", "--layers", "3"])
    assert s.layers == 3 and s.hidden == SIZES["10m"][1]
    _, s = parse_args(["--out", str(tmp_path)])
    assert (s.layers, s.hidden) == (4, 256)  # default: the v1 size


def test_batches_are_padded_rows_with_zero_pad_weight(worker_globals):
    batch = make_batch((256, 6, 3))
    ids, w = batch["ids"], batch["w"]
    assert ids.shape == w.shape == (6, 256)
    assert ((ids == worker_globals["pad_id"]) == (w == 0)).all()  # pads and only pads weigh 0
    assert (w[:, 0] > 0).all() and sum(batch["counts"].values()) == 6
    again = make_batch((256, 6, 3))
    assert (again["ids"] == ids).all()  # a batch is a function of its index (reproducible)


def test_arithmetic_answers_are_right_in_gsm8k_format():
    strict = re.compile(r"#### (\-?[0-9\.\,]+)")  # lm-eval gsm8k's strict-match regex
    for seed in range(400):
        p = arithmetic_problem(random.Random(seed))
        context, target = p.text()
        assert context.startswith("Question: ") and context.endswith("\nAnswer:")
        assert int(strict.search(target).group(1)) == p.answer
        expressions = re.findall(r"(\d+(?: [-+*/] \d+)+) = (\d+)", p.solution)
        assert expressions, p.solution
        for expr, value in expressions:
            assert eval(expr) == int(value)  # noqa: S307 - digits and operators only
        assert int(expressions[-1][1]) == p.answer


def _cells(table: dict[tuple[str, int], float], n: int = 24) -> dict:
    return {
        "cells": [
            {"task": t, "length": L, "control": None, "n": n, "accuracy": a} for (t, L), a in table.items()
        ]
        + [{"task": "passkey", "length": 2048, "control": "reset_after_needle", "n": n, "accuracy": 0.5}]
    }


def test_choose_suite_picks_the_length_with_most_tasks_in_the_30_to_90_band():
    table = {
        ("passkey", 2048): 1.0,
        ("niah_multikey_2", 2048): 0.95,
        ("vt", 2048): 1.0,
        ("kv_retrieval", 2048): 0.6,
        ("passkey", 4096): 1.0,
        ("niah_multikey_2", 4096): 0.7,
        ("vt", 4096): 0.85,
        ("kv_retrieval", 4096): 0.2,
        ("passkey", 8192): 0.8,
        ("niah_multikey_2", 8192): 0.4,
        ("vt", 8192): 0.5,
        ("kv_retrieval", 8192): 0.05,
    }
    suite = choose_suite(_cells(table), budget=90_000)
    # 4096 and 8192 both have two tasks in band; 4096 has passkey >= 90%
    assert suite["tasks"] == ["passkey", "niah_multikey_2", "vt"] and suite["lengths"] == [4096]
    assert suite["limit"] == 90_000 // (3 * 4096) == 7
    assert suite["accuracy_fp32"] == {"passkey@4096": 1.0, "niah_multikey_2@4096": 0.7, "vt@4096": 0.85}


def test_choose_suite_ties_go_to_the_shorter_length_and_need_enough_docs():
    table = {("passkey", 1024): 1.0, ("vt", 1024): 0.5, ("passkey", 2048): 1.0, ("vt", 2048): 0.6}
    assert choose_suite(_cells(table))["lengths"] == [1024]
    assert choose_suite(_cells(table, n=5)) is None  # too few docs to trust the band
    assert choose_suite(_cells({("passkey", 2048): 1.0, ("vt", 2048): 1.0})) is None
    # an 8k doc budget leaves room for passkey plus one task only
    suite = choose_suite(_cells({("vt", 8192): 0.5, ("kv_retrieval", 8192): 0.5}), budget=70_000)
    assert suite["tasks"] == ["passkey", "vt"] and suite["limit"] == 4


def test_training_seeds_below_the_evaluation_range_are_refused(tmp_path):
    with pytest.raises(SystemExit):
        parse_args(["--out", str(tmp_path), "--seed", "999999"])
    _, s = parse_args(["--out", str(tmp_path)])
    assert s.seed == 1_000_000
    for bad in ("foo=1", "passkey", "passkey=0"):
        with pytest.raises(SystemExit):
            parse_args(["--out", str(tmp_path), "--mixture", bad])
    _, s = parse_args(["--out", str(tmp_path), "--mixture", "passkey=1,kv=0.5"])
    assert s.mixture == {"passkey": 1.0, "kv": 0.5}


def test_chat_rows_match_the_tokenizers_chat_template(tiny_run):
    from transformers import AutoTokenizer

    from evalkit.tasks.long_context.base import render
    from evalkit.tasks.tokenizer import TokenizerView

    g = gens()
    view = TokenizerView(AutoTokenizer.from_pretrained(tiny_run / "model"))
    for fam in ("passkey", "vt", "kv"):
        ex = build_example(fam, g.training_rng(1_000_123), 3, ["A sentence."] * 10)
        assert chat_prompt(ex) == render(ex, view, chat=True)


# -- decoding ------------------------------------------------------------------------------------


def test_cached_decoding_and_state_reset_match_full_forwards(tiny_run):
    """Prefill + single-token steps reproduce the full forward's logits, and zeroing the cache
    after k tokens reproduces a fresh forward over the remaining tokens: the reset control
    really removes everything the state held."""
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    model = AutoModelForCausalLM.from_pretrained(tiny_run / "model", dtype=torch.float32).eval()
    torch.manual_seed(0)
    with torch.no_grad():  # larger weights than a 1-step model has, so differences would show
        for p in model.parameters():
            if p.ndim == 2:
                p.normal_(0, 0.08)
    dec = Decoder(model, torch.device("cpu"))
    ids = torch.randint(5, model.config.vocab_size, (1, 150)).tolist()[0]
    with torch.no_grad():
        full = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
        cache = DynamicCache(config=model.config)
        got = [dec._forward(ids[:140], cache, 0)]
        for t in range(140, 150):
            got.append(dec._forward([ids[t]], cache, t))
        torch.testing.assert_close(torch.stack(got[:-1]), full[139:149], atol=2e-4, rtol=1e-4)

        cache = DynamicCache(config=model.config)
        dec._forward(ids[:90], cache, 0)
        assert zero_state(cache) == 2 * model.config.num_hidden_layers
        after_reset = dec._forward(ids[90:], cache, 90)
        fresh = model(input_ids=torch.tensor([ids[90:]]), use_cache=False).logits[0, -1]
        torch.testing.assert_close(after_reset, fresh, atol=2e-4, rtol=1e-4)
        no_reset = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]
        assert (after_reset - no_reset).abs().max() > 1e-2  # the reset did change something

    greedy, seq = [], list(ids[:120])
    with torch.no_grad():
        for _ in range(6):
            t = int(model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1].argmax())
            greedy.append(t)
            seq.append(t)
    assert dec.generate(ids[:120], 6, stop_ids=set()) == greedy


def test_the_package_imports_without_torch_transformers_or_fla():
    """Heavy dependencies are imported where used: the CLI's --help and the data code work anywhere."""
    code = (
        "import pkgutil, importlib, sys, evalkit.refmodel as r\n"
        "for m in pkgutil.iter_modules(r.__path__): importlib.import_module('evalkit.refmodel.' + m.name)\n"
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'torch', 'transformers', 'fla', 'triton'}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
