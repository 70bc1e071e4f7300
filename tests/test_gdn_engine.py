"""The engine on a tiny Qwen3-Next checkpoint: 16-bit arms equal fp32 with the GDN state rounded
where the pool stores (bit for bit), batch invariance (batch of 16 vs 3, batched vs alone), the
pools' GDN shapes (value heads, key/value dims, conv channels), freed slots come back zeroed."""

from __future__ import annotations

import pytest
import torch
from gdn_fixtures import tiny_gdn

from evalkit.engine import LLMEngine, SamplingParams
from tests.helpers.drive import TOKENS, assert_16bit_arm_equals_rounded_fp32


@pytest.fixture(scope="module")
def fp32(request):
    return LLMEngine(str(tiny_gdn(request, "qwen3_next")), device="cpu", state_dtype="fp32", max_num_seqs=16)


def test_pools_have_the_gdn_shapes(fp32):
    arch, st = fp32.arch, fp32.state
    assert arch.kda_layers == [0, 1, 2] and arch.mla_layers == [3]
    assert tuple(st.kda[0].shape[1:]) == (4, 16, 16)  # value heads, key dim, value dim
    assert st.conv[0].shape[1] == 2 * 2 * 16 + 4 * 16  # q, k over key heads; v over value heads
    assert st.mla[3].shape[1] == 2 * 2 * 16  # per KV head: value and key


@pytest.mark.parametrize("arm", ["fp16", "bf16"])
def test_16bit_arm_equals_fp32_with_rounded_state(fp32, arm):
    assert_16bit_arm_equals_rounded_fp32(fp32, arm)


def _prompts(n: int, seed: int, lo: int = 3, hi: int = 120) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randint(3, 512, (k,), generator=g).tolist() for k in torch.randint(lo, hi, (n,), generator=g)
    ]


def _params(n: int) -> list[SamplingParams]:
    return [SamplingParams(max_new_tokens=6 + (i * 5) % 7, ignore_eos=True) for i in range(n)]


def test_batch_invariance(fp32):
    prompts = _prompts(12, seed=2, hi=300)  # some prompts need two prefill chunks (256)
    small = LLMEngine(fp32.loaded, device="cpu", max_num_seqs=3)
    big = fp32.generate(prompts, _params(12), use_tqdm=False)
    little = small.generate(prompts, _params(12), use_tqdm=False)
    assert fp32.stats["max_batch"] > 3 >= small.stats["max_batch"]
    assert [o.token_ids for o in big] == [o.token_ids for o in little]
    alone = [fp32.generate([p], [sp], use_tqdm=False)[0] for p, sp in zip(prompts[:4], _params(4))]
    assert [o.token_ids for o in alone] == [o.token_ids for o in big[:4]]
    pairs = [(p[: len(p) // 2], p[len(p) // 2 :]) for p in prompts if len(p) > 3]
    assert fp32.loglikelihood(pairs) == small.loglikelihood(pairs)  # bit-identical logits
    for pool in list(fp32.state.kda.values()) + list(fp32.state.conv.values()):
        assert torch.count_nonzero(pool[: fp32.state.num_slots]) == 0  # freed slots are zero again


def test_twin_check_covers_gdn_launches(fp32):
    eng = LLMEngine(fp32.loaded, device="cpu", state_dtype="fp16", twin_check=1, max_num_seqs=2)
    eng.generate(
        [TOKENS[:30], TOKENS[30:100]], SamplingParams(max_new_tokens=4, ignore_eos=True), use_tqdm=False
    )
    summary = eng.describe()["twin_check"]["summary"]
    assert set(summary) == {"decode/fp16", "prefill/fp16"}
    assert all(v["checked"] > 0 and v["failed"] == 0 for v in summary.values())
