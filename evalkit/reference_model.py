"""The embedded reference model: where its checkpoint lives and what `evalkit run` asks it by default.

A random model scores zero everywhere, which makes every paired test vacuous, and no real
Kimi-Linear weights can be downloaded here. So evalkit ships a small trained pure-KDA Kimi-Linear
model (`scripts/train_reference_model.py`; card, recipe and loss curve in
`results/reference-model/`) in `evalkit/assets/reference-model/`. Every answer of a pure-KDA
model comes through its recurrent state, which is what a state-precision study needs.

`EVALKIT_REFERENCE_MODEL=/path/to/checkpoint` points evalkit at another copy.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import EvalkitError

ASSET_DIR = Path(__file__).resolve().parent / "assets" / "reference-model"
ENV_VAR = "EVALKIT_REFERENCE_MODEL"
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
_MIN_WEIGHTS_BYTES = 4096  # a Git LFS pointer is ~130 bytes


class ReferenceModelMissing(EvalkitError, FileNotFoundError):
    """The reference model's files are not where evalkit looks (also a FileNotFoundError, so
    callers that only catch that see it too)."""


def _location() -> tuple[Path, str]:
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override).expanduser(), f"${ENV_VAR}"
    return ASSET_DIR, "the evalkit package"


def default_model_path() -> Path:
    """The directory of the shipped checkpoint (config.json, model.safetensors, tokenizer files).

    Raises `ReferenceModelMissing` with a message that says what is missing and what to do."""
    path, where = _location()
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise ReferenceModelMissing(
            f"the reference model is not in {path} ({where}): missing {', '.join(missing)}. "
            f"Train it with `python scripts/train_reference_model.py --out DIR` and install it with "
            f"`--install-from DIR`, set {ENV_VAR}=DIR, or pass --model PATH"
        )
    weights = path / "model.safetensors"
    if weights.stat().st_size < _MIN_WEIGHTS_BYTES:
        raise ReferenceModelMissing(
            f"{weights} is only {weights.stat().st_size} bytes: a Git LFS pointer, not the weights "
            f"(run `git lfs pull`, or set {ENV_VAR} to a real copy)"
        )
    try:
        model_type = json.loads((path / "config.json").read_text()).get("model_type")
    except (OSError, ValueError) as exc:
        raise ReferenceModelMissing(f"{path / 'config.json'} is unreadable: {exc}") from exc
    if model_type != "kimi_linear":
        raise ReferenceModelMissing(
            f"{path} holds a {model_type!r} checkpoint, not the kimi_linear reference model"
        )
    return path


def has_reference_model() -> bool:
    try:
        default_model_path()
    except ReferenceModelMissing:
        return False
    return True


@dataclass(frozen=True)
class Suite:
    """What `evalkit run` with no --model asks: every task at every length, `limit` docs each
    (the same shape as `--tasks/--lengths/--limit`, which override the fields one by one)."""

    tasks: tuple[str, ...]
    lengths: tuple[int, ...]
    limit: int
    seed: int | None = None  # None: the tasks' default evaluation seed (42)

    def cli_args(self) -> list[str]:
        args = [
            "--tasks",
            ",".join(self.tasks),
            "--lengths",
            ",".join(str(n) for n in self.lengths),
            "--limit",
            str(self.limit),
        ]
        return args + (["--seed", str(self.seed)] if self.seed is not None else [])

    def prompt_tokens(self) -> int:
        """Prompt tokens the suite prefills (an upper bound; each doc is <= its target length)."""
        return len(self.tasks) * self.limit * sum(self.lengths)


# The fallback when a model ships no suite.json (model v1's default, chosen from its H200 runs:
# passkey 100% and niah_single_1 92-100% at 2k/8k, kv_retrieval 0%). The shipped model v2 carries
# its own suite.json (copy_list, kv_recite, kv_recite_long at 2k: the cells with room).
BUILTIN_SUITE = Suite(tasks=("passkey", "niah_single_1", "kv_retrieval"), lengths=(2048, 8192), limit=8)
SUITE_FILE = "suite.json"  # written by the training run from its own fp32 evaluation
# Prompt tokens that fit in <= 3 minutes on 2 CPU cores: the built-in suite (240k tokens) took
# 117-124 s per arm there (README); 250k tokens at that rate is ~130 s, a quarter under the limit.
SUITE_TOKEN_BUDGET = 250_000


def load_suite(model_dir: Path | None = None) -> Suite:
    """The suite shipped with the model (`suite.json`: the training run picks the length where its
    fp32 accuracies sit between 30% and 90%), else `BUILTIN_SUITE`."""
    path = (model_dir if model_dir is not None else _location()[0]) / SUITE_FILE
    try:
        data = json.loads(path.read_text())
        suite = Suite(
            tasks=tuple(str(t) for t in data["tasks"]),
            lengths=tuple(int(n) for n in data["lengths"]),
            limit=int(data["limit"]),
            seed=data.get("seed"),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return BUILTIN_SUITE
    if not suite.tasks or not suite.lengths or suite.limit < 1 or suite.prompt_tokens() > SUITE_TOKEN_BUDGET:
        return BUILTIN_SUITE
    return suite


def __getattr__(name: str):
    # DEFAULT_SUITE is read when asked for, so it follows the model evalkit finds (and its suite.json)
    if name == "DEFAULT_SUITE":
        return load_suite()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_tasks() -> list[str]:
    """The default suite's task names."""
    return list(load_suite().tasks)
