"""The GPU code paths of a GDN model, run on CPU under TRITON_INTERPRET=1: the Triton KDA decode
and chunked prefill with the per-head gate broadcast over K, the Triton conv, the paged attention
decode (the split-KV MLA kernel once per KV head, [v | k] rows) and grouped-GEMM MoE must give the
CPU path's tokens and logits."""

from __future__ import annotations

import textwrap

import torch
from gdn_fixtures import tiny_gdn

from evalkit.kernels.testing import run_json_script

SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(1)
    from evalkit.engine import LLMEngine, SamplingParams, Sequence
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(3, 512, (n,), generator=g).tolist() for n in (9, 40)]
    eng = LLMEngine(sys.argv[1], device="cpu", max_num_seqs=4, batch_invariant=False, block_size=16)
    outs = eng.generate(prompts, SamplingParams(max_new_tokens=3, ignore_eos=True), use_tqdm=False)
    seq = Sequence(prompts[1] + [5, 6], SamplingParams())
    eng.runner.attach(seq)
    rows = [eng.runner.prefill([(seq, 40)], all_logits=True)[0][-2:]]
    rows += [eng.runner.decode([seq]) for _ in range(2)]
    out = {"tokens": [o.token_ids for o in outs], "logits": torch.cat(rows).tolist()}
    out["executed"] = [f"generate {len(outs)} sequences", f"{len(rows)} logit rows"]
    if sys.argv[2] == "triton":  # the Triton modules really ran in the interpreter
        from evalkit.kernels.kda_decode import wrapper
        from evalkit.kernels.mla_decode import kernel as mla_decode
        out["interpreted"] = [type(wrapper.kda_decode_kernel).__name__,
                              type(mla_decode._mla_partial_kernel).__name__]
    print(json.dumps(out))
""")


def _run(ckpt, mode: str) -> dict:
    return run_json_script(SCRIPT, str(ckpt), mode, interpret=mode == "triton", timeout=600)


def test_triton_path_matches_cpu_path(request):
    ckpt = tiny_gdn(request, "qwen3_next")
    cpu, tri = _run(ckpt, "cpu"), _run(ckpt, "triton")
    assert tri["interpreted"] == ["InterpretedFunction", "InterpretedFunction"]
    assert tri["tokens"] == cpu["tokens"]
    a, b = torch.tensor(cpu["logits"]), torch.tensor(tri["logits"])
    assert (a - b).abs().max() <= 1e-4 * a.abs().max()
