"""The results store: a run is a directory with manifest.json, samples.jsonl and summary.json
(a finished run kept compressed has samples.jsonl.gz instead, read-only: `samples_file`).

Producers write through `RunWriter` (durable per sample, resumable after SIGKILL); consumers
read with `load_run`, which also accepts lm-eval `--log_samples` files.
"""

from evalkit.store.hashing import canonical_json, config_hash, prompt_hash
from evalkit.store.manifest import base_manifest, first_identity_difference, identity_fields
from evalkit.store.reader import RunData, load_finished_run, load_run
from evalkit.store.samples_file import SAMPLES, SAMPLES_GZ, compress_samples, has_samples, samples_path
from evalkit.store.schema import OPTIONAL_FIELDS, REQUIRED_FIELDS, SampleError, normalise_sample, sample_key
from evalkit.store.summary import summarise
from evalkit.store.writer import MANIFEST, SUMMARY, RunWriter

__all__ = [
    "MANIFEST",
    "OPTIONAL_FIELDS",
    "REQUIRED_FIELDS",
    "SAMPLES",
    "SAMPLES_GZ",
    "SUMMARY",
    "RunData",
    "RunWriter",
    "SampleError",
    "base_manifest",
    "canonical_json",
    "compress_samples",
    "config_hash",
    "first_identity_difference",
    "has_samples",
    "identity_fields",
    "load_finished_run",
    "load_run",
    "normalise_sample",
    "prompt_hash",
    "sample_key",
    "samples_path",
    "summarise",
]
