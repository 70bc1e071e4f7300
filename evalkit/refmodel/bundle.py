"""One file that carries a run (the device returns few files), and installing a finished run
into the package and the results folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

MAX_ASSET_BYTES = 25 * 1024 * 1024  # the package's limit for the shipped checkpoint

INSTALL_RESULT_FILES = (
    "recipe.json",
    "loss_curve.csv",
    "loss_curve.png",
    "quick_eval.json",
    "MODEL_CARD.md",
    "train.log",
)


def write_bundle(out: Path, bundle: Path | None) -> None:
    """Pack out/model/* and the records into the --bundle file (atomically replaced); nothing
    without one."""
    if bundle is None:
        return
    import tarfile

    tmp = bundle.with_name(bundle.name + ".tmp")
    with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
        for f in sorted((out / "model").glob("*")):
            if f.is_file():
                tar.add(f, arcname=f"model/{f.name}")
        for name in INSTALL_RESULT_FILES:
            if (out / name).is_file():
                tar.add(out / name, arcname=name)
    tmp.replace(bundle)


def unpack_bundle(bundle: Path, dest: Path) -> Path:
    """Extract a --bundle file (plain files only, no paths outside `dest`)."""
    import tarfile

    with tarfile.open(bundle) as tar:
        for m in tar.getmembers():
            parts = Path(m.name).parts
            if not m.isfile() or Path(m.name).is_absolute() or ".." in parts or len(parts) > 2:
                raise SystemExit(f"{bundle}: unexpected member {m.name!r}")
            target = dest.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(m).read())
    return dest


def install(src: Path, assets: Path, results: Path) -> None:
    """Copy a finished run (its --out folder or --bundle file) into the package (model) and the
    results folder (card, recipe, loss curve, quick eval, log)."""
    if src.is_file():
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            _install_dir(unpack_bundle(src, Path(tmp)), assets, results, shown=src)
        return
    _install_dir(src, assets, results, shown=src)


def _install_dir(src: Path, assets: Path, results: Path, shown: Path) -> None:
    model_dir = src / "model" if (src / "model" / "config.json").is_file() else src
    if not (model_dir / "config.json").is_file() or not (model_dir / "model.safetensors").is_file():
        raise SystemExit(
            f"{shown} holds no finished checkpoint (expected model/config.json and model.safetensors)"
        )
    cfg = json.loads((model_dir / "config.json").read_text())
    from evalkit.refmodel.architecture import MODEL_TYPES

    if cfg.get("model_type") not in MODEL_TYPES.values():
        raise SystemExit(
            f"{model_dir}/config.json is a {cfg.get('model_type')!r} checkpoint, not one of "
            f"{sorted(MODEL_TYPES.values())}"
        )
    size = (model_dir / "model.safetensors").stat().st_size
    if size > MAX_ASSET_BYTES:
        raise SystemExit(
            f"model.safetensors is {size / 2**20:.1f} MiB, over the 25 MiB limit for the package"
        )
    assets.mkdir(parents=True, exist_ok=True)
    results.mkdir(parents=True, exist_ok=True)
    for old in assets.iterdir():
        if old.is_file():
            old.unlink()
    for f in model_dir.iterdir():
        if f.is_file():
            shutil.copy2(f, assets / f.name)
    for name in INSTALL_RESULT_FILES:
        if (src / name).is_file():
            shutil.copy2(src / name, results / name)
    readme = results / "README.md"
    if readme.is_file() and (src / "recipe.json").is_file():
        import re

        recipe = json.loads((src / "recipe.json").read_text())
        env = recipe.get("environment", {})
        status = (
            f"Status: installed from `{shown}`: {recipe.get('steps')} steps, "
            f"{recipe.get('tokens', 0) / 1e6:.0f}M tokens in {recipe.get('train_seconds')} s on "
            f"{env.get('gpu') or env.get('device')} (run status: {recipe.get('status')}); "
            "numbers in `MODEL_CARD.md`."
        )
        text = re.sub(r"^Status:.*?(?=\n\n|\Z)", lambda _: status, readme.read_text(), flags=re.S | re.M)
        readme.write_text(text)
    print(f"installed {shown} -> {assets} ({size / 2**20:.1f} MiB); records -> {results}")
