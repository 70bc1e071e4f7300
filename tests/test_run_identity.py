"""A run's identity covers every numerics switch (issue 39): `evalkit run --kernels KEY=VALUE` on
a run directory made with the defaults is refused in one line naming `kernels.KEY`; the
EVALKIT_* variables fill the default of --kernels (and nothing else reads them); the source hash
is recorded, and a change of it is refused unless `--allow-source-change`, which the resume records."""

from __future__ import annotations

import json
import shutil

import pytest

from evalkit.cli import main as cli
from evalkit.kernel_choice import KernelChoice

# every switch but the two of the Triton prefill kernel (the CPU refuses them: tested below on the
# manifest), with a value other than its default
SWITCHES = {
    "moe_combine": "torch",
    "fused_elementwise": "off",
    "mla_prefill": "sdpa",
    "weights": "bf16",
    "tf32": "on",
}


def _args(ckpt, out, *extra):
    return ["run", "--model", str(ckpt), "--arm", "fp32", "--tasks", "passkey", "--lengths", "1k",
            "--limit", "1", "--device", "cpu", "--out", str(out), "--no-progress", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def default_run(tiny_hybrid_ckpt, tmp_path_factory):
    out = tmp_path_factory.mktemp("identity") / "run"
    assert cli(_args(tiny_hybrid_ckpt, out)) == 0
    return out


def _manifest(run):
    return json.loads((run / "manifest.json").read_text())


def test_the_manifest_records_every_switch_and_the_source(default_run):
    from evalkit.store.manifest import source_hash

    m = _manifest(default_run)
    assert {k: m["kernels"][k] for k in KernelChoice().describe()} == KernelChoice().describe()
    assert m["kernels"]["weights_dtype"] == "float32"  # what "auto" chose on the CPU
    assert m["source_hash"] == source_hash() and len(m["source_hash"]) == 64
    assert m["arm"]["prefill_chunk_size"] == 2048 and m["backend"]["device"] == "cpu"


@pytest.mark.parametrize("key", sorted(SWITCHES))
def test_resuming_across_a_switch_is_refused_naming_it(default_run, tiny_hybrid_ckpt, key, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(default_run, run)
    capsys.readouterr()
    assert cli(_args(tiny_hybrid_ckpt, run, "--kernels", f"{key}={SWITCHES[key]}")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"kernels.{key} is " in err[0] and "use another output directory" in err[0]


def test_the_environment_fills_the_default_of_kernels(
    default_run, tiny_hybrid_ckpt, tmp_path, monkeypatch, capsys
):
    run = tmp_path / "run"
    shutil.copytree(default_run, run)
    monkeypatch.setenv("EVALKIT_MOE_COMBINE", "torch")
    capsys.readouterr()
    assert cli(_args(tiny_hybrid_ckpt, run)) == 2  # the variable changed the run: refused
    assert "kernels.moe_combine is 'fused' there but 'torch' now" in capsys.readouterr().err
    # --kernels names the switch: it wins over the variable, and the run resumes
    assert cli(_args(tiny_hybrid_ckpt, run, "--kernels", "moe_combine=fused")) == 0
    monkeypatch.setenv("EVALKIT_MOE_COMBINE", "bogus")
    assert cli(_args(tiny_hybrid_ckpt, run)) == 2
    assert "(from EVALKIT_MOE_COMBINE)" in capsys.readouterr().err


def test_a_source_change_is_refused_unless_declared(default_run, tiny_hybrid_ckpt, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(default_run, run)
    m = _manifest(run)
    m["source_hash"] = "0" * 64  # a run made by other evalkit sources
    (run / "manifest.json").write_text(json.dumps(m))
    capsys.readouterr()
    assert cli(_args(tiny_hybrid_ckpt, run)) == 2
    err = capsys.readouterr().err.strip()
    assert "source_hash is" in err and "--allow-source-change" in err and len(err.splitlines()) == 1
    assert cli(_args(tiny_hybrid_ckpt, run, "--allow-source-change")) == 0
    resume = _manifest(run)["resumes"][-1]
    assert resume["source_change_allowed"]["source_hash"]["was"] == repr("0" * 64)
    assert _manifest(run)["source_hash"] == "0" * 64  # the run's own record is kept as it was


@pytest.mark.parametrize(
    "key, value", [("prefill_dots", "bf16"), ("kda_prefill", "split"), ("ssd_prefill", "split")]
)
def test_the_triton_prefill_switches_are_identity(default_run, key, value):
    from evalkit.store.manifest import first_identity_difference

    m = _manifest(default_run)
    other = {**m, "kernels": {**m["kernels"], **KernelChoice(**{key: value}).describe()}}
    assert first_identity_difference(m, other)[0] == f"kernels.{key}"


def test_the_triton_prefill_switches_are_refused_on_the_cpu(tiny_hybrid_ckpt, tmp_path, capsys):
    capsys.readouterr()
    assert cli(_args(tiny_hybrid_ckpt, tmp_path / "new", "--kernels", "prefill_dots=bf16")) == 2
    assert "the CPU runs its float32 form" in capsys.readouterr().err
    assert cli(_args(tiny_hybrid_ckpt, tmp_path / "new", "--kernels", "kda_prefill=split")) == 2
    assert "--kernels kda_prefill=split: a choice of the Triton" in capsys.readouterr().err
    assert cli(_args(tiny_hybrid_ckpt, tmp_path / "new", "--kernels", "ssd_prefill=split")) == 2
    assert "--kernels ssd_prefill=split: a choice of the Triton" in capsys.readouterr().err


def test_compare_refuses_arms_that_differ_besides_the_state(default_run, tiny_hybrid_ckpt, tmp_path, capsys):
    """The same arm through the torch MoE combine: a numerics floor, not a state comparison."""
    other = tmp_path / "torch-combine"
    assert cli(_args(tiny_hybrid_ckpt, other, "--kernels", "moe_combine=torch")) == 0
    capsys.readouterr()
    assert cli(["compare", str(default_run), str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "differ besides the state" in err
    assert "kernels.moe_combine: fused vs torch" in err and "--allow-numerics-difference" in err
    md = tmp_path / "report.md"
    cli(["compare", str(default_run), str(other), "--allow-numerics-difference", "--md", str(md)])
    assert "kernels.moe_combine: fused vs torch" in md.read_text()
    capsys.readouterr()
    assert cli(["compare", str(default_run), str(default_run), "--md", str(md)]) != 2  # equal numerics
