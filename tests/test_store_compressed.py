"""A finished run kept compressed (samples.jsonl.gz, evalkit.store.samples_file): read
transparently, byte-identical once decompressed, deterministic, and read-only (resume refused)."""

import gzip
import json
import subprocess
import sys

import pytest
from test_store import manifest, sample

from evalkit.errors import InputError
from evalkit.store import SAMPLES, SAMPLES_GZ, RunWriter, compress_samples, load_run


def _run(path, n=12):
    with RunWriter.open(path, manifest()) as w:
        for doc in range(n):
            w.append(sample(doc, right=doc % 3 != 0, extracted=f"x{doc}"))
        w.finish()
    return path


def test_a_compressed_run_reads_as_the_plain_one(tmp_path):
    plain = load_run(_run(tmp_path / "a"))
    original = (tmp_path / "a" / SAMPLES).read_bytes()
    packed = compress_samples(tmp_path / "a")
    assert packed.name == SAMPLES_GZ and not (tmp_path / "a" / SAMPLES).exists()
    assert gzip.decompress(packed.read_bytes()) == original
    for where in (tmp_path / "a", packed):
        run = load_run(where)
        assert run.samples == plain.samples and run.manifest == plain.manifest
        assert run.origins[("gsm8k", "3", None)] == f"{packed}:4"


def test_compression_is_deterministic(tmp_path):
    _run(tmp_path / "a")
    _run(tmp_path / "b")
    (tmp_path / "b" / SAMPLES).write_bytes((tmp_path / "a" / SAMPLES).read_bytes())
    assert compress_samples(tmp_path / "a").read_bytes() == compress_samples(tmp_path / "b").read_bytes()


def test_resuming_a_compressed_run_is_refused_and_leaves_it_as_it_was(tmp_path):
    _run(tmp_path / "a")
    packed = compress_samples(tmp_path / "a")
    before = packed.read_bytes(), (tmp_path / "a" / "manifest.json").read_bytes()
    with pytest.raises(InputError, match=r"compressed run \(samples.jsonl.gz\), which is read-only"):
        RunWriter.open(tmp_path / "a", manifest())
    assert not (tmp_path / "a" / SAMPLES).exists()
    assert (packed.read_bytes(), (tmp_path / "a" / "manifest.json").read_bytes()) == before


def test_both_files_or_a_cut_stream_is_a_one_line_error(tmp_path):
    _run(tmp_path / "a")
    packed = compress_samples(tmp_path / "a")
    (tmp_path / "a" / SAMPLES).write_text(json.dumps(sample(0)) + "\n")
    with pytest.raises(InputError, match="both samples.jsonl and samples.jsonl.gz"):
        load_run(tmp_path / "a")
    (tmp_path / "a" / SAMPLES).unlink()
    packed.write_bytes(packed.read_bytes()[:-20])
    with pytest.raises(InputError, match="compressed data ends early"):
        load_run(tmp_path / "a")


def test_compare_cli_on_compressed_runs_writes_the_same_json(tmp_path):
    for name in ("base", "cand"):
        _run(tmp_path / name)
    (tmp_path / "cand" / SAMPLES).write_text(
        "".join(json.dumps(sample(d, right=d % 4 != 1, extracted=f"x{d}")) + "\n" for d in range(12))
    )

    def compare(out):
        cmd = [sys.executable, "-m", "evalkit", "compare", str(tmp_path / "base"), str(tmp_path / "cand")]
        done = subprocess.run([*cmd, "--json", str(out)], capture_output=True, text=True)
        assert done.returncode in (0, 1), done.stderr
        return out.read_bytes()

    before = compare(tmp_path / "before.json")
    for name in ("base", "cand"):
        compress_samples(tmp_path / name)
    after = compare(tmp_path / "after.json")
    assert after == before and b"acc_candidate" in after
