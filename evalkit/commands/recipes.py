"""`evalkit recipes`: how to start a vLLM / SGLang / ATOM server per state-dtype arm, and the
matching `evalkit run` line, so a fleet user evaluates exactly what they deploy.

The knobs (each engine's documented state-dtype switch):
vLLM `--mamba-ssm-cache-dtype`, SGLang `--mamba-ssm-dtype`, ATOM env `ATOM_GDN_SSM_DTYPE`.
The same knobs serve Kimi-Linear (KDA), the Gated DeltaNet family (Qwen3-Next, Qwen3.5) and the
Mamba2 hybrids (NemotronH, Granite-4.0-H, Bamba, Falcon-H1); the family (`--family`, else guessed
from the model) picks the rest of the command line and the notes.
"""

from __future__ import annotations

import argparse
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.arm import SERVER_FORMATS, server_format
from evalkit.errors import InputError

ARMS = tuple(SERVER_FORMATS)  # the state formats serving engines offer
FAMILIES = ("kimi", "qwen3_next", "qwen3_5", "nemotron_h", "granitemoehybrid", "bamba", "falcon_h1")
_GDN_TYPES = {"qwen3_next": "qwen3_next", "qwen3_5": "qwen3_5", "qwen3_5_text": "qwen3_5"}
_GDN_TYPES |= {"qwen3_5_moe": "qwen3_5", "qwen3_5_moe_text": "qwen3_5"}
_MAMBA2_TYPES = {t: t for t in ("nemotron_h", "granitemoehybrid", "bamba", "falcon_h1")}
# family -> whose notes it reads (ENGINES' family_caveats keys)
NOTES_OF = {
    "kimi": "kimi",
    "qwen3_next": "gdn",
    "qwen3_5": "gdn",
    "nemotron_h": "mamba2",
    "granitemoehybrid": "mamba2",
    "bamba": "mamba2",
    "falcon_h1": "mamba2",
}


def model_family(model: str) -> str:
    """One of FAMILIES: a local checkpoint's model_type, else the hub id's name."""
    config = Path(model).expanduser() / "config.json"
    if config.is_file():
        try:
            model_type = json.loads(config.read_text()).get("model_type", "")
        except (json.JSONDecodeError, OSError):
            model_type = ""
        return _GDN_TYPES.get(model_type) or _MAMBA2_TYPES.get(model_type, "kimi")
    name = model.lower().replace("_", ".").replace("-", ".")
    if "nemotron.h" in name or "nemotron.nano" in name:
        return "nemotron_h"
    if "granite.4.0.h" in name:
        return "granitemoehybrid"
    if "bamba" in name:
        return "bamba"
    if "falcon.h1" in name:
        return "falcon_h1"
    if "qwen3.next" in name:
        return "qwen3_next"
    if "qwen3.5" in name or "qwen3.6" in name:
        return "qwen3_5"
    return "kimi"


LONG_NAMES = SERVER_FORMATS


@dataclass(frozen=True)
class Engine:
    name: str
    default_port: int
    caveats: tuple[str, ...]
    family_caveats: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def server(self, model: str, arm: str, port: int, family: str = "kimi") -> str:
        m, p = shlex.quote(model), port
        # Kimi-Linear ships remote code (its tokenizer); the Qwen GDN models are native everywhere
        remote = " --trust-remote-code" if family == "kimi" else ""
        if self.name == "vllm":
            text_only = (
                " --language-model-only" if family == "qwen3_5" else ""
            )  # a VLM: skip the vision tower
            return (
                f"vllm serve {m} --host 127.0.0.1 --port {p}{remote}{text_only} "
                f"--mamba-ssm-cache-dtype {LONG_NAMES[arm]}"
            )
        if self.name == "sglang":
            return (
                f"python -m sglang.launch_server --model-path {m} --host 127.0.0.1 --port {p}"
                f"{remote} --mamba-ssm-dtype {LONG_NAMES[arm]}"
            )
        return (
            f"ATOM_GDN_SSM_DTYPE={arm} python -m atom.entrypoints.openai_server --model {m} "
            f"--host 127.0.0.1 --server-port {p}"
        )

    def notes(self, family: str) -> tuple[str, ...]:
        return self.family_caveats.get(NOTES_OF[family], ()) + self.caveats

    def note(self, arm: str) -> str:
        if self.name == "vllm":
            return f"vllm --mamba-ssm-cache-dtype {LONG_NAMES[arm]}"
        if self.name == "sglang":
            return f"sglang --mamba-ssm-dtype {LONG_NAMES[arm]}"
        return f"atom ATOM_GDN_SSM_DTYPE={arm}"


ENGINES = {
    "vllm": Engine(
        "vllm",
        8000,
        (
            "`--mamba-cache-dtype` would change the conv state too; leave it unset to vary only the "
            "recurrent state.",
        ),
        {
            "kimi": (
                "Some vLLM versions keep Kimi-Linear's KDA state in fp32 whatever the flag says "
                "(`kda_state_dtype`); newer builds honour it. If two arms give identical responses on "
                "every question, suspect the flag was ignored.",
            ),
            "gdn": (
                "`auto` follows the model dtype (bf16) for GDN models (Qwen3-Next, Qwen3.5): pass float32 "
                "explicitly for the baseline arm. Older snapshots ignored the flag for GDN: if two arms "
                "give identical responses on every question, suspect that.",
                "Qwen3.5 is a vision-language checkpoint: `--language-model-only` (vLLM >= 0.17) skips "
                "the vision tower. Leave MTP speculative decoding (`--speculative-config`) off in every arm.",
            ),
            "mamba2": (
                "For NemotronH, `auto` takes the checkpoint's `mamba_ssm_cache_dtype` (float32 unless the "
                "release says otherwise): pass the arm's dtype explicitly in every arm.",
                "An fp16 Mamba state may be rounded stochastically by your build: say which rounding the "
                "server used in --arm-note (evalkit's own engine runs fp16-sr as its own arm).",
            ),
        },
    ),
    "sglang": Engine(
        "sglang",
        30000,
        (
            "The flag sets SGLANG_MAMBA_SSM_DTYPE; without it SGLang reads `mamba_ssm_dtype` from the "
            "model config, else float32. The conv state stays bf16 (SGLANG_MAMBA_CONV_DTYPE).",
        ),
        {
            "kimi": (
                "Kimi-Linear shares the Mamba/GDN state-dtype resolution, so its KDA state really is "
                "stored in the dtype you pick.",
            ),
            "gdn": (
                "Qwen3.5 configs carry `mamba_ssm_dtype: float32` (in text_config), which SGLang reads "
                "when no flag is given; the flag overrides it in every arm printed here.",
            ),
            "mamba2": (
                "--mamba-ssm-dtype is SGLang's Mamba state switch; evalkit has not checked it on the Mamba2 "
                "hybrids (NemotronH, Granite-4.0-H, Bamba, Falcon-H1): check that two arms differ before "
                "trusting them.",
            ),
        },
    ),
    "atom": Engine(
        "atom",
        8000,
        ("Older openai_server builds listen on 8888 unless --server-port is given.",),
        {
            "kimi": (
                "ATOM_GDN_SSM_DTYPE takes fp32 (default), fp16, bf16 and covers kimi_linear (ROCm/ATOM "
                "#2130). The diff under review named it ATOM_KDA_SSM_DTYPE: check which name your build "
                "reads (`grep -r SSM_DTYPE "
                "$(python -c 'import atom,os;print(os.path.dirname(atom.__file__))')`).",
                "Builds before #2130 store the KDA state in fp32 for kimi_linear regardless of the variable.",
            ),
            "gdn": (
                "ATOM_GDN_SSM_DTYPE (fp32 default, fp16, bf16) is ATOM's own switch for Gated DeltaNet "
                "models (Qwen3-Next, Qwen3.5).",
            ),
            "mamba2": (
                "ATOM_GDN_SSM_DTYPE is ATOM's switch for Gated DeltaNet models; evalkit does not know that "
                "it covers Mamba2 hybrids: check that two arms differ before trusting an ATOM arm.",
            ),
        },
    ),
}


def run_line(engine: Engine, model: str, arm: str, port: int, tasks: str) -> str:
    label = f"{engine.name}-{arm}"
    return (
        f"evalkit run --server http://127.0.0.1:{port} --model {shlex.quote(model)} "
        f"--tokenizer {shlex.quote(model)} --arm {label} "
        f"--arm-note {shlex.quote(engine.note(arm))} --tasks {tasks} --out runs/{label}"
    )


def lm_eval_line(engine: Engine, model: str, arm: str, port: int) -> str:
    return (
        f"lm_eval --model local-completions --model_args "
        f"model={model},base_url=http://127.0.0.1:{port}/v1/completions,num_concurrent=32,"
        f"tokenizer_backend=None --tasks gsm8k --log_samples --output_path lm-eval/{engine.name}-{arm}"
    )


def render(
    engines: list[str],
    arms: list[str],
    model: str,
    port: int | None,
    tasks: str,
    with_lm_eval: bool,
    family: str | None = None,
) -> str:
    family = family or model_family(model)
    out: list[str] = []
    for name in engines:
        eng = ENGINES[name]
        p = port or eng.default_port
        out.append(f"## {name}\n")
        for arm in arms:
            out.append(f"# arm {arm}: start the server, wait for it, evaluate, stop it")
            out.append(eng.server(model, arm, p, family) + " &")
            out.append(f"until curl -sf http://127.0.0.1:{p}/v1/models >/dev/null; do sleep 5; done")
            out.append(run_line(eng, model, arm, p, tasks))
            if with_lm_eval:
                out.append(lm_eval_line(eng, model, arm, p))
            out.append("kill %1; wait\n")
        base = arms[0]
        for arm in arms[1:]:
            out.append(f"evalkit compare runs/{name}-{base} runs/{name}-{arm}")
        out.append("\nNotes:")
        out.extend(f"- {c}" for c in eng.notes(family))
        out.append("")
    out.append(
        "Scale out: start one server per GPU (different ports) and pass every URL: "
        "`--server http://127.0.0.1:8000 --server http://127.0.0.1:8001`; the questions are "
        "shared among replicas and the results equal one server's."
    )
    out.append("Ready-made scripts: scripts/recipes/{vllm,sglang,atom}_arms.sh MODEL [TASKS].")
    return "\n".join(out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=sorted(ENGINES),
        action="append",
        help="only this engine (repeatable; default: all)",
    )
    parser.add_argument(
        "--arm",
        action="append",
        help="only this arm (repeatable; default: fp32 fp16 bf16, fp32 first as baseline)",
    )
    parser.add_argument(
        "--model",
        default="moonshotai/Kimi-Linear-48B-A3B-Instruct",
        help="model path or hub id used in the printed commands",
    )
    parser.add_argument(
        "--family",
        choices=FAMILIES,
        help="model family for the server flags (default: from the model's config.json or its name)",
    )
    parser.add_argument("--port", type=int, help="server port (default: the engine's usual one)")
    parser.add_argument("--tasks", default="gsm8k", help="tasks for the printed `evalkit run` lines")
    parser.add_argument(
        "--lm-eval",
        action="store_true",
        help="also print the matching `lm_eval --model local-completions` lines",
    )


def main(args: argparse.Namespace) -> int:
    if args.port is not None and not (0 < args.port < 65536):
        raise InputError(f"--port {args.port} is not a TCP port")
    engines = args.engine or sorted(ENGINES)
    arms = [server_format(a) for a in args.arm] if args.arm else list(ARMS)
    print(render(engines, arms, args.model, args.port, args.tasks, args.lm_eval, args.family))
    return 0
