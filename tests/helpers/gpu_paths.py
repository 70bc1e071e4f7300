"""The engine's GPU code paths run on CPU under TRITON_INTERPRET=1 and compared with its CPU path,
shared by the Kimi-Linear and the GDN checkpoint tests (only the prompt and decode lengths differ)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch

from evalkit.kernels.testing import run_json_script

# argv: checkpoint, "cpu" | "triton", length of the long prompt, tokens to generate[, --kernels].
ENGINE_SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(1)
    from evalkit.engine import LLMEngine, SamplingParams, Sequence
    long_len, new_tokens = int(sys.argv[3]), int(sys.argv[4])
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(3, 512, (n,), generator=g).tolist() for n in (9, long_len)]
    from evalkit.kernel_choice import parse_kernels
    kernels = parse_kernels(sys.argv[5] if len(sys.argv) > 5 else "")
    eng = LLMEngine(sys.argv[1], device="cpu", max_num_seqs=4, batch_invariant=False, block_size=16,
                    kernels=kernels)
    outs = eng.generate(prompts, SamplingParams(max_new_tokens=new_tokens, ignore_eos=True), use_tqdm=False)
    seq = Sequence(prompts[1] + list(range(5, 4 + new_tokens)), SamplingParams())
    eng.runner.attach(seq)
    rows = [eng.runner.prefill([(seq, long_len)], all_logits=True)[0][-2:]]
    rows += [eng.runner.decode([seq]) for _ in range(new_tokens - 1)]
    out = {"tokens": [o.token_ids for o in outs], "logits": torch.cat(rows).tolist()}
    out["executed"] = [f"generate {len(outs)} sequences", f"{len(rows)} logit rows"]
    if sys.argv[2] == "triton":  # the Triton modules really ran in the interpreter
        from evalkit.kernels.kda_decode import wrapper
        from evalkit.kernels.mla_decode import kernel as mla_decode
        out["interpreted"] = [type(wrapper.kda_decode_kernel).__name__,
                              type(mla_decode._mla_partial_kernel).__name__]
    print(json.dumps(out))
""")


def run_engine(ckpt: Path, mode: str, long_len: int, new_tokens: int, kernels: str = "") -> dict:
    """Tokens and logits of `ckpt` through the engine on the "cpu" or the interpreted "triton" path
    (`kernels`: the run's `--kernels` switches)."""
    args = (str(ckpt), mode, str(long_len), str(new_tokens), kernels)
    return run_json_script(ENGINE_SCRIPT, *args, interpret=mode == "triton", timeout=600)


def assert_triton_matches_cpu(ckpt: Path, long_len: int, new_tokens: int) -> None:
    cpu, tri = run_engine(ckpt, "cpu", long_len, new_tokens), run_engine(ckpt, "triton", long_len, new_tokens)
    assert tri["interpreted"] == ["InterpretedFunction", "InterpretedFunction"]
    assert tri["tokens"] == cpu["tokens"]
    a, b = torch.tensor(cpu["logits"]), torch.tensor(tri["logits"])
    assert (a - b).abs().max() <= 1e-4 * a.abs().max()
