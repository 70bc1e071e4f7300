"""The Mamba2 reference model's recipe (`--arch mamba2`): its training scan against a float64
token-by-token recurrence, the GPU route's mapping onto FLA's GLA kernel (a float64 GLA recurrence
stands in for `chunk_gla`), the training forward against transformers' own NemotronH mixer, and a
tiny CPU training run whose checkpoint evalkit's engine loads, computes the same logits as the
training forward (the engine is the oracle for the trainer's math), and evaluates via `evalkit run`."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from helpers.scripts import SCRIPT

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[1]


def naive_ssd(x, dt, A, B, C):
    """h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T, y_t = h_t C_t, per head, in float64."""
    x, dt, A, B, C = (t.double() for t in (x, dt, A, B, C))
    b, T, H, P = x.shape
    h = torch.zeros(b, H, P, B.shape[-1], dtype=torch.float64)
    out = []
    for t in range(T):
        h = (
            h * torch.exp(dt[:, t] * A)[..., None, None]
            + (dt[:, t, :, None] * x[:, t])[..., None] * B[:, t, :, None]
        )
        out.append(torch.einsum("bhpn,bhn->bhp", h, C[:, t]))
    return torch.stack(out, 1)


def naive_gla(q, k, v, g, scale=None, initial_state=None, output_final_state=False):
    """FLA's GLA recurrence in float64 (per-key-channel decay): S = Diag(exp g) S + k v^T, o = S^T q."""
    q, k, v, g = (t.double() for t in (q, k, v, g))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    b, T, H, K = q.shape
    S = torch.zeros(b, H, K, v.shape[-1], dtype=torch.float64)
    out = []
    for t in range(T):
        S = S * g[:, t].exp()[..., None] + k[:, t][..., None] * v[:, t][..., None, :]
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, t] * scale, S))
    return torch.stack(out, 1).float(), (S if output_final_state else None)


def ssd_inputs(T=150, b=2, H=3, P=8, N=6, seed=0):
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, T, H, P, generator=gen)
    dt = F.softplus(torch.randn(b, T, H, generator=gen) - 1.0)
    A = -torch.rand(H, generator=gen) * 3 - 0.05
    B, C = (0.5 * torch.randn(b, T, H, N, generator=gen) for _ in range(2))
    return x, dt, A, B, C


def rel(a, ref) -> float:
    a, ref = a.double(), ref.double()
    return float((a - ref).abs().max() / ref.abs().max())


# -- the scan ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("T", [1, 64, 150])
def test_torch_scan_equals_the_recurrence(T):
    from evalkit.refmodel.mamba2_ssd import ssd_torch

    args = ssd_inputs(T=T)
    assert rel(ssd_torch(*args), naive_ssd(*args)) < 1e-5


def test_gla_route_computes_the_same_scan_and_a_wrong_gate_is_caught():
    from evalkit.refmodel.mamba2_ssd import ssd_torch, ssd_via

    args = ssd_inputs(T=90)
    want = naive_ssd(*args)
    assert rel(ssd_via(naive_gla)(*args), want) < 1e-5

    def decay_on_one_channel(q, k, v, g, **kw):
        return naive_gla(q, k, v, g * (torch.arange(g.shape[-1]) == 0), **kw)

    assert rel(ssd_via(decay_on_one_channel)(*args), want) > 1e-2
    assert rel(ssd_torch(*args), want) < 1e-5


def test_a_route_that_disagrees_is_replaced_by_torch():
    from evalkit.refmodel.mamba2_mixer import route_note, use_route, verify_route
    from evalkit.refmodel.mamba2_ssd import TORCH_NOTE, ssd_torch, ssd_via

    model = tiny_model()
    assert verify_route(model, "cpu") is None  # the torch route: nothing to check
    use_route(model, ssd_via(naive_gla), "gla stand-in")
    ok = verify_route(model, "cpu")
    assert ok["ok"] and ok["out_rel"] < 1e-5 and route_note(model) == "gla stand-in"
    use_route(model, lambda x, *a: 1.1 * ssd_torch(x, *a), "off by 10%")
    bad = verify_route(model, "cpu")
    assert not bad["ok"] and bad["fallback"] == TORCH_NOTE and route_note(model) == TORCH_NOTE


def test_the_route_check_in_bf16_passes_a_right_route_and_fails_a_wrong_one():
    """On a GPU the check runs in bf16 (the training autocast): 16-bit rounding passes, 10% does not."""
    from evalkit.refmodel.mamba2_ssd import check_route, ssd_torch, ssd_via

    right = check_route(ssd_via(naive_gla), "cpu", torch.bfloat16, T=130)
    assert right["ok"] and right["dtype"] == "bfloat16" and 0 < right["out_rel"] < 2e-2
    wrong = check_route(lambda x, *a: 1.1 * ssd_torch(x, *a), "cpu", torch.bfloat16, T=130)
    assert not wrong["ok"]


# -- the training model -------------------------------------------------------------------------------


def tiny_settings(**kw):
    from evalkit.refmodel.settings import Settings

    return Settings.tiny_preset(tiny=True, arch="mamba2", device="cpu", **kw)


def tiny_model():
    from evalkit.refmodel.architecture import build_model

    torch.manual_seed(0)
    model = build_model(tiny_settings(), 128).eval()
    with torch.no_grad():  # an SSM branch that matters next to D x (mamba2.md §9)
        for name, p in model.named_parameters():
            if "in_proj" in name:
                p.normal_(0.0, 0.3)
            elif p.dim() == 1:
                p.add_(0.3 * torch.randn(p.shape))
    return model


def test_config_is_all_mamba2_nemotron_h_at_the_reference_sizes():
    from evalkit.model.nemotron_h import parse_nemotron_h_config

    s = tiny_settings()
    model = tiny_model()
    arch = parse_nemotron_h_config(model.config.to_dict())
    assert arch.layer_types == ["linear_attention", "mlp"] * s.layers
    assert arch.recurrent_state_shape == (s.heads, s.head_dim, s.head_dim)
    assert (arch.n_groups, arch.hidden_size, arch.intermediate_size) == (s.heads, s.hidden, s.intermediate)


def test_training_forward_equals_transformers_own_mixer():
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer

    model = tiny_model()
    ids = torch.randint(0, 128, (2, 150), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = model(input_ids=ids, use_cache=False).logits
    for m in model.modules():
        if isinstance(m, NemotronHMamba2Mixer):
            assert type(m).__name__ == "TrainingMamba2Mixer"
            m.__class__ = NemotronHMamba2Mixer
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = model(input_ids=ids, use_cache=False).logits
    assert want.abs().max() > 0.3
    assert rel(got, want) < 1e-5


def test_training_gradients_reach_every_parameter():
    model = tiny_model().train()
    ids = torch.randint(0, 128, (2, 70), generator=torch.Generator().manual_seed(2))
    model(input_ids=ids, use_cache=False).logits.logsumexp(-1).mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing


# -- a tiny training run, then the engine ---------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mamba2")
    argv = [sys.executable, str(SCRIPT), "--arch", "mamba2", "--out", str(out), "--device", "cpu"]
    # a fixed training clock far shorter than what the one-minute budget leaves (about 30 s)
    argv += ["--tiny", "--minutes", "1", "--train-seconds", "3"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return out


def test_a_fixed_training_clock_trains_that_long_whatever_the_budget(tiny_run):
    recipe = json.loads((tiny_run / "recipe.json").read_text())
    assert recipe["settings"]["train_seconds"] == 3
    assert 3 <= recipe["train_seconds"] < 20


def test_warm_only_stops_after_the_check_and_warm_up(tmp_path):
    argv = [sys.executable, str(SCRIPT), "--arch", "mamba2", "--out", str(tmp_path), "--device", "cpu"]
    proc = subprocess.run(
        argv + ["--tiny", "--minutes", "0.3", "--warm-only"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    recipe = json.loads((tmp_path / "recipe.json").read_text())
    assert recipe["status"] == "warm-only" and "kernel_warmup" in recipe
    assert "steps" not in recipe and not (tmp_path / "model").exists()


def test_tiny_run_records_a_mamba2_recipe(tiny_run):
    recipe = json.loads((tiny_run / "recipe.json").read_text())
    assert recipe["status"] == "finished" and recipe["steps"] > 0
    assert recipe["settings"]["arch"] == "mamba2"
    assert recipe["environment"]["ssd_scan"].startswith("SSD in fp32 torch")
    cfg = json.loads((tiny_run / "model" / "config.json").read_text())
    assert cfg["model_type"] == "nemotron_h" and set(cfg["layers_block_type"]) == {"linear_attention", "mlp"}
    assert cfg["max_position_embeddings"] >= 32768 + 64  # the 32k cells; transformers' default is 4096
    assert "(Mamba2)" in (tiny_run / "MODEL_CARD.md").read_text().splitlines()[0]


def test_engine_logits_equal_the_training_forward_on_the_trained_weights(tiny_run):
    from transformers import AutoModelForCausalLM

    from evalkit.engine import LLMEngine
    from evalkit.refmodel.mamba2_mixer import use_route
    from evalkit.refmodel.mamba2_ssd import TORCH_NOTE, ssd_torch
    from tests.helpers.drive import drive_logits

    model_dir = tiny_run / "model"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    assert use_route(hf, ssd_torch, TORCH_NOTE) == tiny_settings().layers
    engine = LLMEngine(str(model_dir), device="cpu", state_dtype="fp32", max_num_seqs=2)
    tokens = torch.randint(3, engine.arch.vocab_size, (1, 200), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        train_logits = hf(tokens, use_cache=False).logits[0]
    assert train_logits.std() > 0.05
    assert rel(drive_logits(engine, tokens[0].tolist(), [200], 0), train_logits) <= 1e-4
    # the engine's chunked prefill and cached steps too
    assert rel(drive_logits(engine, tokens[0].tolist(), [90, 70], 40), train_logits) <= 1e-4


def test_evalkit_run_evaluates_the_trained_checkpoint(tiny_run, tmp_path):
    out = tmp_path / "run"
    argv = ["run", "--model", str(tiny_run / "model"), "--arm", "fp32", "--tasks", "passkey"]
    argv += ["--lengths", "512", "--limit", "2", "--device", "cpu", "--out", str(out), "--no-progress"]
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", *argv], capture_output=True, text=True, timeout=600, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and {r["task"] for r in rows} == {"passkey"}


# -- the device script --------------------------------------------------------------------------------

RUN_SH = REPO / "results" / "reference-model-mamba2" / "run.sh"


def test_device_script_parses_and_runs_the_issue_arms():
    """bash accepts the script; its default arms on the GPU parse, fp32 first, with the issue's
    ladder and controls and the full-vs-chunked prefill pairs (one store at the prompt's end
    against one every 2048 and every 256 tokens)."""
    from evalkit.arm import parse_arms

    subprocess.run(["bash", "-n", str(RUN_SH)], check=True)
    text = RUN_SH.read_text()
    code = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert code[0].endswith("source scripts/device_setup.sh")  # the device's first step
    defaults = [line for line in text.splitlines() if line.startswith(("CHUNK_FULL=", "ARMS="))]
    shell = "CHUNK_SMALL=256; " + "; ".join(defaults) + '; echo "$ARMS"'
    arms = parse_arms(subprocess.run(["bash", "-c", shell], capture_output=True, text=True).stdout.strip())
    labels = [a.label for a in arms]
    assert labels[0] == "fp32"
    assert {"fp16", "bf16", "m5", "m4", "m3", "m2", "fp8_e4m3", "m3-rtz"} <= set(labels)
    chunks = {
        (a.label.split("@")[0], a.prefill_chunk_size)
        for a in arms
        if a.label.split("@")[0] in ("fp16", "bf16")
    }
    assert chunks == {(f, n) for f in ("fp16", "bf16") for n in (65536, 2048, 256)}


# -- the three families side by side ----------------------------------------------------------------


def test_side_by_side_without_mamba2_records_is_the_committed_two_model_table(monkeypatch, tmp_path, capsys):
    from helpers.scripts import load_script

    sbs = load_script("gdn_kda_side_by_side")
    monkeypatch.setattr(sbs, "MAMBA2", tmp_path / "absent")
    monkeypatch.setattr(sbs, "THREE", tmp_path / "absent")
    sbs.main()
    committed = (REPO / "results" / "reference-model-gdn" / "h200" / "side-by-side.md").read_text()
    assert capsys.readouterr().out == committed


def test_side_by_side_adds_mamba2_rows_and_marks_arms_it_lacks(monkeypatch, tmp_path, capsys):
    """Stand-in Mamba2 records: the GDN twin's fp16 and m3-rtz reports and its drift study."""
    import shutil

    from helpers.scripts import load_script

    sbs = load_script("gdn_kda_side_by_side")
    gdn = REPO / "results" / "reference-model-gdn" / "h200"
    fake = tmp_path / "h200"
    (fake / "reports").mkdir(parents=True)
    for arm in ("fp16", "m3-rtz"):
        name = f"compare-retrieval-fp32-vs-{arm}.json"
        shutil.copy(gdn / "reports" / name, fake / "reports" / name)
    shutil.copytree(gdn / "drift-32k", fake / "drift-32k", ignore=shutil.ignore_patterns("runs"))
    monkeypatch.setattr(sbs, "MAMBA2", fake)
    monkeypatch.setattr(sbs, "THREE", tmp_path / "absent")  # the one-call section has rows of its own
    sbs.main()
    out = capsys.readouterr().out
    retrieval, short = out.split("## Accuracy on the decode-heavy cells")
    assert "No `short` sweep committed for: Mamba2." in short
    out = retrieval + short[short.index("## Drift") :]
    gdn_rows = [line for line in out.splitlines() if "| GDN twin |" in line]
    m2_rows = [line for line in out.splitlines() if "| Mamba2 |" in line]
    cells = [line for line in gdn_rows if "@" in line]
    m2_cells = [line for line in m2_rows if "@" in line]
    assert len(m2_cells) == len(cells) == 6
    for g, m in zip(cells, m2_cells):  # the same reports: fp32 and the fp16/m3-rtz columns agree
        gc, mc = g.split(" | "), m.split(" | ")
        assert mc[2:4] == gc[2:4] and mc[-1] == gc[-1] and mc[4:-1] == ["–"] * 4
    assert len([line for line in m2_rows if "@" not in line]) == 4  # drift: 2 modes x fp16/bf16


def test_committed_three_family_side_by_side_is_what_the_script_writes_now(capsys):
    from helpers.scripts import load_script

    load_script("gdn_kda_side_by_side").main()
    committed = (REPO / "results" / "reference-model-mamba2" / "h200" / "side-by-side.md").read_text()
    assert capsys.readouterr().out == committed


def test_the_cpu_cell_shares_needles_and_answers_with_the_h200_cells_but_not_the_task_version():
    """What the side-by-side's CPU section says of its rows: per question the same answer as the
    other models' H200 cell, another version of the task (so other filler), said in the table."""
    from helpers import sample_oracle

    cell = ("passkey", 8192)
    cpu = sample_oracle.samples(REPO / "results" / "reference-model-mamba2" / "cpu-sweep" / "fp32")[cell]
    for model in ("reference-model", "reference-model-gdn"):
        h200 = sample_oracle.samples(REPO / "results" / model / "h200" / "retrieval" / "fp32")[cell]
        assert sorted(cpu) == sorted(h200) and len(cpu) == 100
        assert all(cpu[d]["target"] == h200[d]["target"] for d in cpu)
        assert not any(cpu[d]["prompt_hash"] == h200[d]["prompt_hash"] for d in cpu)
    text = (REPO / "results" / "reference-model-mamba2" / "h200" / "side-by-side.md").read_text()
    assert "Mamba2 ran passkey version 2" in text and "KDA v2 ran passkey version 1" in text


def test_side_by_side_shows_the_one_call_three_family_sweep_and_the_factor(monkeypatch, tmp_path, capsys):
    """Stand-in records for results/retrieval-three-families-h100/: the committed KDA and GDN
    retrieval reports (and the GDN fp16 report standing in for the one-store arms)."""
    import shutil

    from helpers.scripts import load_script

    sbs = load_script("gdn_kda_side_by_side")
    src = {
        "kda": REPO / "results" / "reference-model" / "h200",
        "gdn": REPO / "results" / "reference-model-gdn" / "h200",
    }
    src["mamba2"] = src["gdn"]
    for name, d in src.items():
        (tmp_path / name / "fp32").mkdir(parents=True)
        shutil.copy(d / "retrieval" / "fp32" / "manifest.json", tmp_path / name / "fp32" / "manifest.json")
        shutil.copytree(d / "reports", tmp_path / name / "reports", ignore=shutil.ignore_patterns("*short*"))
    for fmt in ("fp16", "bf16"):
        shutil.copy(
            tmp_path / "mamba2" / "reports" / f"compare-retrieval-fp32-vs-{fmt}.json",
            tmp_path / "mamba2" / "reports" / f"compare-retrieval-fp32-vs-{fmt}@chunk=65536.json",
        )
    monkeypatch.setattr(sbs, "THREE", tmp_path)
    sbs.main()
    out = capsys.readouterr().out
    section = out.split("## Retrieval: the three families in one call")[1].split("\n## ")[0]
    assert "on NVIDIA H200 (unrecorded weights), task version 1;" in section
    rows = [line for line in section.splitlines() if line.startswith("| ") and " @ " in line]
    table, factor = rows[:18], rows[18:]
    assert [r.split(" | ")[1] for r in table[:3]] == ["KDA v2", "GDN twin", "Mamba2"]
    for gdn, m2 in zip(table[1::3], table[2::3]):  # the stand-in Mamba2 is the GDN twin's reports
        assert gdn.split(" | ")[2:] == m2.split(" | ")[2:]
    assert len(factor) == 6 and all(r.split(" | ")[2] == r.split(" | ")[3] for r in factor)
    # without the one-call records the committed table stands (tested above); nothing is invented
    monkeypatch.setattr(sbs, "THREE", tmp_path / "absent")
    sbs.main()
    assert "three families in one call" not in capsys.readouterr().out


# a drift study's per-prompt figures, under its folder
STUDY_ROWS = Path("runs") / "ref-fp32-weights" / "prompt_results.csv"


def _prompt_results(path: Path) -> dict[tuple[str, str, str], dict[str, str]]:
    """A drift study's prompt_results.csv, keyed by (prompt, mode, arm)."""
    import csv

    with path.open() as f:
        return {(r["prompt"], r["mode"], r["arm"]): r for r in csv.DictReader(f)}


def test_the_h100_drift_study_is_whole_and_its_prefill_rows_are_the_h200_studys():
    """What drift-32k-h100/README.md says: 16 of 16 prompts in both modes there; prefill figures
    equal to the H200 study's prompt by prompt, decode figures of the H200's 6 prompts not."""
    base = REPO / "results" / "reference-model-mamba2"
    h100, h200 = (
        {k: r["mean_kl"] for k, r in _prompt_results(folder / STUDY_ROWS).items()}
        for folder in (base / "drift-32k-h100", base / "h200" / "drift-32k")
    )
    assert {m: len({k[0] for k in h100 if k[1] == m}) for m in ("prefill", "decode")} == {
        "prefill": 16,
        "decode": 16,
    }
    shared = [k for k in h200 if k in h100]
    prefill = [k for k in shared if k[1] == "prefill"]
    decode = [k for k in shared if k[1] == "decode" and k[2] != "fp32-aa"]
    assert len(prefill) == 48 and all(h100[k] == h200[k] for k in prefill)
    assert len(decode) == 12 and not any(h100[k] == h200[k] for k in decode)


def test_per_token_launches_on_the_h100_reproduce_the_h200_decode_figures():
    """drift-32k-h100/per-token-check: the last bits moved with drift's one-launch SSD kernel, not
    with the device — per-token launches on the H100 give the H200 study's first decode prompt."""
    base = REPO / "results" / "reference-model-mamba2"
    per_token = _prompt_results(base / "drift-32k-h100" / "per-token-check" / "prompt_results.csv")
    one_launch = _prompt_results(base / "drift-32k-h100" / STUDY_ROWS)
    h200 = _prompt_results(base / "h200" / "drift-32k" / STUDY_ROWS)
    decode = [k for k in per_token if k[1] == "decode"]
    assert {k[0] for k in decode} == {"0"} and len(decode) == 3
    for k in decode:  # every figure the H200 study recorded (its seconds are the device's)
        assert all(per_token[k].get(c) == v for c, v in h200[k].items() if c != "seconds"), k
    assert not any(per_token[k]["mean_kl"] == one_launch[k]["mean_kl"] for k in decode)
    assert all(per_token[k]["mean_kl"] == one_launch[k]["mean_kl"] for k in per_token if k[1] == "prefill")
