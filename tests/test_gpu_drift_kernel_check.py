"""gpu_drift's run-time kernel check also runs at the reference model's own SSD head dims (its build
is another compiled kernel than Nemotron-H's), read from the checkpoint's config."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ssd_dims_are_the_mamba2_checkpoints_and_none_elsewhere(tmp_path):
    from helpers.scripts import load_script

    drift = load_script("gpu_drift")
    m2 = REPO / "models" / "reference-model-mamba2"
    raw = json.loads((m2 / "config.json").read_text())
    want = {
        "H": raw["mamba_num_heads"],
        "G": raw["n_groups"],
        "P": raw["mamba_head_dim"],
        "N": raw["ssm_state_size"],
    }
    assert drift.ssd_dims(str(m2)) == want == {"H": 4, "G": 4, "P": 64, "N": 64}
    assert drift.ssd_dims(str(REPO / "evalkit" / "assets" / "reference-model")) is None  # KDA
    assert drift.ssd_dims(None) is None and drift.ssd_dims(str(tmp_path)) is None
