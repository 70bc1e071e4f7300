"""GSM8K exactly as lm-eval 0.4.x asks and scores it, by running lm-eval's own code.

evalkit loads lm-eval's shipped task YAML (`gsm8k.yaml`, `gsm8k-cot.yaml`), points it at the
data (hub `openai/gsm8k`, or local jsonl via `dataset_path: json`, lm-eval's documented
offline route), builds the task with lm-eval's TaskManager, seeds its few-shot sampler as
`simple_evaluate` does (1234), and takes the instances' contexts and generation kwargs as
prompts. Under a chat template the few-shot examples become multi-turn messages rendered with
the model's template, as lm-eval's HF model renders them. Scoring runs the YAML's filter
pipelines (strict-match, flexible-extract) and `exact_match` through lm-eval too. So prompts
are byte-identical and scores identical by construction; `tests/test_tasks_gsm8k.py`
checks it against `lm_eval.simple_evaluate`.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalkit.errors import InputError
from evalkit.tasks.base import ScoredDoc, TaskRequest
from evalkit.tasks.data import HUB_CONFIG, HUB_DATASET, GSM8KSource, locate_gsm8k
from evalkit.tasks.lm_eval_task import build_task, score_response, task_requests

FEWSHOT_SEED = 1234  # simple_evaluate's default fewshot_random_seed
DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's default for HF and API models when the YAML sets none
YAML_FILES = {"gsm8k": "gsm8k.yaml", "gsm8k_cot": "gsm8k-cot.yaml"}


def lm_eval_version() -> str:
    from importlib.metadata import version

    return version("lm_eval")


def lm_eval_yaml(name: str) -> dict[str, Any]:
    """lm-eval's own YAML for the task, as a dict."""
    import lm_eval
    from lm_eval.tasks._yaml_loader import load_yaml

    path = Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / YAML_FILES[name]
    return load_yaml(path)


def with_data(cfg: dict[str, Any], source: GSM8KSource) -> dict[str, Any]:
    """`cfg` pointed at the data: unchanged for the hub, `json` + data_files for a local copy."""
    cfg = copy.deepcopy(cfg)
    if source.kind == "hub":
        cfg.update(dataset_path=HUB_DATASET, dataset_name=HUB_CONFIG)
    else:
        files = {k: str(Path(v).resolve()) for k, v in source.files.items()}
        cfg.update(dataset_path="json", dataset_name=None, dataset_kwargs={"data_files": files})
    return cfg


@lru_cache(maxsize=4)
def scoring_task(name: str):
    """lm-eval's task built over a one-row placeholder dataset: its filters and metric do not
    depend on the data, so scoring works in any process without GSM8K present."""
    import datasets

    row = {"question": "placeholder", "answer": "placeholder\n#### 0"}

    def placeholder(**_: Any):
        return {s: datasets.Dataset.from_list([row]) for s in ("train", "test")}

    cfg = lm_eval_yaml(name)
    cfg.update(dataset_path=None, dataset_name=None, custom_dataset=placeholder)
    cfg.pop("dataset_kwargs", None)
    return GSM8KTask(name).build_lm_eval_task(cfg)


def _whole(name: str, value: Any, minimum: int | None) -> int:
    """An integer option (a float like 3.0 passes), at least `minimum`; else a one-line InputError."""
    ok = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not ok or (minimum is not None and value < minimum):
        need = "a whole number" + (f" >= {minimum}" if minimum is not None else "")
        raise InputError(f"{name} must be {need}, got {value!r}")
    return int(value)


class GSM8KTask:
    """`gsm8k` (5-shot, Question/Answer) or `gsm8k_cot` (8 fixed CoT shots, Q/A), via lm-eval."""

    metrics = ["exact_match,strict-match", "exact_match,flexible-extract"]
    default_lengths = None

    def __init__(
        self,
        name: str = "gsm8k",
        *,
        num_fewshot: int | None = None,
        fewshot_seed: int = FEWSHOT_SEED,
        max_new_tokens: int = DEFAULT_MAX_GEN_TOKS,
        system_instruction: str | None = None,
        fewshot_as_multiturn: bool = True,
    ):
        if name not in YAML_FILES:
            raise InputError(f"unknown GSM8K variant {name!r}; known: {', '.join(YAML_FILES)}")
        self.name = name
        self.num_fewshot = None if num_fewshot is None else _whole("num_fewshot", num_fewshot, 0)
        self.fewshot_seed = _whole("fewshot_seed", fewshot_seed, None)
        self.max_new_tokens = _whole("max_new_tokens", max_new_tokens, 1)
        self.system_instruction = system_instruction
        self.fewshot_as_multiturn = fewshot_as_multiturn
        self.description = (
            "GSM8K 5-shot (Question:/Answer:), lm-eval's gsm8k prompts, filters and exact_match"
            if name == "gsm8k"
            else "GSM8K 8-shot chain of thought (Q:/A:, fixed exemplars), lm-eval's gsm8k_cot"
        )

    # -- contract ------------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        yaml_cfg = {
            k: v
            for k, v in lm_eval_yaml(self.name).items()
            if k not in ("dataset_path", "dataset_name", "dataset_kwargs")
        }
        return {
            "task": self.name,
            "family": "lm_eval",
            "lm_eval_version": lm_eval_version(),
            "lm_eval_yaml": yaml_cfg,
            "num_fewshot": self.num_fewshot,
            "fewshot_seed": self.fewshot_seed,
            "max_new_tokens": self.max_new_tokens,
            "system_instruction": self.system_instruction,
            "fewshot_as_multiturn": self.fewshot_as_multiturn,
        }

    def lm_eval_config(self, data_dir: str | None = None) -> dict[str, Any]:
        """The lm-eval task config evalkit runs (lm-eval's YAML with the data located)."""
        return with_data(lm_eval_yaml(self.name), locate_gsm8k(data_dir))

    def build_lm_eval_task(self, cfg: dict[str, Any], show_progress: bool = True):
        """lm-eval's task object, configured as `simple_evaluate` configures it."""
        return build_task(cfg, self.num_fewshot, self.fewshot_seed, show_progress)

    def requests(
        self,
        *,
        tokenizer: Any = None,
        lengths: list[int] | None = None,
        limit: int | None = None,
        seed: int | None = None,
        data_dir: str | None = None,
        apply_chat_template: bool = False,
        show_progress: bool = True,
    ) -> list[TaskRequest]:
        """One request per test doc (the first `limit`). `seed`, when given, replaces lm-eval's
        few-shot seed 1234 (lm-eval's --seed 4th slot); `lengths` does not apply."""
        source = locate_gsm8k(data_dir)
        if seed is not None:
            self.fewshot_seed = int(seed)
        task = self.build_lm_eval_task(with_data(lm_eval_yaml(self.name), source), show_progress)
        return task_requests(
            task,
            self.name,
            tokenizer=tokenizer,
            limit=limit,
            apply_chat_template=apply_chat_template,
            system_instruction=self.system_instruction,
            fewshot_as_multiturn=self.fewshot_as_multiturn,
            default_max_new_tokens=self.max_new_tokens,
            meta={"data": source.describe(), "fewshot_seed": self.fewshot_seed},
            show_progress=show_progress,
        )

    def score(self, request: TaskRequest, response: str) -> list[ScoredDoc]:
        doc_ref = request.docs[0]
        return [self.score_doc(doc_ref.doc_id, doc_ref.meta["doc"], response, request.meta.get("gen_kwargs"))]

    # -- scoring through lm-eval ----------------------------------------------------------------
    def scorer(self):
        """lm-eval's task for scoring (see `scoring_task`)."""
        return scoring_task(self.name)

    def score_doc(
        self, doc_id: int | str, doc: dict[str, Any], response: str, gen_kwargs: dict[str, Any] | None = None
    ) -> ScoredDoc:
        return score_response(self.scorer(), self.name, doc_id, doc, response, gen_kwargs)
