"""Tiny random Kimi-Linear checkpoints for tests, built with transformers' own classes.

`build_tiny_checkpoint(path, kind)` writes a Hugging Face checkpoint directory (config.json,
model.safetensors, tokenizer files) that `AutoTokenizer` / `KimiLinearForCausalLM.from_pretrained`
and `evalkit.model.load_model` all read:
- kind="hybrid": 4 layers, KDA at 1-3 and MLA at 4 (1-indexed, as in the real config's lists),
  layer 0 dense, MoE (4 experts, top 2, a shared expert, nonzero e_score_correction_bias);
- kind="pure_kda": 4 KDA layers, no MLA (transformers' cached `generate()` fails on these; compare
  against greedy re-running of full forwards with use_cache=False).
The tokenizer is a byte-level BPE trained on the first questions of GSM8K train, with
`<|bos|>`, `<|eos|>`, `<|pad|>` and a minimal chat template. Builds are cached by their arguments.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from evalkit.testing.build_once import build_once

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
_BUILDER_VERSION = 1


def gsm8k_dir() -> Path:
    """GSM8K as evalkit finds it ($EVALKIT_DATA, else the pinned copy shipped with the package)."""
    from evalkit.tasks.data import locate_gsm8k

    return locate_gsm8k(allow_hub=False).files["train"].parent


def _training_text(n_lines: int = 1500) -> list[str]:
    src = gsm8k_dir() / "train.jsonl"
    lines: list[str] = []
    if src.is_file():
        with src.open() as f:
            for i, line in enumerate(f):
                if i >= n_lines:
                    break
                row = json.loads(line)
                lines.append(row.get("question", "") + "\n" + row.get("answer", ""))
    if not lines:  # no data: still a usable (worse) tokenizer
        lines = ["The quick brown fox jumps over the lazy dog. 0123456789 + - * / = ?"] * 50
    return lines


def build_tokenizer(path: Path, vocab_size: int):
    from transformers import PreTrainedTokenizerFast

    from evalkit.tasks.bpe import train_byte_bpe

    tok = train_byte_bpe(_training_text(), vocab_size, [PAD, BOS, EOS], split_digits=False)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(path))
    return fast


def tiny_config(kind: str, vocab_size: int, tok, **overrides):
    from evalkit.refmodel.kimi_config import kimi_linear_config

    if kind not in ("hybrid", "pure_kda"):
        raise ValueError(f"kind must be 'hybrid' or 'pure_kda', got {kind!r}")
    extra = dict(
        moe_intermediate_size=64,
        num_local_experts=4,
        num_experts_per_tok=2,
        n_shared_experts=1,
        kv_lora_rank=32,
        qk_nope_head_dim=32,
        qk_rope_head_dim=16,
        v_head_dim=32,
        initializer_range=0.08,
        bos_token_id=tok.convert_tokens_to_ids(BOS),
        eos_token_id=tok.convert_tokens_to_ids(EOS),
        pad_token_id=tok.convert_tokens_to_ids(PAD),
    )
    extra.update(overrides)
    return kimi_linear_config(
        vocab_size=vocab_size,
        hidden=128,
        intermediate=256,
        layers=4,
        heads=2,
        head_dim=32,
        full_attn_layers=[4] if kind == "hybrid" else [],
        **extra,
    )


def build_tiny_checkpoint(
    path: str | os.PathLike, kind: str = "hybrid", seed: int = 0, vocab_size: int = 512, **config_overrides
) -> Path:
    """Write (or reuse, when the same arguments built it before) a tiny checkpoint at `path`."""
    import torch
    from transformers import KimiLinearForCausalLM

    path = Path(path)
    stamp = {
        "v": _BUILDER_VERSION,
        "kind": kind,
        "seed": seed,
        "vocab_size": vocab_size,
        "overrides": {k: repr(v) for k, v in sorted(config_overrides.items())},
    }

    def build(folder: Path) -> None:
        tok = build_tokenizer(folder, vocab_size)
        cfg = tiny_config(kind, vocab_size, tok, **config_overrides)
        torch.manual_seed(seed)
        model = KimiLinearForCausalLM(cfg)
        with torch.no_grad():
            gen = torch.Generator().manual_seed(seed + 1)
            for name, buf in model.named_buffers():
                if name.endswith("e_score_correction_bias"):
                    buf.copy_(torch.randn(buf.shape, generator=gen) * 0.5)
            for name, p in model.named_parameters():  # non-trivial norm weights exercise the weight paths
                if name.endswith("norm.weight"):
                    p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
        model.save_pretrained(str(folder))

    return build_once(path, stamp, build)


def main(argv: list[str] | None = None) -> int:
    """`python -m evalkit.testing.tiny_models PATH [--kind hybrid|pure_kda] [--seed N]`: the tiny
    random checkpoint the README's examples and the tests use (needs `evalkit[engine]`)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m evalkit.testing.tiny_models", description=main.__doc__)
    parser.add_argument("path", help="folder to write the checkpoint to (reused when already built)")
    parser.add_argument("--kind", choices=("hybrid", "pure_kda"), default="hybrid")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(build_tiny_checkpoint(args.path, kind=args.kind, seed=args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
