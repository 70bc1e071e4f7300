"""The probe's prompts: GSM8K test questions behind one shared few-shot prefix (the shipped copy,
no lm-eval needed), so the prefix a warm request finds cached is the one evaluations share."""

from __future__ import annotations

from evalkit.tasks.data import load_rows


def _shot(row: dict[str, str]) -> str:
    return f"Question: {row['question']}\nAnswer: {row['answer']}\n\n"


def gsm8k_prompts(n: int, shots: int) -> list[str]:
    prefix = "".join(_shot(r) for r in load_rows("train")[:shots])
    return [f"{prefix}Question: {r['question']}\nAnswer:" for r in load_rows("test")[:n]]
