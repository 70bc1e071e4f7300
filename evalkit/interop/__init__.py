"""lm-eval interop: evalkit's engine as the lm-eval model `evalkit`.

lm-eval 0.4.13 has no plugin discovery (its model registry only knows the names hard-coded in
`lm_eval.models.MODEL_MAPPING`, and its CLI cannot import user code), so the model is registered
at run time: `python -m evalkit.interop.lm_eval_cli …` takes exactly `lm_eval`'s arguments
(`--model evalkit --model_args pretrained=PATH,state_dtype=fp16 …`), registers the model, and
hands over to lm-eval's own CLI. From Python: `evalkit.interop.register()` then
`lm_eval.simple_evaluate(model="evalkit", …)`.
"""

from __future__ import annotations

MODEL_NAME = "evalkit"
TARGET = "evalkit.interop.lm_eval_model:EvalkitLM"


def register() -> None:
    """Register `evalkit` in lm-eval's model registry (lazily: nothing heavy is imported)."""
    import lm_eval.models  # noqa: F401 -- fills the registry with lm-eval's own models first
    from lm_eval.api.registry import model_registry

    if MODEL_NAME not in model_registry:
        model_registry.register(MODEL_NAME, target=TARGET)
