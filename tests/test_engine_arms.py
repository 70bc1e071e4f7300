"""An arm differs from fp32 only through the rounding of the stored recurrent state.

Oracle: the fp32 arm with its KDA state pools rounded the arm's way after every forward pass, i.e.
exactly where the arm's pool stores: torch's round-to-nearest-even for fp16/bf16, and the rounding
oracle (`evalkit.kernels.rounding.round_to_format`, with the layer index as the seed and the
sequence's last folded position) for every other format. Its logits must equal the arm's bit for
bit, while plain fp32 differs."""

from __future__ import annotations

import pytest
import torch

from evalkit.engine import LLMEngine, SamplingParams
from evalkit.kernels import parse_format
from tests.helpers.drive import TOKENS, assert_16bit_arm_equals_rounded_fp32, drive_logits


@pytest.fixture(scope="module")
def fp32(tiny_hybrid_ckpt):
    return LLMEngine(str(tiny_hybrid_ckpt), device="cpu", state_dtype="fp32", max_num_seqs=2)


@pytest.mark.parametrize("arm", ["fp16", "bf16"])
def test_16bit_arm_equals_fp32_with_rounded_state(fp32, arm):
    assert_16bit_arm_equals_rounded_fp32(fp32, arm)


def test_intra_chunk_rounding_is_rounding_at_chunk_boundaries(fp32):
    """intra_chunk_dtype='fp16' with kda_chunk_size=32 = storing the carried state every 32 tokens."""
    eng = LLMEngine(
        fp32.loaded,
        device="cpu",
        state_dtype="fp32",
        intra_chunk_dtype="fp16",
        kda_chunk_size=32,
        max_num_seqs=2,
    )
    got = drive_logits(eng, TOKENS, [100], 0)
    pieces = drive_logits(fp32, TOKENS[:100], [32, 32, 32, 4], 0, round_to=torch.float16)
    plain = drive_logits(fp32, TOKENS[:100], [100], 0)
    assert torch.equal(got, pieces) and not torch.equal(got, plain)


def test_twin_check_routes_16bit_launches(fp32):
    eng = LLMEngine(fp32.loaded, device="cpu", state_dtype="fp16", twin_check=1, max_num_seqs=2)
    plain = LLMEngine(fp32.loaded, device="cpu", state_dtype="fp16", max_num_seqs=2)
    sp = SamplingParams(max_new_tokens=5, ignore_eos=True)
    prompts = [TOKENS[:30], TOKENS[30:100]]
    assert [o.token_ids for o in eng.generate(prompts, sp, use_tqdm=False)] == [
        o.token_ids for o in plain.generate(prompts, sp, use_tqdm=False)
    ]
    summary = eng.describe()["twin_check"]["summary"]
    assert set(summary) == {"decode/fp16", "prefill/fp16"}
    assert all(v["checked"] > 0 and v["failed"] == 0 for v in summary.values())
    assert plain.describe()["twin_check"] is None


@pytest.mark.parametrize("arm", ["m7", "m3-rtz", "fp16-sr", "bf16-rtz", "fp8_e4m3", "fp8_e5m2-sr:4"])
def test_every_format_equals_fp32_with_the_state_rounded_where_the_pool_stores(fp32, arm):
    eng = LLMEngine(fp32.loaded, device="cpu", state_dtype=arm, max_num_seqs=2)
    fmt = parse_format(arm)
    assert all(p.dtype == fmt.pool_dtype for p in eng.state.kda.values())
    assert eng.describe()["state_format"] == fmt.describe()
    got = drive_logits(eng, TOKENS, [70, 30], 20)
    simulated = drive_logits(fp32, TOKENS, [70, 30], 20, round_to=arm)
    plain = drive_logits(fp32, TOKENS, [70, 30], 20)
    assert torch.equal(got, simulated)
    assert not torch.equal(got, plain), "the format should move the logits at all"


def test_sr_arm_depends_on_its_seed(fp32):
    """A different SR seed is another arm (other random bits); the same seed reproduces itself."""
    run = lambda arm: drive_logits(
        LLMEngine(fp32.loaded, device="cpu", state_dtype=arm, max_num_seqs=2), TOKENS, [40], 5
    )
    a, b = run("m5-sr:1"), run("m5-sr:2")
    assert torch.equal(a, run("m5-sr:1")) and not torch.equal(a, b)


def test_state_pool_bytes_follow_the_format(fp32):
    from evalkit.engine.state import StatePools

    arch, mdt = fp32.arch, torch.float32
    sizes = {
        n: StatePools.bytes_per_slot(arch, parse_format(n).pool_dtype, mdt)
        for n in ("fp32", "m3", "fp16", "fp8_e4m3")
    }
    assert sizes["m3"] == sizes["fp32"] > sizes["fp16"] > sizes["fp8_e4m3"]
    H, K, n = arch.linear_num_heads, arch.linear_head_dim, len(arch.kda_layers)
    assert sizes["fp16"] - sizes["fp8_e4m3"] == n * H * K * K


def test_unknown_state_format_is_a_one_line_input_error(fp32):
    from evalkit.errors import InputError

    with pytest.raises(InputError, match="unknown state format"):
        LLMEngine(fp32.loaded, device="cpu", state_dtype="fp12", max_num_seqs=2)


@pytest.mark.parametrize("arm", ["fp8_e4m3", "m3-sr"])
def test_generate_end_to_end_with_new_formats(fp32, arm):
    """The whole engine (scheduler, health checks, twin check) runs an fp8 and an SR arm."""
    eng = LLMEngine(fp32.loaded, device="cpu", state_dtype=arm, twin_check=1, max_num_seqs=2)
    outs = eng.generate(
        [TOKENS[:20], TOKENS[20:50]], SamplingParams(max_new_tokens=3, ignore_eos=True), use_tqdm=False
    )
    assert [len(o.token_ids) for o in outs] == [3, 3]
    assert all(o.state_max_abs is not None and o.state_max_abs > 0 for o in outs)
    summary = eng.describe()["twin_check"]["summary"]
    assert set(summary) == {f"decode/{arm}", f"prefill/{arm}"}
    assert all(v["checked"] > 0 and v["failed"] == 0 for v in summary.values())


@pytest.mark.parametrize("arm", ["fp32", "bf16", "fp8_e4m3"])
def test_state_max_abs_is_the_largest_magnitude_of_each_slot(fp32, arm):
    """Against |x|.amax over each slot's elements (and the non-finite count against the elementwise
    one), for a few slots (gathered) and most of the pool (read in place), with a NaN, an infinity
    and a negative extreme planted in different slots."""
    from evalkit.engine.state import StatePools

    pools = StatePools(fp32.arch, 40, arm, torch.float32, "cpu", num_blocks=2, block_size=16)
    g = torch.Generator().manual_seed(0)
    for t in pools.kda.values():
        t.copy_((torch.randn(t.shape, generator=g) * 3).to(t.dtype))
    first = pools.kda[min(pools.kda)]
    first[3].view(-1)[7] = float("nan")
    first[5].view(-1)[0] = -448.0  # the largest magnitude of slot 5: a negative value (fp8 e4m3's max)
    if first.dtype != torch.float8_e4m3fn:  # e4m3fn has no infinity
        first[9].view(-1)[-1] = float("-inf")
    for slots in (torch.tensor([9, 3, 5, 0]), torch.arange(30).flip(0)):
        want = torch.stack([t[slots].float().abs().flatten(1).amax(1) for t in pools.kda.values()])
        got = pools.layer_max_abs(slots)
        assert torch.equal(got.isnan(), want.isnan()) and want.isnan().any()
        assert torch.equal(got.nan_to_num(-1.0), want.nan_to_num(-1.0))
        count = sum((~torch.isfinite(t[slots].float())).flatten(1).sum(1) for t in pools.kda.values())
        assert torch.equal(pools.nonfinite_count(slots), count) and count.sum() > 0


@pytest.mark.parametrize("arm", ["fp32", "bf16", "fp8_e4m3"])
def test_slots_freed_together_are_zeroed_at_the_end_and_only_then_free(fp32, arm):
    """The same pools as freeing one slot at a time (zeroed, back on the free list), every other
    slot untouched; inside the block the freed slots keep their contents and are not handed out."""
    from evalkit.engine.state import StatePools

    def filled():
        p = StatePools(fp32.arch, 8, arm, torch.float32, "cpu", num_blocks=2, block_size=16)
        for t in (*p.kda.values(), *p.conv.values()):
            t.copy_((torch.randn(t.shape, generator=torch.Generator().manual_seed(1)) + 5).to(t.dtype))
        for _ in range(6):
            p.alloc_slot()
        return p

    one, together = filled(), filled()
    for s in (4, 1, 2):
        one.free_slot(s)
    with together.freeing_together():
        for s in (4, 1, 2):
            together.free_slot(s)
        assert together.free_slots == 2 and all(t[1].float().abs().min() > 0 for t in together.kda.values())
    assert together.free_slots == one.free_slots == 5
    assert sorted(together._free_slots) == sorted(one._free_slots)
    for a, b in zip(
        (*one.kda.values(), *one.conv.values()), (*together.kda.values(), *together.conv.values())
    ):
        assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))
        assert not a[[4, 1, 2]].float().any() and a[[0, 3, 5]].float().abs().min() > 0
