"""`python -m evalkit.testing.tiny_models PATH`: how a newcomer makes the README's test checkpoint."""

from __future__ import annotations

import json

from evalkit.testing.tiny_models import main


def test_the_command_writes_a_loadable_checkpoint_of_the_asked_kind(tmp_path, capsys):
    assert main([str(tmp_path / "tiny-kimi"), "--kind", "pure_kda", "--seed", "3"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "tiny-kimi")
    stamp = json.loads((tmp_path / "tiny-kimi" / "evalkit_tiny.json").read_text())
    assert (stamp["kind"], stamp["seed"]) == ("pure_kda", 3)
    config = json.loads((tmp_path / "tiny-kimi" / "config.json").read_text())
    assert config["model_type"] == "kimi_linear"
    assert {"model.safetensors", "tokenizer.json"} <= {p.name for p in (tmp_path / "tiny-kimi").iterdir()}
