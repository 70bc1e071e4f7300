"""Long-context docs built in worker processes and cached on disk equal the serial, fresh build;
a changed task config, seed or tokenizer misses the cache."""

from __future__ import annotations

import pytest

from evalkit.tasks.data import BUNDLED_DIR
from evalkit.tasks.long_context import prompt_cache
from evalkit.tasks.registry import get_task

DATA = str(BUNDLED_DIR)
LENGTHS = [300, 700]


@pytest.fixture(scope="module")
def tok():
    from evalkit.tasks.tiny_tokenizer import tiny_tokenizer

    return tiny_tokenizer(data_dir=DATA)


def _build(tok, name="niah_single_1", seed=None, chat=False, **options):
    task = get_task(name, **options)
    return task.requests(
        tokenizer=tok, lengths=LENGTHS, limit=3, seed=seed, data_dir=DATA, apply_chat_template=chat
    )


def _files(root):
    return sorted(p.relative_to(root) for p in root.rglob("*.json"))


@pytest.mark.parametrize("name", ["niah_single_1", "kv_retrieval"])
def test_cached_and_parallel_equal_fresh(tok, tmp_path, monkeypatch, name):
    fresh = _build(tok, name)
    monkeypatch.setenv("EVALKIT_PROMPT_CACHE", str(tmp_path))
    monkeypatch.setenv("EVALKIT_PROMPT_WORKERS", "2")
    cold = _build(tok, name)  # built by two worker processes, then written
    assert len(_files(tmp_path)) == 6
    monkeypatch.setenv("EVALKIT_PROMPT_WORKERS", "1")
    warm = _build(tok, name)  # read back
    assert fresh == cold == warm
    assert [r.length for r in warm] == [300] * 3 + [700] * 3  # the serial order
    assert len({r.prompt for r in warm}) == 6


def test_reads_come_from_the_cache(tok, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_PROMPT_CACHE", str(tmp_path))
    first = _build(tok)
    (path,) = [p for p in tmp_path.rglob("300-0.json")]
    path.write_text(path.read_text().replace(first[0].prompt[:20].replace('"', '\\"'), "CACHED PROMPT", 1))
    again = _build(tok)
    assert again[0].prompt.startswith("CACHED PROMPT") and again[1:] == first[1:]


def test_changed_config_seed_tokenizer_or_chat_miss(tok, tmp_path, monkeypatch):
    from evalkit.tasks.tiny_tokenizer import tiny_tokenizer

    monkeypatch.setenv("EVALKIT_PROMPT_CACHE", str(tmp_path))
    _build(tok)
    n = len(_files(tmp_path))
    _build(tok)
    assert len(_files(tmp_path)) == n  # same key: nothing new
    _build(tok, max_new_tokens=7)  # a task option changes the config hash
    assert len(_files(tmp_path)) == 2 * n
    _build(tok, seed=5)
    assert len(_files(tmp_path)) == 3 * n
    _build(tiny_tokenizer(vocab_size=600, data_dir=DATA))  # another tokenizer
    assert len(_files(tmp_path)) == 4 * n
    assert len({p.parent for p in tmp_path.rglob("*.json")}) == 4


def test_cache_off(tok, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_PROMPT_CACHE", "off")
    assert prompt_cache.cache_root() is None
    monkeypatch.delenv("EVALKIT_PROMPT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert prompt_cache.cache_root() == tmp_path / "evalkit" / "prompts"
