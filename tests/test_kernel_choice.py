"""`evalkit.kernel_choice`: the syntax of --kernels (one parser, one label), the environment only
as the CLI's default, the choice reaching every layer through the model, and a direct
`LLMEngine(path)` storing at the same points as `evalkit run`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch

from evalkit.errors import InputError
from evalkit.kernel_choice import (
    ENV_KEYS,
    KernelChoice,
    differences,
    kernels_from_environment,
    parse_kernels,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "text, want",
    [
        ("", KernelChoice()),
        ("default", KernelChoice()),
        ("prefill_dots=bf16", KernelChoice(prefill_dots="bf16")),
        ("weights=fp32,tf32=on", KernelChoice(weights="fp32", tf32=True)),
        (
            "fused-elementwise=0, MOE_COMBINE=torch",
            KernelChoice(fused_elementwise=False, moe_combine="torch"),
        ),
        ("kda_prefill=split,mla_prefill=flash", KernelChoice(kda_prefill="split", mla_prefill="flash")),
        ("moe_decode=grouped_mm", KernelChoice(moe_decode="grouped_mm")),
    ],
)
def test_parse_and_label_round_trip(text, want):
    got = parse_kernels(text)
    assert got == want and parse_kernels(got.label) == got
    # the label names exactly the switches that differ from the defaults
    named = {p.split("=")[0] for p in got.label.split(",")} if got.label != "default" else set()
    assert named == {k for k, v in vars(got).items() if v != getattr(KernelChoice(), k)}
    assert KernelChoice().label == "default"


@pytest.mark.parametrize(
    "text, needle",
    [
        ("prefill_dots=fp16", "prefill_dots must be one of fp32, bf16"),
        ("weights=fp8", "weights must be one of"),
        ("moe_decode=cutlass", "moe_decode must be one of triton, grouped_mm"),
        ("tf32=maybe", "tf32 must be on or off"),
        ("speed=fast", "bad switch 'speed=fast'; syntax KEY=VALUE"),
        ("moe_combine", "bad switch"),
        ("moe_combine=torch,moe_combine=fused", "bad switch"),
    ],
)
def test_bad_switches_are_one_line_errors(text, needle):
    with pytest.raises(InputError, match=re.escape(needle)) as exc:
        parse_kernels(text)
    assert "\n" not in str(exc.value)


def test_describe_lists_every_switch_with_its_value():
    d = KernelChoice(prefill_dots="bf16").describe()
    assert d == {
        "kda_prefill": "stream", "ssd_prefill": "walk", "prefill_dots": "bf16", "moe_combine": "fused",
        "moe_decode": "triton", "fused_elementwise": True,
        "mla_prefill": "auto", "weights": "auto", "tf32": False, "label": "prefill_dots=bf16",
    }  # fmt: skip
    assert differences(KernelChoice().describe(), d) == ["prefill_dots: fp32 vs bf16"]
    # a run that predates the record: the defaults, and torch's grouped GEMM for the decode's
    # experts, the only one there was before moe_decode was recorded
    assert differences(None, KernelChoice(moe_decode="grouped_mm").describe()) == []
    assert differences(None, KernelChoice().describe()) == ["moe_decode: grouped_mm vs triton"]
    old = {k: v for k, v in KernelChoice().describe().items() if k != "ssd_prefill"}
    assert differences(old, KernelChoice().describe()) == []  # a record that predates ssd_prefill
    assert differences(old, KernelChoice(ssd_prefill="split").describe()) == ["ssd_prefill: walk vs split"]


def test_environment_fills_defaults_and_names_the_variable():
    env = {"EVALKIT_KDA_PREFILL": "split", "EVALKIT_FUSED_ELEMENTWISE": "0", "EVALKIT_MLA_PREFILL": " "}
    assert kernels_from_environment(env) == KernelChoice(kda_prefill="split", fused_elementwise=False)
    assert kernels_from_environment({}) == KernelChoice()
    with pytest.raises(InputError, match="EVALKIT_MLA_PREFILL"):
        kernels_from_environment({"EVALKIT_MLA_PREFILL": "fast"})
    assert parse_kernels("kda_prefill=stream", base=kernels_from_environment(env)).kda_prefill == "stream"


def test_no_numerics_switch_is_read_from_the_environment_outside_the_cli_default():
    """`grep os.environ` over the package: the EVALKIT_* switch names appear only where the CLI
    fills --kernels (and in the vocabulary module that lists them)."""
    hits = subprocess.run(
        ["grep", "-rn", "--include=*.py", "-E", "|".join(ENV_KEYS), "evalkit", "kernels", "tasks"],
        cwd=ROOT, capture_output=True, text=True,
    ).stdout.splitlines()  # fmt: skip
    files = {h.split(":", 1)[0] for h in hits}
    assert files <= {"evalkit/kernel_choice.py", "evalkit/commands/kernels_option.py"}, files
    reads = [h for h in hits if "environ" in h]
    assert all(h.startswith("evalkit/commands/kernels_option.py") for h in reads), reads


def test_the_model_hands_the_choice_to_every_layer_that_reads_one():
    from evalkit.model import parse_config, random_model
    from evalkit.model.layers.kda import KDAttention
    from evalkit.model.layers.mla import MLAttention
    from evalkit.model.layers.moe import DenseMLP, MoE
    from tests.helpers.tiny_kimi import TINY_KIMI

    lm = random_model(parse_config(TINY_KIMI), "cpu", torch.float32, seed=0)
    choice = KernelChoice(moe_combine="torch", mla_prefill="sdpa", fused_elementwise=False)
    lm.use_kernels(choice)
    readers = [m for m in lm.modules() if isinstance(m, (KDAttention, MLAttention, MoE, DenseMLP))]
    assert len(readers) >= 4 and all(m.kernels is choice for m in readers)
    assert lm.kernels is choice and lm.layers[0].kernels is choice


def test_the_cpu_form_refuses_a_triton_kernel_choice(monkeypatch):
    from evalkit import kernels
    from evalkit.kernels import KernelInputError
    from evalkit.kernels.testing import kda_inputs, random_cu_seqlens

    monkeypatch.setenv("TRITON_INTERPRET", "0")
    x = kda_inputs(5, 2, 16, 16)
    pool = torch.zeros(2, 2, 16, 16)
    args = (
        *x.args(),
        pool,
        torch.tensor([0], dtype=torch.int32),
        random_cu_seqlens([5]),
        torch.tensor([False]),
    )
    with pytest.raises(KernelInputError, match="variant: a choice of the Triton prefill kernel"):
        kernels.kda_prefill(*args, variant="split")
    assert torch.isfinite(kernels.kda_prefill(*args)).all()


def test_a_direct_engine_stores_where_evalkit_run_does(tiny_hybrid_ckpt):
    """The library's default arm is the CLI's: the same store points and prefill rows on the CPU."""
    from evalkit.arm import DEFAULT_PREFILL_CHUNK
    from evalkit.backends.local import LocalBackend
    from evalkit.engine import LLMEngine

    direct = LLMEngine(str(tiny_hybrid_ckpt), device="cpu")
    via_run = LocalBackend(str(tiny_hybrid_ckpt), arm="fp32", device="cpu").engine
    a, b = direct.describe()["batch_invariance"], via_run.describe()["batch_invariance"]
    assert a == b and a["prefill_chunk_size"] == DEFAULT_PREFILL_CHUNK
    assert direct.describe()["kernels"] == via_run.describe()["kernels"]
    assert direct.scheduler.config.prefill_chunk_size == DEFAULT_PREFILL_CHUNK
