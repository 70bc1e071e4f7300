"""`evalkit.arm`: the arm vocabulary parsed once, recorded in the manifest, part of the run's identity."""

from __future__ import annotations

import pytest

from evalkit.arm import DEFAULT_PREFILL_CHUNK, Arm, parse_arm, parse_arms, server_format
from evalkit.engine.config import EngineConfig
from evalkit.errors import InputError, MismatchError
from evalkit.kernels.formats import StateFormat


@pytest.mark.parametrize(
    "text, storage, bits, rounding, chunk, intra",
    [
        ("fp32", "fp32", 23, "rtne", DEFAULT_PREFILL_CHUNK, None),
        ("fp16", "fp16", 10, "rtne", DEFAULT_PREFILL_CHUNK, None),
        ("BF16", "bf16", 7, "rtne", DEFAULT_PREFILL_CHUNK, None),
        ("m7", "fp32", 7, "rtne", DEFAULT_PREFILL_CHUNK, None),
        ("m3-rtz@chunk=64", "fp32", 3, "rtz", 64, None),
        ("bf16-rtz@chunk=64", "bf16", 7, "rtz", 64, None),
        ("fp16-sr", "fp16", 10, "sr", DEFAULT_PREFILL_CHUNK, None),
        ("fp8_e4m3", "fp8_e4m3", 3, "rtne", DEFAULT_PREFILL_CHUNK, None),
        ("fp16@intra=bf16@chunk=512", "fp16", 10, "rtne", 512, "bf16"),
    ],
)
def test_arm_names_parse_and_round_trip(text, storage, bits, rounding, chunk, intra):
    arm = parse_arm(text)
    assert (arm.format.storage, arm.mantissa_bits, arm.format.rounding) == (storage, bits, rounding)
    assert (arm.prefill_chunk_size, arm.intra_chunk_dtype) == (chunk, intra)
    assert parse_arm(arm.label) == arm
    # the loose spellings of a direct LLMEngine call parse into the same arm
    loose = dict(state_dtype=arm.format.name, prefill_chunk_size=chunk, intra_chunk_dtype=intra)
    assert EngineConfig().with_options(**loose).arm == arm


def test_the_label_leaves_defaults_out_and_orders_parameters():
    assert parse_arm("fp16@chunk=2048").label == "fp16"
    assert parse_arm("fp16@intra=bf16@chunk=64").label == "fp16@chunk=64@intra=bf16"
    assert Arm(StateFormat("bf16"), 64).label == "bf16@chunk=64"
    assert parse_arm("fp32").is_baseline and not parse_arm("m23@intra=bf16").is_baseline


@pytest.mark.parametrize(
    "text, says",
    [
        ("fp12", "unknown state format"),
        ("fp32-rtz", "fp32 storage does not round"),
        ("m0", "mantissa bits must be 1..23"),
        ("fp16@chunk=0", "chunk must be a positive"),
        ("fp16@chunk=x", "chunk must be a positive"),
        ("fp16@size=4", "bad parameter"),
        ("fp16@chunk=4@chunk=8", "bad parameter"),
        ("fp16@intra=fp8", "intra must be one of"),
    ],
)
def test_bad_arms_are_one_line_input_errors(text, says):
    with pytest.raises(InputError, match=says) as err:
        parse_arm(text)
    assert "\n" not in str(err.value)


def test_arm_lists():
    assert [a.label for a in parse_arms("fp32, m7 ,bf16-rtz@chunk=64")] == ["fp32", "m7", "bf16-rtz@chunk=64"]
    with pytest.raises(InputError, match="listed twice: fp16"):
        parse_arms("fp16,fp16@chunk=2048")
    with pytest.raises(InputError, match="no arm"):
        parse_arms(" , ")


def test_server_formats_are_the_16_bit_and_fp32_ones():
    assert server_format("bf16") == "bf16"
    with pytest.raises(InputError, match="servers store the state as fp32, fp16, bf16 only"):
        server_format("m7")


def test_the_manifest_records_the_arm_and_a_resume_with_another_chunk_size_is_refused(tmp_path):
    from evalkit.store import RunWriter

    def manifest(arm_text):
        arm = parse_arm(arm_text)
        return {"model": {"path": "m"}, "backend": {"name": "local"}, "arm": {**arm.describe(), "note": None}}

    m = manifest("bf16-rtz@chunk=64")
    assert m["arm"]["format"] == {
        "name": "bf16-rtz",
        "storage": "bf16",
        "mantissa_bits": 7,
        "rounding": "rtz",
        "seed": None,
    }
    assert m["arm"]["prefill_chunk_size"] == 64 and m["arm"]["intra_chunk_dtype"] is None
    RunWriter.open(tmp_path / "run", m).close()
    RunWriter.open(tmp_path / "run", manifest("bf16-rtz@chunk=64")).close()  # same arm resumes
    with pytest.raises(MismatchError, match=r"arm\.prefill_chunk_size is 64 there but 2048 now"):
        RunWriter.open(tmp_path / "run", manifest("bf16-rtz"))
    with pytest.raises(MismatchError, match=r"arm\.intra_chunk_dtype"):
        RunWriter.open(tmp_path / "run", manifest("bf16-rtz@chunk=64@intra=bf16"))


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--model", "x", "--arm", "fp16@chunk=-3"],
        ["serve", "--arm", "fp17"],
        ["drift", "--arms", "fp16@chunk=-3"],
        ["recipes", "--arm", "m7"],
    ],
)
def test_every_command_refuses_a_bad_arm_in_one_line(argv, capsys):
    from evalkit.cli import main as cli

    assert cli(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"evalkit {argv[0]}") and err.count("\n") == 1 and "Traceback" not in err
