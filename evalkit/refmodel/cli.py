"""`scripts/train_reference_model.py`'s command line: train a run, install one, or (internally)
run a kernel warm-up helper."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evalkit.refmodel.architecture import ARCHES
from evalkit.refmodel.bundle import install
from evalkit.refmodel.settings import SIZES, TRAIN_SEED_BASE, Settings
from evalkit.refmodel.warmup import WARM_WORKER_FLAG, warm_worker_main

DOC = """Train evalkit's reference model: a small pure-KDA Kimi-Linear LM that really uses its state.

Why: no real Kimi-Linear weights can be downloaded here and a random model scores zero
everywhere, so evalkit ships its own small trained model. Every answer of a pure-KDA model
depends on its recurrent state, which is what a state-precision study needs.

What it does, in one bounded run (`--minutes` is the wall budget of the WHOLE script):
  1. generates text with evalkit's own task generators (passkey, noise/needle/essay NIAH,
     variable tracking, key-value retrieval) plus short GSM8K-format (`#### N`) arithmetic
     problems, all from training seeds >= 1_000_000 (evaluation uses seeds below that);
  2. trains a byte-level BPE tokenizer (digits split one per token) on that text;
  3. compiles the GPU kernels first (one forward+backward per stage shape, helper processes
     compiling alongside), then trains transformers' `KimiLinearForCausalLM` (pure KDA, dense
     MLPs) with a short-to-long curriculum scheduled by the wall clock left after that, answer
     tokens weighted 1 and context 0.02
     (without a curriculum the model stays at chance);
  4. saves a Hugging Face checkpoint (bf16 safetensors + tokenizer) every minute and at the end,
     so a killed run still leaves a usable model;
  5. evaluates it greedily (prefill + cached decode) on passkey/NIAH/vt/kv at several lengths,
     plus a state-reset control, and writes a model card.

GPU (H200, transformers 5.17 + fla-core 0.6.0):
    python scripts/train_reference_model.py --out /tmp/refmodel --bundle $OUT/refmodel.tar.gz --minutes 9.25
CPU smoke test (torch fallback, toy sizes, < 1 min):
    python scripts/train_reference_model.py --out /tmp/refmodel --device cpu --tiny --minutes 0.3
The Gated DeltaNet twin (same sizes, data and loss; Qwen3.5 layers with one decay per head):
    python scripts/train_reference_model.py --arch gdn --out /tmp/rm-gdn --bundle $OUT/gdn.tar.gz --minutes 9
The Mamba2 reference model (same sizes, data and loss; NemotronH blocks alternating Mamba2 and MLP;
its scan through FLA's GLA kernel on a GPU, torch on the CPU):
    python scripts/train_reference_model.py --arch mamba2 --out /tmp/m2 --bundle $OUT/m2.tar.gz --minutes 5
Install a finished run into the package and the results folder (--arch gdn/mamba2: that model's folders):
    python scripts/train_reference_model.py --install-from DIR_OR_BUNDLE

Outputs under --out: model/ (the checkpoint), recipe.json, loss_curve.csv, loss_curve.png,
quick_eval.json, MODEL_CARD.md, train.log. `--bundle FILE.tar.gz` also packs all of them into one
file, rewritten at every checkpoint (the device returns at most 8 files from $OUT).
"""

REPO = Path(__file__).resolve().parents[2]
ASSETS_DIR = REPO / "evalkit" / "assets" / "reference-model"
RESULTS_DIR = REPO / "results" / "reference-model"  # in the checkout: the lead installs from one
# the Gated DeltaNet twin (--arch gdn) and the Mamba2 model (--arch mamba2) are test fixtures and
# studies' models, not shipped: they live in the checkout's models/ folder, outside the package
# (the wheel carries the default model only)
DEFAULT_DIRS = {
    "kda": (ASSETS_DIR, RESULTS_DIR),
    "gdn": (REPO / "models" / "reference-model-gdn", REPO / "results" / "reference-model-gdn"),
    "mamba2": (REPO / "models" / "reference-model-mamba2", REPO / "results" / "reference-model-mamba2"),
}


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Settings]:
    p = argparse.ArgumentParser(
        description=DOC.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=DOC,
    )
    p.add_argument("--out", type=Path, help="output directory (checkpoint, recipe, loss curve, eval)")
    p.add_argument("--bundle", type=Path, default=None, help="also keep everything in this one .tar.gz file")
    p.add_argument("--minutes", type=float, default=None, help="wall budget of the whole script (default 8)")
    p.add_argument(
        "--train-seconds",
        type=float,
        default=None,
        help="the training clock's length, within --minutes (default: what --minutes leaves after set-up)",
    )
    p.add_argument(
        "--warm-only",
        action="store_true",
        help="stop after the kernel check and warm-up: fill the kernel caches for a later run here",
    )
    p.add_argument("--device", default="auto", help="auto | cuda | cpu")
    p.add_argument("--tiny", action="store_true", help="toy sizes for a CPU smoke test")
    p.add_argument("--seed", type=int, default=TRAIN_SEED_BASE, help="training seed base (>= 1_000_000)")
    p.add_argument(
        "--workers", type=int, default=None, help="data worker processes (default: cpus - 3, max 12)"
    )
    p.add_argument(
        "--warm-helpers",
        type=int,
        default=None,
        help="processes compiling the GPU kernels alongside the trainer (default: cpus/2 - 1, max 7)",
    )
    p.add_argument("--stages", default=None, help="curriculum lengths, e.g. 256,512,1024,2048")
    p.add_argument(
        "--size", choices=sorted(SIZES), default="4.7m", help="model size preset (--layers/--hidden override)"
    )
    p.add_argument(
        "--arch",
        choices=ARCHES,
        default="kda",
        help="kda: Kimi-Linear, per-channel decay; gdn: Qwen3.5 Gated DeltaNet, one decay per head; "
        "mamba2: NemotronH with Mamba2 mixers, one decay per head, no delta rule",
    )
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--hidden", type=int, default=None)
    p.add_argument(
        "--mixture", default=None, help="row mixture, e.g. passkey=1,kv=0.5 (default: all families)"
    )
    p.add_argument("--tokens-per-step", type=int, default=None)
    p.add_argument(
        "--eval-seconds", type=float, default=None, help="time kept for the final quick evaluation"
    )
    p.add_argument(
        "--install-from", type=Path, default=None, help="install a finished --out DIR or --bundle file"
    )
    p.add_argument("--assets-dir", type=Path, default=None, help="(default: by --arch)")
    p.add_argument("--results-dir", type=Path, default=None, help="(default: by --arch)")
    args = p.parse_args(argv)
    args.assets_dir = args.assets_dir or DEFAULT_DIRS[args.arch][0]
    args.results_dir = args.results_dir or DEFAULT_DIRS[args.arch][1]
    kw: dict[str, Any] = {"device": args.device, "seed": args.seed, "arch": args.arch}
    if args.minutes is not None:
        kw["minutes"] = args.minutes
    if args.workers is not None:
        kw["workers"] = args.workers
    if args.warm_helpers is not None:
        kw["warm_helpers"] = args.warm_helpers
    if args.stages:
        kw["stages"] = tuple(int(x) for x in args.stages.split(","))
        kw["stage_weights"] = tuple(1.0 for _ in kw["stages"])
    if args.mixture:
        try:
            kw["mixture"] = {
                k.strip(): float(v) for k, v in (item.split("=") for item in args.mixture.split(","))
            }
        except ValueError:
            p.error(f"--mixture takes name=weight pairs, e.g. passkey=1,kv=0.5; got {args.mixture!r}")
        unknown = set(kw["mixture"]) - set(Settings().mixture)
        if unknown or not any(w > 0 for w in kw["mixture"].values()):
            p.error(f"--mixture: unknown {sorted(unknown)} (known: {', '.join(Settings().mixture)})")
    for name in ("layers", "hidden", "eval_seconds", "tokens_per_step", "train_seconds"):
        if getattr(args, name) is not None:
            kw[name] = getattr(args, name)
    s = Settings.tiny_preset(tiny=True, **kw) if args.tiny else Settings.sized(args.size, **kw)
    if args.install_from is None and args.out is None:
        p.error("--out is required (or --install-from)")
    if s.seed < TRAIN_SEED_BASE:
        p.error(f"--seed must be >= {TRAIN_SEED_BASE}: lower seeds are evaluation's")
    return args, s


def main(argv: list[str] | None = None, script: Path | None = None) -> int:
    """The command line; `script`, the file that runs it, also starts the kernel warm-up helpers
    (with the internal flag), as the trainer itself was started."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [WARM_WORKER_FLAG]:
        return warm_worker_main(argv[1], argv[2])
    args, s = parse_args(argv)
    if args.install_from is not None:
        install(args.install_from, args.assets_dir, args.results_dir)
        return 0
    from evalkit.refmodel.train import train

    train(s, args.out, args.bundle, helper_script=script, warm_only=args.warm_only)
    return 0
