"""The results store: a run is a directory with manifest.json, samples.jsonl and summary.json.

Producers write through `RunWriter` (durable per sample, resumable after SIGKILL); consumers
read with `load_run`, which also accepts lm-eval `--log_samples` files.
"""

from evalkit.store.hashing import canonical_json, config_hash, prompt_hash
from evalkit.store.manifest import base_manifest, first_identity_difference, identity_fields
from evalkit.store.reader import RunData, load_finished_run, load_run
from evalkit.store.schema import OPTIONAL_FIELDS, REQUIRED_FIELDS, SampleError, normalise_sample, sample_key
from evalkit.store.summary import summarise
from evalkit.store.writer import MANIFEST, SAMPLES, SUMMARY, RunWriter

__all__ = [
    "MANIFEST",
    "OPTIONAL_FIELDS",
    "REQUIRED_FIELDS",
    "SAMPLES",
    "SUMMARY",
    "RunData",
    "RunWriter",
    "SampleError",
    "base_manifest",
    "canonical_json",
    "config_hash",
    "first_identity_difference",
    "identity_fields",
    "load_finished_run",
    "load_run",
    "normalise_sample",
    "prompt_hash",
    "sample_key",
    "summarise",
]
