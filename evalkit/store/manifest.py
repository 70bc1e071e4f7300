"""What a run is: the manifest's provenance fields, and the fields that define its identity.

Two runs with equal identity fields answer the same questions the same way (same model, arm,
kernel choice, device, task configs, seeds, lengths), so one may resume the other. The code that
ran (`source_hash`, the library versions) is identity too, but a user may declare a change of it
(`--allow-source-change`: an upgrade mid-run), which the resume records. Provenance (times,
hardware, command line) may differ.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import evalkit
from evalkit.errors import InputError

LIBRARIES = (
    "torch",
    "triton",
    "transformers",
    "lm_eval",
    "fla-core",
    "vllm",
    "numpy",
    "scipy",
    "statsmodels",
    "openai",
    "tokenizers",
    "safetensors",
)
_DIST_NAMES = {"lm_eval": "lm-eval"}
_MISSING = object()


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _git(*args: str) -> str | None:
    root = Path(evalkit.__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpu_names() -> list[str] | None:
    """GPU names if torch is already imported by the producer (never imports torch itself)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - a broken driver must not stop a run from starting
        return None
    return None


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries that can change results, read from metadata (no imports)."""
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = importlib.metadata.version(_DIST_NAMES.get(name, name))
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


# the packages whose sources make up evalkit (setup.py maps kernels/ and tasks/ into the package)
SOURCE_PACKAGES = ("evalkit", "evalkit.kernels", "evalkit.tasks")


@functools.cache
def source_hash() -> str:
    """sha256 over the .py files of the evalkit that runs (`SOURCE_PACKAGES`), each as its dotted
    package's relative path + bytes, sorted by that path: which code ran, valid without git (an
    installed wheel, a copied checkout). Computed once per process."""
    files: dict[str, Path] = {}
    for pkg in SOURCE_PACKAGES:
        spec = importlib.util.find_spec(pkg)
        for root in (spec.submodule_search_locations or []) if spec else []:
            base = Path(root)
            for f in base.rglob("*.py"):
                files.setdefault(f"{pkg.replace('.', '/')}/{f.relative_to(base).as_posix()}", f)
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0")
        h.update(files[rel].read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def base_manifest(command: list[str]) -> dict[str, Any]:
    """Provenance every run records: version, source hash, commit, command line, hardware,
    libraries, start time."""
    commit = _git("rev-parse", "HEAD")
    dirty = None if commit is None else bool(_git("status", "--porcelain", "--untracked-files=no"))
    return {
        "evalkit_version": evalkit.__version__,
        "source_hash": source_hash(),
        "git_commit": commit,
        "git_dirty": dirty,
        "command": list(command),
        "hardware": {
            "cpu": _cpu_name(),
            "cpu_count": os.cpu_count(),
            "gpu": _gpu_names(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "libraries": library_versions(),
        "started_at": now_utc(),
        "finished_at": None,
    }


def _get(manifest: dict[str, Any], dotted: str) -> Any:
    cur: Any = manifest
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


# recorded since a later version (or only by some backends): a run directory written before it
# still resumes, but two values that differ are refused like any other identity field
_CHECKED_WHEN_BOTH_HAVE_IT = (
    "model.weights_fingerprint",
    "backend.device",
    "source_hash",
    "plan.content_hash",
)
_CHECKED_WHEN_BOTH_HAVE_IT_PREFIXES = ("libraries.", "kernels.")
_CHECKED_WHEN_BOTH_HAVE_IT_SUFFIXES = (".data.sha256",)  # tasks.<name>.data.sha256: the data read
# the code that ran: refused like the rest unless the user declares the change (--allow-source-change)
CODE_FIELDS = ("source_hash",)
CODE_FIELD_PREFIXES = ("libraries.",)
ALLOW_SOURCE_CHANGE = "--allow-source-change"


def is_code_field(name: str) -> bool:
    return name in CODE_FIELDS or name.startswith(CODE_FIELD_PREFIXES)


# the types a manifest's fields must have for a resume to read it (None: the field may be null)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "model": (dict,),
    "arm": (dict,),
    "backend": (dict,),
    "tasks": (dict,),
    "seeds": (dict, type(None)),
    "lengths": (list, type(None)),
    "resumes": (list,),
    "command": (list, str, type(None)),
}


def check_manifest_types(manifest: dict[str, Any], where: str) -> None:
    """InputError naming the first field of a (hand-edited or foreign) manifest with the wrong type."""
    for name, types in _FIELD_TYPES.items():
        if name in manifest and not isinstance(manifest[name], types):
            want = " or ".join(
                "null" if t is type(None) else {dict: "an object"}.get(t, t.__name__) for t in types
            )
            raise InputError(f"{where}: field {name!r} must be {want}, got {type(manifest[name]).__name__}")
    for task, spec in (manifest.get("tasks") or {}).items():
        if not isinstance(spec, dict):
            raise InputError(f"{where}: tasks.{task} must be an object, got {type(spec).__name__}")
    lengths = manifest.get("lengths") or []
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in lengths):
        raise InputError(f"{where}: field 'lengths' must list integers, got {lengths!r}")


def identity_fields(manifest: dict[str, Any]) -> dict[str, Any]:
    """The fields that define what a run measures, flattened to dotted names."""
    out: dict[str, Any] = {}
    for name in ("model.path", "model.config_hash", "backend.name", "seeds", "lengths"):
        out[name] = _get(manifest, name)
    out["model.weights_fingerprint"] = _get(manifest, "model.weights_fingerprint")
    out["backend.device"] = _get(manifest, "backend.device")
    kernels = manifest.get("kernels")
    if isinstance(kernels, dict):
        for key in sorted(kernels, key=lambda k: (k == "label", k)):
            out[f"kernels.{key}"] = kernels[key]
    # a sampled run's temperature, truncation, samples per question and seed (absent: greedy);
    # its `coupling` follows from the backend and is not identity
    sampling = manifest.get("sampling")
    if isinstance(sampling, dict):
        for key in sorted(sampling):
            if key != "coupling":
                out[f"sampling.{key}"] = sampling[key]
    else:
        out["sampling"] = _MISSING if sampling is None else sampling
    # the pre-registered plan a run was started under (`run --plan`): a resume under an edited plan is refused
    out["plan.content_hash"] = _get(manifest, "plan.content_hash")
    arm = manifest.get("arm") or {}
    if isinstance(arm, dict):
        # the label last: it is derived from the others, which name a difference better
        for key in sorted(arm, key=lambda k: (k == "label", k)):
            if key != "note":
                out[f"arm.{key}"] = arm[key]
    else:
        out["arm"] = arm
    tasks = manifest.get("tasks") or {}
    out["tasks"] = sorted(tasks) if isinstance(tasks, dict) else tasks
    if isinstance(tasks, dict):
        for name in sorted(tasks):
            spec = tasks[name] if isinstance(tasks[name], dict) else {}
            out[f"tasks.{name}.hash"] = spec.get("hash", _MISSING)
            out[f"tasks.{name}.lengths"] = spec.get("lengths", _MISSING)
            data = spec.get("data")
            out[f"tasks.{name}.data.sha256"] = (
                data.get("sha256", _MISSING) if isinstance(data, dict) else _MISSING
            )
    if manifest.get("kind") == "drift":
        out.update(_drift_identity(manifest))
    out["source_hash"] = _get(manifest, "source_hash")
    libraries = manifest.get("libraries")
    if isinstance(libraries, dict):
        for name in sorted(libraries):
            out[f"libraries.{name}"] = libraries[name]
    return out


# what a resumed drift study may change: its title and how many prompts it takes
_DRIFT_FREE = ("drift.title", "drift.input.n_prompts")


def _drift_identity(manifest: dict[str, Any]) -> dict[str, Any]:
    """A drift study's identity beyond a run's: its configuration (`drift.*`: arms, modes, chunk,
    ...) and the model's whole description (`model.*`: weights dtype, device, decode implementation
    and tile layout set its arithmetic); `kernels.*` is checked as for a run."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for key in sorted(value):
                walk(f"{prefix}.{key}", value[key])
        elif prefix not in _DRIFT_FREE:
            out[prefix] = value

    for section in ("model", "drift"):
        for key, value in sorted((manifest.get(section) or {}).items()):
            if (section, key) != ("model", "kernels"):
                walk(f"{section}.{key}", value)
    return out


def identity_differences(on_disk: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field, on-disk value, new value) of every identity field that differs, in field order."""
    a, b = identity_fields(on_disk), identity_fields(new)
    out = []
    for name in list(a) + [k for k in b if k not in a]:
        va, vb = a.get(name, _MISSING), b.get(name, _MISSING)
        optional = (
            name in _CHECKED_WHEN_BOTH_HAVE_IT
            or name.startswith(_CHECKED_WHEN_BOTH_HAVE_IT_PREFIXES)
            or name.endswith(_CHECKED_WHEN_BOTH_HAVE_IT_SUFFIXES)
        )
        if optional and (va is _MISSING or vb is _MISSING):
            continue
        if va != vb:
            show = lambda v: "absent" if v is _MISSING else repr(v)
            out.append((name, show(va), show(vb)))
    return out


def first_identity_difference(
    on_disk: dict[str, Any], new: dict[str, Any], allow_source_change: bool = False
) -> tuple[str, Any, Any] | None:
    """(field, on-disk value, new value) of the first identity field that differs, or None; with
    `allow_source_change` a change of the code that ran (`is_code_field`) is not one."""
    for diff in identity_differences(on_disk, new):
        if not (allow_source_change and is_code_field(diff[0])):
            return diff
    return None
