"""Several store chunks of a sequence in one prefill forward (`evalkit.model.store_rounds`): the
rounds' rows and store positions, and the engine's results bit for bit those of one forward per
store chunk (KDA + MLA, Gated DeltaNet, Mamba2) with fewer forwards, while a single store at the
piece's end would have differed (so the comparison can fail)."""

from __future__ import annotations

import textwrap

import pytest
import torch
from gdn_fixtures import tiny_gdn
from helpers.checkpoint_cache import checkpoint_cache_root

from evalkit.engine import LLMEngine, SamplingParams
from evalkit.model.store_rounds import segments, store_rounds


def test_segments_cut_at_multiples_of_the_chunk():
    assert segments(0, 10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert segments(6, 7, 4) == [(6, 8), (8, 12), (12, 13)]
    assert segments(8, 4, 4) == [(8, 12)]


def test_rounds_take_the_rth_chunk_of_every_sequence():
    # sequence 0: positions 6..13 (three segments); sequence 1: 0..2 (one); packed rows 0..7, 8..10
    rounds = store_rounds([6, 0], [7, 3], [5, 9], 4, "cpu")
    assert [r.ranges for r in rounds] == [((0, 2), (7, 10)), ((2, 6),), ((6, 7),)]
    first = rounds[0].batch
    assert first.slots.tolist() == [5, 9]
    assert first.cu_seqlens_cpu.tolist() == [0, 2, 5]
    assert first.has_initial_state.tolist() == [True, False]
    assert first.state_positions.tolist() == [7, 2]
    assert [r.batch.state_positions.tolist() for r in rounds[1:]] == [[11], [12]]
    assert all(r.batch.has_initial_state.tolist() == [True] for r in rounds[1:])
    assert store_rounds([0, 3], [4, 1], [0, 1], 4, "cpu") == []  # one chunk each: no rounds


def _prompts(n: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(40, 300, (n,), generator=g).tolist()
    return [torch.randint(3, 500, (k,), generator=g).tolist() for k in lens]


def _run(loaded, arm: str, **kw):
    eng = LLMEngine(loaded, device="cpu", arm=arm, max_num_batched_tokens=512, max_num_seqs=4, **kw)
    prompts = _prompts(5, seed=11)
    params = [SamplingParams(max_new_tokens=6, ignore_eos=True) for _ in prompts]
    out = eng.generate(prompts, params, use_tqdm=False)
    pairs = [(p[:-20], p[-20:]) for p in prompts]
    return [o.token_ids for o in out], eng.loglikelihood(pairs), eng


def _same_as_one_forward_per_chunk(path):
    tokens, ll, eng = _run(path, "fp16@chunk=64")
    one_tokens, one_ll, one = _run(eng.loaded, "fp16@chunk=64", chunks_per_forward=1)
    assert tokens == one_tokens
    assert ll == one_ll  # float equality: the same stored states at the same positions
    assert eng.stats["prefill_steps"] < one.stats["prefill_steps"]
    assert eng.describe()["batch_invariance"]["chunks_per_forward"] is None
    # a store only where each forward's piece ends (the budget's 512 tokens) computes other numbers
    _, piece_ll, _ = _run(eng.loaded, "fp16@chunk=512")
    assert piece_ll != ll


def test_kda_mla_hybrid(tiny_hybrid_ckpt):
    _same_as_one_forward_per_chunk(str(tiny_hybrid_ckpt))


def test_gated_deltanet(request):
    _same_as_one_forward_per_chunk(str(tiny_gdn(request, "qwen3_next")))


def test_mamba2_hybrid(request):
    from evalkit.testing.tiny_mamba2_models import build_tiny_nemotron_h_checkpoint

    ckpt = build_tiny_nemotron_h_checkpoint(checkpoint_cache_root(request) / "nemotron-h")
    _same_as_one_forward_per_chunk(str(ckpt))


def test_mla_expands_a_context_once_per_forward_in_store_chunk_gemms(tiny_hybrid_ckpt, monkeypatch):
    """The MLA prefill expands a sequence's context once per forward, however many store chunks the
    forward folds, and in GEMMs of one store chunk of rows (the shapes a forward per chunk gives)."""
    import evalkit.model.layers.mla as mla
    from evalkit.model.layers.mla import MLAttention

    gemm_rows: list[int] = []
    expand = MLAttention._expand

    def spy(self, lat, block):
        before = len(gemm_rows)
        out = expand(self, lat, block)
        expansions.append(gemm_rows[before:])
        return out

    real_linear = mla.F.linear

    def counting_linear(x, *args, **kwargs):
        gemm_rows.append(x.shape[0])
        return real_linear(x, *args, **kwargs)

    monkeypatch.setattr(mla.F, "linear", counting_linear)
    expansions: list[list[int]] = []
    monkeypatch.setattr(MLAttention, "_expand", spy)
    eng = LLMEngine(str(tiny_hybrid_ckpt), device="cpu", arm="fp32@chunk=64", max_num_batched_tokens=512)
    prompt = torch.randint(3, 500, (300,), generator=torch.Generator().manual_seed(5)).tolist()
    eng.loglikelihood([(prompt[:-8], prompt[-8:])])
    n_mla = sum(isinstance(m, MLAttention) for m in eng.loaded.model.modules())
    assert n_mla > 0 and eng.stats["prefill_steps"] == 1  # 300 tokens: 5 store chunks in one forward
    assert len(expansions) == n_mla  # once per layer, not once per store chunk (5 per layer)
    assert all(rows == [64, 64, 64, 64, 44] for rows in expansions)


def test_chunks_per_forward_must_be_positive(tiny_hybrid_ckpt):
    from evalkit.errors import InputError

    with pytest.raises(InputError, match="chunks_per_forward"):
        LLMEngine(str(tiny_hybrid_ckpt), device="cpu", chunks_per_forward=0)


ROUNDS_SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(1)
    from evalkit.engine import LLMEngine, SamplingParams
    g = torch.Generator().manual_seed(4)
    prompts = [torch.randint(3, 500, (n,), generator=g).tolist() for n in (100, 20)]
    out = {}
    for name, cpf in (("pieces", None), ("per_chunk", 1)):
        eng = LLMEngine(sys.argv[1], device="cpu", arm="fp16@chunk=64", max_num_batched_tokens=192,
                        max_num_seqs=2, block_size=16, chunks_per_forward=cpf)
        ll = eng.loglikelihood([(p[:-8], p[-8:]) for p in prompts])
        out[name] = {"ll": [x[0] for x in ll], "forwards": eng.stats["prefill_steps"]}
    from evalkit.kernels.kda_decode import wrapper
    out["interpreted"] = type(wrapper.kda_decode_kernel).__name__
    out["executed"] = [f"{len(prompts)} prompts, two schedules"]
    print(json.dumps(out))
""")


@pytest.mark.parametrize("family", ["kimi", "nemotron_h"])
def test_triton_kernels_interpreted(request, family):
    """The GPU path (evalkit's Triton KDA and SSD prefill, MLA and conv kernels, interpreted): the
    same log-likelihoods to the last bit with store rounds as with one forward per store chunk.
    Gated DeltaNet layers call the same KDA kernel and NemotronH's gated attention: not run again
    (70 s interpreted; their CPU path is tested above). The Kimi model here has dense MLPs only:
    on the CPU torch._grouped_mm runs one matmul per expert group, whose rows depend on the group's
    size, so the interpreted MoE moves last bits with any change of batch mates; on the GPU the
    grouped GEMM is row-invariant (bench_engine's invariance part), and bench_long_prompt checks
    the store rounds at 48B dims with the MoE."""
    from evalkit.kernels.testing import run_json_script
    from evalkit.testing import build_tiny_checkpoint

    if family == "kimi":
        root = checkpoint_cache_root(request)
        ckpt = build_tiny_checkpoint(root / "hybrid-dense", kind="hybrid", first_k_dense_replace=4)
    else:
        from evalkit.testing.tiny_mamba2_models import build_tiny_nemotron_h_checkpoint

        ckpt = build_tiny_nemotron_h_checkpoint(checkpoint_cache_root(request) / "nemotron-h")
    out = run_json_script(ROUNDS_SCRIPT, str(ckpt), interpret=True, timeout=600)
    assert out["interpreted"] == "InterpretedFunction"
    assert out["pieces"]["ll"] == out["per_chunk"]["ll"]
    assert out["pieces"]["forwards"] < out["per_chunk"]["forwards"]
