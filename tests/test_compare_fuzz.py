"""issue 16: random and mutated samples.jsonl / manifest / lm-eval files make `evalkit compare` exit 0,
1 or 2, and exit 2 with exactly one line on stderr, never a traceback (property-based, hypothesis).

Examples are derandomized so that CI sees the same cases on every run.
"""

import contextlib
import copy
import io
import json
import math
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from evalkit.cli import main
from tests.helpers.runs import write_cells

SETTINGS = settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
N = 6

json_values = hs.recursive(
    hs.none()
    | hs.booleans()
    | hs.integers(min_value=-(2**70), max_value=2**70)
    | hs.floats(allow_nan=True, allow_infinity=True)
    | hs.text(max_size=6),
    lambda inner: hs.lists(inner, max_size=3) | hs.dictionaries(hs.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
special = hs.sampled_from(
    [math.nan, math.inf, -math.inf, "--1", "²", "٣", "-", "", " 1", "1e3", 1.5, -0.0, 10**30, [], {}, True]
)
values = special | json_values  # the named edge cases first: hypothesis favours the first branch
SAMPLE_FIELDS = ["task", "doc_id", "length", "prompt_hash", "target", "response", "correct", "error", "score"]
MANIFEST_FIELDS = ["tasks", "arm", "backend", "model", "finished_at", "started_at", "seeds"]
LMEVAL_FIELDS = [
    "doc_id",
    "filter",
    "metrics",
    "prompt_hash",
    "target",
    "resps",
    "filtered_resps",
    "exact_match",
]


def _compare(*args) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["compare", *map(str, args), "--format", "json"])
    return rc, err.getvalue()


def _check(rc: int, err: str) -> None:
    assert rc in (0, 1, 2), (rc, err)
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("evalkit compare: error: "), err


_GOLDEN: dict[str, bytes] = {}


def _good_pair(root: Path) -> tuple[Path, Path]:
    """A valid baseline/candidate pair, written once and then copied byte for byte (fast)."""
    if not _GOLDEN:
        with tempfile.TemporaryDirectory() as tmp:
            for side in write_cells(Path(tmp), {("gsm8k", None): (1, 2, N), ("passkey", 4096): (0, 1, N)}):
                for f in ("manifest.json", "samples.jsonl"):
                    _GOLDEN[f"{side.name}/{f}"] = (side / f).read_bytes()
    for name, data in _GOLDEN.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root / "base", root / "cand"


def _lmeval(folder: Path) -> Path:
    folder.mkdir(parents=True)
    path = folder / "samples_gsm8k_2026-01-01T00-00-00.000001.jsonl"
    lines = [
        {
            "doc_id": i,
            "doc": {},
            "target": "1",
            "arguments": {},
            "resps": [["1"]],
            "filtered_resps": ["1"],
            "filter": filt,
            "metrics": ["exact_match"],
            "doc_hash": "x",
            "prompt_hash": f"p{i}",
            "target_hash": "y",
            "exact_match": float(i % 2),
        }
        for filt in ("strict-match", "flexible-extract")
        for i in range(N)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@SETTINGS
@given(line=hs.integers(0, 2 * N - 1), field=hs.sampled_from(SAMPLE_FIELDS), value=values, drop=hs.booleans())
def test_mutated_samples(line, field, value, drop):
    with tempfile.TemporaryDirectory() as tmp:
        base, cand = _good_pair(Path(tmp))
        path = cand / "samples.jsonl"
        rows = path.read_text().splitlines()
        obj = json.loads(rows[line])
        if drop:
            obj.pop(field, None)
        else:
            obj[field] = value
        rows[line] = json.dumps(obj)
        path.write_text("\n".join(rows) + "\n")
        _check(*_compare(base, cand))


@SETTINGS
@given(raw=hs.binary(max_size=60) | hs.text(max_size=60).map(str.encode))
def test_random_bytes_as_a_line(raw):
    with tempfile.TemporaryDirectory() as tmp:
        base, cand = _good_pair(Path(tmp))
        with open(cand / "samples.jsonl", "ab") as fh:
            fh.write(raw + b"\n")
        _check(*_compare(base, cand))


@SETTINGS
@given(field=hs.sampled_from(MANIFEST_FIELDS), value=values, whole=hs.none() | values)
def test_mutated_manifest(field, value, whole):
    with tempfile.TemporaryDirectory() as tmp:
        base, cand = _good_pair(Path(tmp))
        path = cand / "manifest.json"
        manifest = json.loads(path.read_text())
        if whole is not None:
            manifest = whole
        else:
            manifest[field] = value
        path.write_text(json.dumps(manifest))
        _check(*_compare(base, cand))
        if isinstance(manifest, dict) and isinstance(manifest.get("tasks"), dict):
            manifest["tasks"]["gsm8k"] = copy.deepcopy(value)  # `value` may be that very dict
            path.write_text(json.dumps(manifest))
            _check(*_compare(base, cand))


@SETTINGS
@given(line=hs.integers(0, 2 * N - 1), field=hs.sampled_from(LMEVAL_FIELDS), value=values)
def test_mutated_lm_eval_file(line, field, value):
    with tempfile.TemporaryDirectory() as tmp:
        a, b = _lmeval(Path(tmp) / "a"), _lmeval(Path(tmp) / "b")
        rows = b.read_text().splitlines()
        obj = json.loads(rows[line])
        obj[field] = value
        rows[line] = json.dumps(obj)
        b.write_text("\n".join(rows) + "\n")
        _check(*_compare(a, b))


def test_named_cases_from_issue_16(tmp_path):
    """length NaN/Infinity, doc_id "--1" and "²", lm-eval doc_id as an object or a list, a manifest
    field of the wrong type: each one line and exit 2 (or a clean comparison)."""
    base, cand = _good_pair(tmp_path / "runs")
    path = cand / "samples.jsonl"
    good = path.read_text()
    for field, value, expected in [
        ("length", math.nan, "field 'length' must be a positive integer"),
        ("length", math.inf, "field 'length' must be a positive integer"),
        ("doc_id", "--1", ""),
        ("doc_id", "²", ""),
    ]:
        rows = good.splitlines()
        obj = json.loads(rows[0])
        obj[field] = value
        rows[0] = json.dumps(obj)
        path.write_text("\n".join(rows) + "\n")
        rc, err = _compare(base, cand, "--intersection")
        _check(rc, err)
        assert expected in err and (rc == 2) == bool(expected), err
    path.write_text(good)
    manifest = json.loads((cand / "manifest.json").read_text())
    (cand / "manifest.json").write_text(json.dumps({**manifest, "tasks": ["gsm8k"]}))
    rc, err = _compare(base, cand)
    assert rc == 2 and "field 'tasks' must be an object" in err
    a, b = _lmeval(tmp_path / "a"), _lmeval(tmp_path / "b")
    for value in ({"id": 1}, [1]):
        rows = b.read_text().splitlines()
        obj = json.loads(rows[0])
        obj["doc_id"] = value
        b.write_text("\n".join([json.dumps(obj)] + rows[1:]) + "\n")
        rc, err = _compare(a, b)
        assert rc == 2 and "doc_id must be an int or a non-empty string" in err
