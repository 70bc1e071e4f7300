"""evalkit's tasks (installed as `evalkit.tasks`): what is asked and how it is scored."""

from pathlib import Path


def lm_eval_dir() -> Path:
    """The folder to pass to `lm_eval --include_path` for evalkit's long-context tasks."""
    return Path(__file__).with_name("lm_eval")
