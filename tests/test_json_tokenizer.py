"""The transformers-free tokenizer (`evalkit.json_tokenizer`) against transformers' own
AutoTokenizer (the oracle) on the shipped reference models and the tiny test checkpoint: ids with
and without special tokens, offsets, decoding, special-token ids, the chat template's rendering,
and the fingerprint a run records; and the configurations it must leave to transformers."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.json_tokenizer import JsonTokenizer
from evalkit.model.checkpoint import load_tokenizer
from evalkit.tasks.tokenizer import TokenizerView

transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
MODELS = [ROOT / "models" / name for name in ("reference-model-v1", "reference-model-gdn")]
GSM8K = ROOT / "evalkit" / "assets" / "gsm8k"


def _gsm8k_texts(n: int = 40) -> list[str]:
    """GSM8K questions and answers as a few-shot prompt writes them, plus the raw answers."""
    rows = [json.loads(line) for line in (GSM8K / "test.jsonl").read_text().splitlines()[:n]]
    shots = "".join(f"Question: {r['question']}\nAnswer: {r['answer']}\n\n" for r in rows[:5])
    return [shots + f"Question: {r['question']}\nAnswer:" for r in rows] + [r["answer"] for r in rows]


def _odd_texts(hf) -> list[str]:
    """Edge cases: empty, whitespace runs, special tokens inside text, unicode, random vocab soup."""
    rng = random.Random(0)
    soup = [hf.decode([rng.randrange(len(hf)) for _ in range(rng.randrange(1, 60))]) for _ in range(30)]
    return ["", " ", "\n\n\t  x", "<s>hi</s><|im_start|>user\n<|im_end|>", "naïve café 数学 🙂 \u00a0", *soup]


@pytest.fixture(scope="module", params=[*MODELS, "tiny_hybrid_ckpt"], ids=lambda p: getattr(p, "name", p))
def pair(request):
    """(ours, transformers') on each shipped reference model and the tiny test checkpoint."""
    path = request.param if isinstance(request.param, Path) else request.getfixturevalue(request.param)
    ours = load_tokenizer(path)
    assert isinstance(ours, JsonTokenizer), "the shipped models' tokenizers must take the light path"
    return ours, transformers.AutoTokenizer.from_pretrained(str(path))


def test_same_ids_and_offsets(pair):
    ours, hf = pair
    texts = _gsm8k_texts() + _odd_texts(hf)
    for special in (True, False):
        for text in texts:
            kw = {"add_special_tokens": special}
            assert ours.encode(text, **kw) == hf.encode(text, **kw)
            mine = ours(text, add_special_tokens=special, return_offsets_mapping=True)
            theirs = hf(text, add_special_tokens=special, return_offsets_mapping=True)
            assert mine["input_ids"] == theirs["input_ids"]
            assert [tuple(o) for o in mine["offset_mapping"]] == [tuple(o) for o in theirs["offset_mapping"]]
        batch = ours(texts, add_special_tokens=special)["input_ids"]
        assert batch == hf(texts, add_special_tokens=special)["input_ids"]


def test_same_decoding(pair):
    ours, hf = pair
    rng = random.Random(1)
    seqs = [hf.encode(t) for t in _gsm8k_texts(10)]
    seqs += [[rng.randrange(len(hf)) for _ in range(rng.randrange(0, 80))] for _ in range(50)]
    seqs += [[0, 1, 2, 3, 4, 1, 2], [2]]  # special tokens alone and in runs
    for ids in seqs:
        for skip in (True, False):
            assert ours.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)
    assert ours.convert_ids_to_tokens(seqs[0]) == hf.convert_ids_to_tokens(seqs[0])
    tokens = hf.convert_ids_to_tokens(seqs[0])
    assert ours.convert_tokens_to_ids(tokens) == hf.convert_tokens_to_ids(tokens)


def test_same_special_tokens_vocab_and_fingerprint(pair):
    ours, hf = pair
    for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
        assert getattr(ours, key) == getattr(hf, key), key
        assert getattr(ours, f"{key}_id") == getattr(hf, f"{key}_id"), key
    assert len(ours) == len(hf)
    assert ours.get_vocab() == hf.get_vocab()
    assert ours.chat_template == hf.chat_template
    assert TokenizerView(ours).fingerprint() == TokenizerView(hf).fingerprint()


def test_same_chat_rendering(pair):
    ours, hf = pair
    q = json.loads((GSM8K / "test.jsonl").read_text().splitlines()[0])
    chats = [
        [{"role": "user", "content": q["question"]}],
        [{"role": "user", "content": q["question"]}, {"role": "assistant", "content": q["answer"]}],
    ]
    for messages in chats:
        for gen in (True, False):
            kw = {"tokenize": False, "add_generation_prompt": gen, "continue_final_message": not gen}
            if not gen and messages[-1]["role"] != "assistant":
                continue
            text = ours.apply_chat_template(messages, **kw)
            assert text == hf.apply_chat_template(messages, **kw)
            assert ours.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False)


def _copy_tokenizer(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(src / name, dst / name)
    return dst


CHANGES = ["add_bos_token", "clean_up_tokenization_spaces", "auto_map", "added_tokens_decoder"]


@pytest.mark.parametrize("change", [*CHANGES, "code", "class", "dict"])
def test_left_to_transformers(tmp_path, change):
    """Any setting whose effect is transformers' own sends the folder back to AutoTokenizer."""
    folder = _copy_tokenizer(MODELS[0], tmp_path / "tok")
    assert JsonTokenizer.from_folder(folder) is not None  # the unchanged copy takes the light path
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    if change == "code":
        (folder / "tokenization_mine.py").write_text("")
    elif change == "class":
        cfg["tokenizer_class"] = "LlamaTokenizer"
    elif change == "dict":
        cfg["eos_token"] = {"content": "</s>", "lstrip": True}
    else:
        cfg[change] = True
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    assert JsonTokenizer.from_folder(folder) is None


def test_unknown_special_token_and_env_switch(tmp_path, monkeypatch):
    folder = _copy_tokenizer(MODELS[0], tmp_path / "tok")
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**cfg, "extra_special_tokens": ["<new>"]}))
    assert JsonTokenizer.from_folder(folder) is None  # transformers would add <new> to the vocabulary
    monkeypatch.setenv("EVALKIT_TOKENIZER", "transformers")
    assert not isinstance(load_tokenizer(MODELS[0]), JsonTokenizer)


def test_broken_tokenizer_json_is_one_line_error(tmp_path):
    from evalkit.errors import InputError

    folder = _copy_tokenizer(MODELS[0], tmp_path / "tok")
    (folder / "tokenizer.json").write_text("{not json")
    with pytest.raises(InputError, match="cannot load the tokenizer"):
        load_tokenizer(folder)


def test_no_transformers_import():
    """The point of the class: loading a plain tokenizer, for the engine or for a --server run's
    --tokenizer folder, leaves transformers unimported (a fresh process, so nothing else did)."""
    code = (
        "import sys; from pathlib import Path\n"
        "from evalkit.model.checkpoint import load_tokenizer\n"
        "from evalkit.runner.setup import load_tokenizer as server_tokenizer\n"
        f"a = load_tokenizer(Path({str(MODELS[0])!r})); b = server_tokenizer({str(MODELS[1])!r})\n"
        "print(type(a).__name__, type(b).__name__, 'transformers' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "EVALKIT_TOKENIZER"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["JsonTokenizer", "JsonTokenizer", "False"]


def test_server_tokenizer_keeps_the_name_as_given():
    """A --server run's --tokenizer folder is recorded as the user wrote it, as AutoTokenizer did."""
    from evalkit.runner.setup import load_tokenizer as server_tokenizer

    given = str(MODELS[0]) + "/"
    ours = server_tokenizer(given)
    assert isinstance(ours, JsonTokenizer)
    hf = transformers.AutoTokenizer.from_pretrained(given)
    assert TokenizerView(ours).fingerprint() == TokenizerView(hf).fingerprint()
