"""Any lm-eval `generate_until` task, by name, asked by evalkit and scored by lm-eval itself.

`evalkit run --tasks NAME` falls back here for names evalkit does not define: the task's YAML
comes from `--include-path` folders (as `lm_eval --include_path`) or from lm-eval's own task
folders; lm-eval's TaskManager builds it, `build_all_requests` writes the prompts (few-shot,
chat template and all, seeded as `simple_evaluate` seeds them), and the YAML's filter pipelines
and metrics score each response. So prompts and per-doc scores are lm-eval's by construction.
A task reading GSM8K from the hub (`openai/gsm8k`, config `main`) reads it where evalkit finds
GSM8K (`--data-dir`, `$EVALKIT_DATA`, the hub, the bundled copy), so it also runs offline.

Binary metrics (exact_match, 0/1) become `correct`; fractional ones in [0, 1] become `score`
with `correct` meaning a full score, as for evalkit's RULER tasks.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
from contextlib import contextmanager
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from evalkit.errors import InputError
from evalkit.tasks.base import DocRef, ScoredDoc, TaskRequest
from evalkit.tasks.data import HUB_CONFIG, HUB_DATASET, locate_gsm8k
from evalkit.tasks.tokenizer import TokenizerView

FEWSHOT_SEED = 1234  # simple_evaluate's default fewshot_random_seed
DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's default for HF and API models when the YAML sets none
DATA_KEYS = ("dataset_path", "dataset_name", "dataset_kwargs")


# -- finding a task's YAML -------------------------------------------------------------------------
def _index(folders: tuple[str, ...]) -> dict[str, Any]:
    from lm_eval.tasks._index import TaskIndex

    return TaskIndex.build([Path(f) for f in folders])


@lru_cache(maxsize=16)
def _cached_index(folders: tuple[str, ...]) -> dict[str, Any]:
    return _index(folders)


def _lm_eval_task_root() -> Path:
    import lm_eval

    return Path(lm_eval.__file__).parent / "tasks"


def _likely_folders(name: str, root: Path) -> list[str]:
    """lm-eval's folders whose name starts the task's (`gsm8k_cot_zeroshot` -> gsm8k/): indexing
    one folder takes a moment, indexing all of lm-eval's tasks (14k YAMLs) most of a minute."""
    out = []
    for folder in root.iterdir():
        f = folder.name
        if folder.is_dir() and (name == f or name.startswith((f + "_", f + "-"))):
            out.append(str(folder))
    return sorted(out, key=len, reverse=True)


def _folders_naming(name: str, root: Path) -> list[str]:
    """Folders holding a YAML with a `task: NAME` line (a text scan: a second, not a minute)."""
    import re

    line = re.compile(rf"^task:\s*['\"]?{re.escape(name)}['\"]?\s*$", re.MULTILINE)
    return sorted({str(p.parent) for p in root.rglob("*.yaml") if line.search(p.read_text(errors="ignore"))})


def find_task_yaml(name: str, include_paths: list[str] | None = None) -> Path:
    """The YAML that defines lm-eval task `name`: the include paths first, then lm-eval's own."""
    from lm_eval.tasks._index import Kind

    include_paths = [str(Path(p).expanduser()) for p in include_paths or []]
    for p in include_paths:
        if not Path(p).is_dir():
            raise InputError(f"--include-path {p}: not a folder")
    root = _lm_eval_task_root()
    searches = [tuple(include_paths)] if include_paths else []
    searches += [(f,) for f in _likely_folders(name, root)]
    searches += [(f,) for f in _folders_naming(name, root) if (f,) not in searches]
    for folders in searches:
        entry = _cached_index(folders).get(name)
        if entry is None:
            continue
        if entry.kind in (Kind.GROUP, Kind.TAG):
            raise InputError(
                f"{name!r} is an lm-eval group or tag; evalkit runs single tasks: pass its tasks by name"
            )
        if entry.yaml_path is None:
            raise InputError(f"lm-eval task {name!r} has no YAML file that evalkit can load")
        return Path(entry.yaml_path)
    where = f"--include-path {', '.join(include_paths)} or " if include_paths else ""
    raise InputError(
        f"unknown task {name!r}: neither an evalkit task (`evalkit tasks` lists them) nor an lm-eval "
        f"task in {where}lm-eval's task folders"
    )


# -- a stable identity for the config --------------------------------------------------------------
def _stable(value: Any) -> Any:
    """JSON-able and machine-independent: functions become their name and source hash."""
    if callable(value):
        try:
            source = inspect.getsource(value)
        except (OSError, TypeError):
            source = repr(value)
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        return {"function": getattr(value, "__qualname__", repr(value)), "source_sha256": digest}
    if isinstance(value, dict):
        return {str(k): _stable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_stable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def _reads_hub_gsm8k(cfg: dict[str, Any]) -> bool:
    return cfg.get("dataset_path") == HUB_DATASET and cfg.get("dataset_name") in (None, HUB_CONFIG)


def located(cfg: dict[str, Any], data_dir: str | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """`cfg` with GSM8K read where evalkit finds it (other datasets unchanged), and where that is."""
    if not _reads_hub_gsm8k(cfg):
        return cfg, None
    source = locate_gsm8k(data_dir)
    cfg = copy.deepcopy(cfg)
    if source.kind == "hub":
        cfg.update(dataset_path=HUB_DATASET, dataset_name=HUB_CONFIG)
    else:
        files = {k: str(Path(v).resolve()) for k, v in source.files.items()}
        cfg.update(dataset_path="json", dataset_name=None, dataset_kwargs={"data_files": files})
    return cfg, source.describe()


# -- lm-eval's machinery, shared with evalkit's GSM8K tasks ----------------------------------------
def quiet_lm_eval() -> None:
    import logging

    for name in ("lm_eval", "lm-eval"):
        logging.getLogger(name).setLevel(logging.ERROR)


@contextmanager
def library_bars(show: bool = True):
    """lm-eval's and datasets' progress bars only where evalkit shows its own task-building bars
    (`show`: a terminal, without --no-progress): elsewhere they flood the log."""
    if show:
        yield
        return
    import datasets
    import lm_eval.api.task as lm_eval_task_module
    from tqdm import tqdm

    enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    original = lm_eval_task_module.tqdm
    lm_eval_task_module.tqdm = partial(tqdm, disable=True)
    try:
        yield
    finally:
        lm_eval_task_module.tqdm = original
        if enabled:
            datasets.enable_progress_bars()


def build_task(
    cfg: dict[str, Any], num_fewshot: int | None, fewshot_seed: int, show_progress: bool = True
) -> Any:
    """lm-eval's task object from a config dict, configured as `simple_evaluate` configures it."""
    from lm_eval.tasks import TaskManager

    quiet_lm_eval()
    with library_bars(show_progress):
        task = next(iter(TaskManager(include_defaults=False).load([cfg])["tasks"].values()))
    if num_fewshot is not None and task.get_config("num_fewshot") != 0:
        task.set_config(key="num_fewshot", value=num_fewshot)
    elif task.get_config("num_fewshot") is None:
        task.set_config(key="num_fewshot", value=0)
    task.set_fewshot_seed(seed=fewshot_seed)
    return task


def _check_fewshot_pool(task: Any) -> None:
    """A one-line InputError when num_fewshot asks for more examples than the task can draw (lm-eval
    samples them from its few-shot split, else from the evaluated docs, and fails deep inside)."""
    shots = task.get_config("num_fewshot") or 0
    if not shots:
        return
    pool = task.fewshot_docs()
    where = "few-shot examples"
    if pool is None:
        pool, where = task.eval_docs, "documents to draw few-shot examples from"
    if shots > len(pool):
        raise InputError(
            f"num_fewshot {shots} is more than the {len(pool)} {where} of task "
            f"{task.get_config('task')!r}; ask for at most {len(pool)}"
        )


def hf_chat_template(view: TokenizerView):
    """lm-eval's `chat_template` callable as its HF model implements it (HFLM.apply_chat_template)."""
    import jinja2

    def apply(chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        try:
            return view.render_chat(chat_history, add_generation_prompt=add_generation_prompt)
        except jinja2.exceptions.TemplateError:
            history = [m for m in chat_history if m["role"] != "system"]
            return view.render_chat(history, add_generation_prompt=add_generation_prompt)

    return apply


def _messages_template(chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    """Stand-in template without a tokenizer: the messages themselves, for a chat server."""
    return json.dumps({"messages": chat_history, "add_generation_prompt": add_generation_prompt})


def task_requests(
    task: Any,
    name: str,
    *,
    tokenizer: Any,
    limit: int | None,
    apply_chat_template: bool,
    system_instruction: str | None,
    fewshot_as_multiturn: bool,
    default_max_new_tokens: int,
    meta: dict[str, Any],
    show_progress: bool = True,
) -> list[TaskRequest]:
    """One request per doc (the first `limit`), built by lm-eval's `build_all_requests`."""
    _check_fewshot_pool(task)
    view = TokenizerView(tokenizer) if tokenizer is not None else None
    chat_template = None
    if apply_chat_template:
        chat_template = hf_chat_template(view) if view is not None else _messages_template
    with library_bars(show_progress):
        task.build_all_requests(
            limit=limit,
            rank=0,
            world_size=1,
            cache_requests=False,
            rewrite_requests_cache=False,
            system_instruction=system_instruction,
            apply_chat_template=bool(apply_chat_template),
            fewshot_as_multiturn=fewshot_as_multiturn,
            chat_template=chat_template,
            tokenizer_name=view.fingerprint()["name"] if (view is not None and apply_chat_template) else "",
        )
    out = []
    for inst in sorted(task.instances, key=lambda i: i.doc_id):
        context, gen_kwargs = inst.args[0], dict(inst.args[1])
        prompt: Any = context
        if apply_chat_template and view is None:
            prompt = json.loads(context)["messages"]
        doc = dict(inst.doc)
        out.append(
            TaskRequest(
                task=name,
                prompt=prompt,
                max_new_tokens=int(gen_kwargs.get("max_gen_toks", default_max_new_tokens)),
                until=list(gen_kwargs.get("until", [])),
                docs=[_doc_ref(task, inst.doc_id, doc)],
                length=None,
                meta={
                    "gen_kwargs": gen_kwargs,
                    "chat": bool(apply_chat_template),
                    "num_fewshot": task.get_config("num_fewshot"),
                    **meta,
                },
            )
        )
    return out


def score_response(
    task: Any, name: str, doc_id: int | str, doc: dict[str, Any], response: str, gen_kwargs: dict | None
) -> ScoredDoc:
    """lm-eval's filters and metrics on one response: {metric,filter: right?} (+ fractional scores)."""
    from lm_eval.api.instance import Instance

    inst = Instance(
        request_type="generate_until",
        doc=doc,
        arguments=("", gen_kwargs or {}),
        idx=0,
        metadata=(name, doc_id, 1),
    )
    inst.resps.append(response)
    for pipeline in task._filters:
        pipeline.apply([inst])
    correct: dict[str, bool] = {}
    extracted: dict[str, str] = {}
    score: dict[str, float] = {}
    for filter_name, filtered in inst.filtered_resps.items():
        for metric, value in task.process_results(doc, [filtered]).items():
            key = f"{metric},{filter_name}"
            if isinstance(value, bool) or value in (0, 1):
                correct[key] = bool(value)
            elif isinstance(value, (int, float)) and 0 <= value <= 1:
                correct[key], score[key] = value == 1, float(value)
        extracted[filter_name] = str(filtered)
    if not correct:
        raise InputError(
            f"lm-eval task {name}: no metric gives a per-question score in [0, 1] "
            "(corpus-level metrics such as BLEU cannot be paired question by question)"
        )
    return ScoredDoc(doc_id, str(task.doc_to_target(doc)), correct, extracted, score)


# -- the task --------------------------------------------------------------------------------------
class LmEvalTask:
    """An lm-eval `generate_until` task by name (see the module docstring)."""

    default_lengths = None

    def __init__(
        self,
        name: str,
        *,
        include_path: list[str] | str | None = None,
        num_fewshot: int | None = None,
        fewshot_seed: int = FEWSHOT_SEED,
        max_new_tokens: int = DEFAULT_MAX_GEN_TOKS,
        system_instruction: str | None = None,
        fewshot_as_multiturn: bool = True,
    ):
        from lm_eval.tasks._yaml_loader import load_yaml

        paths = [include_path] if isinstance(include_path, str) else list(include_path or [])
        self.name = name
        self.yaml_path = find_task_yaml(name, paths)
        self.yaml = load_yaml(self.yaml_path, resolve_func=True)
        output_type = self.yaml.get("output_type", "generate_until")
        if output_type != "generate_until":
            raise InputError(
                f"lm-eval task {name} is {output_type}; evalkit run asks servers for generations "
                "(generate_until tasks only)"
            )
        self.num_fewshot = num_fewshot
        self.fewshot_seed = int(fewshot_seed)
        self.max_new_tokens = int(max_new_tokens)
        self.system_instruction = system_instruction
        self.fewshot_as_multiturn = fewshot_as_multiturn
        self.description = f"lm-eval task {name} ({self.yaml_path.name})"
        filters = [f["name"] for f in self.yaml.get("filter_list") or []] or ["none"]
        metrics = [m["metric"] for m in self.yaml.get("metric_list") or []]
        self.metrics = [f"{m},{f}" for f in filters for m in metrics]
        self._task: Any = None

    def config(self) -> dict[str, Any]:
        from importlib.metadata import version

        yaml_cfg = self.yaml
        if _reads_hub_gsm8k(yaml_cfg):  # where GSM8K is read from does not change the questions
            yaml_cfg = {k: v for k, v in yaml_cfg.items() if k not in DATA_KEYS}
        return {
            "task": self.name,
            "family": "lm_eval",
            "lm_eval_version": version("lm_eval"),
            "lm_eval_yaml": _stable(yaml_cfg),
            "num_fewshot": self.num_fewshot,
            "fewshot_seed": self.fewshot_seed,
            "max_new_tokens": self.max_new_tokens,
            "system_instruction": self.system_instruction,
            "fewshot_as_multiturn": self.fewshot_as_multiturn,
        }

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
        """`seed`, when given, replaces lm-eval's few-shot seed 1234; `lengths` does not apply."""
        if seed is not None:
            self.fewshot_seed = int(seed)
        cfg, data = located(self.yaml, data_dir)
        self._task = build_task(cfg, self.num_fewshot, self.fewshot_seed, show_progress)
        return task_requests(
            self._task,
            self.name,
            tokenizer=tokenizer,
            limit=limit,
            apply_chat_template=apply_chat_template,
            system_instruction=self.system_instruction,
            fewshot_as_multiturn=self.fewshot_as_multiturn,
            default_max_new_tokens=self.max_new_tokens,
            meta={"fewshot_seed": self.fewshot_seed, **({"data": data} if data else {})},
            show_progress=show_progress,
        )

    def score(self, request: TaskRequest, response: str) -> list[ScoredDoc]:
        if self._task is None:
            raise RuntimeError(f"{self.name}: requests() builds the lm-eval task before scoring")
        doc_ref = request.docs[0]
        return [
            score_response(
                self._task,
                self.name,
                doc_ref.doc_id,
                doc_ref.meta["doc"],
                response,
                request.meta.get("gen_kwargs"),
            )
        ]


def _doc_ref(task: Any, doc_id: int, doc: dict) -> DocRef:
    """The doc with its target, and the reference answer the paired log-probability measure scores:
    lm-eval's continuation, target_delimiter + target (for gsm8k " " + the worked answer "... #### 72")."""
    target = task.doc_to_target(doc)
    delimiter = getattr(task.config, "target_delimiter", " ")
    gold = delimiter + target if isinstance(target, str) and target else None
    return DocRef(doc_id=doc_id, target=str(target), meta={"doc": doc}, gold=gold)
