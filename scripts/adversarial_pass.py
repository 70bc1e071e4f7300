"""Issue 43's adversarial pass: every command, its files and `evalkit serve` probed with malformed,
hostile and interrupted input; each probe passes when the command answers without a traceback,
without hanging, with a known exit status, and with no planted secret in anything it printed or
wrote.

    python scripts/adversarial_pass.py --json results/adversarial-pass/probes.json

Probes run one at a time (the CPU is shared); the tiny checkpoint and two small runs are made once
in --work. A probe's `expect` is the set of exit statuses it may end with (2: bad input refused on
one line; 0: accepted; 130/143/-9: interrupted on purpose).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = str(Path(sys.executable))
SECRET = "sk-ADVERSARIAL-7f3c9e"  # planted everywhere a key can arrive; must never come back
SECRET2 = "hunter2-ADV-pw"
DEEP = "[" * 50_000 + "]" * 50_000
MEMORY_LIMIT = 6 << 30  # address space per probe: a probe reading /dev/zero fails alone, not the machine


def _limit_memory() -> None:
    """In each probe's child before exec: cap its memory, and give it SIGINT's default action as a
    terminal's foreground job has (this script run as a background job of a shell without job
    control has SIGINT ignored, which exec keeps: the SIGINT probes would time out as hangs)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Outcome:
    name: str
    kind: str
    ok: bool
    rc: int | None
    seconds: float
    problems: list[str] = field(default_factory=list)
    tail: str = ""


@dataclass
class Probe:
    name: str
    kind: str
    argv: list[str] | None = None  # evalkit arguments
    expect: tuple[int, ...] = (2,)
    setup: Callable[[Path], None] | None = None
    env: dict[str, str] | None = None
    timeout: float = 60.0
    check: Callable[[Path, str], list[str]] | None = None  # extra problems from (work, output)
    stdin: bytes | None = None


def evalkit(args: list[str], work: Path, env=None, timeout=60.0, stdin=None) -> tuple[int | None, str, float]:
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.pop("OPENAI_API_KEY", None) if not env or "OPENAI_API_KEY" not in env else None
    t0 = time.time()
    try:
        p = subprocess.run(
            [PY, "-m", "evalkit", *args],
            cwd=work,
            env=full_env,
            input=stdin,
            capture_output=True,
            timeout=timeout,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            preexec_fn=_limit_memory,
        )
        out = p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace")
        return p.returncode, out, time.time() - t0
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode("utf-8", "replace") + (exc.stderr or b"").decode("utf-8", "replace")
        return None, out, time.time() - t0


def secret_hits(work: Path, text: str, skip: set[Path] = frozenset()) -> list[str]:
    hits = [f"secret in output: {s}" for s in (SECRET, SECRET2) if s in text]
    for p in work.rglob("*"):
        if p.is_symlink() or not p.is_file() or p in skip or p.name.startswith("secret-input"):
            continue
        if p.stat().st_size > 50_000_000:
            continue
        data = p.read_bytes()
        for s in (SECRET, SECRET2):
            if s.encode() in data:
                hits.append(f"secret in {p.relative_to(work)}")
    return hits


def judge(probe: Probe, work: Path, rc, out: str, seconds: float) -> Outcome:
    problems = []
    if rc is None:
        problems.append(f"hang: no exit within {probe.timeout:.0f} s")
    elif rc not in probe.expect:
        problems.append(f"exit {rc}, expected {probe.expect}")
    if "Traceback (most recent call last)" in out:
        problems.append("traceback")
    if rc == 2 and out.strip():
        last = out.strip().splitlines()[-1]
        if ": error: " not in last:
            problems.append("exit 2 without an `evalkit X: error:` line")
    problems += secret_hits(work, out)
    if probe.check is not None:
        problems += probe.check(work, out)
    return Outcome(probe.name, probe.kind, not problems, rc, round(seconds, 2), problems, out[-600:])


# ---------------------------------------------------------------- fixtures
def fixtures(work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "tiny").exists():
        subprocess.run(
            [PY, "-m", "evalkit.testing.tiny_models", str(work / "tiny"), "--kind", "pure_kda"], check=True
        )
    data = str(ROOT / "evalkit/assets/gsm8k")
    from evalkit.store.manifest import source_hash

    for arm in ("fp32", "fp16"):
        manifest = work / f"base-{arm}" / "manifest.json"
        if manifest.exists() and json.loads(manifest.read_text()).get("source_hash") != source_hash():
            import shutil

            shutil.rmtree(work / f"base-{arm}")
        if not (work / f"base-{arm}" / "summary.json").exists():
            rc, out, _ = evalkit(
                [
                    "run",
                    "--model",
                    "tiny",
                    "--arm",
                    arm,
                    "--tasks",
                    "gsm8k",
                    "--limit",
                    "3",
                    "--max-new-tokens",
                    "4",
                    "--data-dir",
                    data,
                    "--out",
                    f"base-{arm}",
                    "--no-progress",
                ],
                work,
                timeout=300,
            )
            assert rc == 0, out
    fifo = work / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    (work / "adir").mkdir(exist_ok=True)
    (work / "afile").write_text("x\n")
    if not (work / "zero-link").exists():
        (work / "zero-link").symlink_to("/dev/zero")
    if not (work / "dangling").is_symlink():
        (work / "dangling").symlink_to(work / "nowhere")


def copy_run(work: Path, src: str, dst: str) -> Path:
    import shutil

    d = work / dst
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(work / src, d, symlinks=True)
    return d


def write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)


# ---------------------------------------------------------------- CLI probes
def cli_probes() -> list[Probe]:
    P: list[Probe] = []
    run = [
        "run",
        "--model",
        "tiny",
        "--tasks",
        "gsm8k",
        "--limit",
        "1",
        "--max-new-tokens",
        "2",
        "--no-progress",
        "--data-dir",
        str(ROOT / "evalkit/assets/gsm8k"),
    ]

    def r(name, extra, expect=(2,), **kw):
        out = kw.pop("out", None)
        argv = run + extra + ([] if any(a == "--out" for a in extra) else ["--out", out or f"out-{name}"])
        P.append(Probe(name, "run-args", argv, expect, **kw))

    for arm in [
        "",
        "é",
        "fp16@chunk=-1",
        "fp16@chunk=nan",
        "fp16@chunk=" + "9" * 30,
        "fp16@@",
        "fp16@intra=fp99",
        "m0",
        "m99",
        "fp16@chunk=0",
        " fp16",
        "fp16\n",
        "fp16@chunk=300000",
    ]:
        r(f"arm[{arm!r}]", ["--arm", arm], expect=(0, 2) if arm.strip() == "fp16" else (2,))
    for lim in ["-1", "0", "nan", "1e3", "", "٣"]:
        r(f"limit[{lim!r}]", ["--arm", "fp32", "--limit", lim], expect=(0, 2))
    for seed in ["-1", str(2**70), "nan", "0x10"]:
        r(f"seed[{seed!r}]", ["--arm", "fp32", "--seed", seed], expect=(0, 2))
    for mnt in ["0", "-5", str(10**12), "inf"]:
        r(f"max-new-tokens[{mnt!r}]", ["--arm", "fp32", "--max-new-tokens", mnt], expect=(0, 2))
    for lengths in ["", "0", "-1k", "nank", "1e3", "1k,,2k", "999999999999k", "1.5k"]:
        r(
            f"lengths[{lengths!r}]",
            ["--arm", "fp32", "--tasks", "passkey", "--lengths", lengths],
            expect=(0, 2),
        )
    for tasks in ["", ",", "gsm8k,gsm8k", "ṗasskey", "../../etc/passwd", "gsm8k:x"]:
        r(f"tasks[{tasks!r}]", ["--arm", "fp32", "--tasks", tasks], expect=(0, 2))
    for opt in [
        "=",
        "gsm8k:",
        "gsm8k:num_fewshot=1e400",
        "nosuch:k=v",
        "gsm8k:num_fewshot=-3",
        ":=",
        "gsm8k:=1",
    ]:
        r(f"task-option[{opt!r}]", ["--arm", "fp32", "--task-option", opt], expect=(0, 2))
    for k in [
        "",
        "=",
        "kda_prefill=",
        "a=b=c",
        "weights=fp8",
        "tf32=maybe",
        "kda_prefill=stream,kda_prefill=split",
    ]:
        r(f"kernels[{k!r}]", ["--arm", "fp32", "--kernels", k], expect=(0, 2))
    for n in ["0", "-1", str(10**9)]:
        r(f"max-num-seqs[{n}]", ["--arm", "fp32", "--max-num-seqs", n], expect=(0, 2))
    for d in ["", "cpu,cpu", "cpu:0", "mps", "cuda:-1", "cpu,"]:
        r(f"device[{d!r}]", ["--arm", "fp32", "--device", d], expect=(0, 2))
    for dp in ["0", "-1", "auto2", str(10**6), "nan"]:
        r(f"data-parallel[{dp!r}]", ["--arm", "fp32", "--device", "cpu", "--data-parallel", dp], expect=(2,))
    for dd in ["afile", "fifo", "adir", "nowhere", "zero-link"]:
        r(f"data-dir[{dd}]", ["--arm", "fp32", "--data-dir", dd], timeout=30)
    for out in ["afile", "fifo", "afile/sub", "", "dangling", "zero-link"]:
        r(f"out[{out!r}]", ["--arm", "fp32", "--out", out], timeout=30, expect=(0, 2) if out == "" else (2,))
    r(
        "out=drift-dir",
        ["--arm", "fp32", "--out", "drift-run"],
        (0, 2),
        setup=lambda w: write(w / "drift-run/drift.json", "{}"),
    )
    r(
        "out=sweep-dir",
        ["--arm", "fp32", "--out", "sweep-run"],
        (0, 2),
        setup=lambda w: write(w / "sweep-run/sweep.json", '{"arms": []}'),
    )
    for plan in ["nowhere.yaml", "adir", "fifo", "afile", "zero-link"]:
        r(f"plan[{plan}]", ["--arm", "fp32", "--plan", plan], timeout=30)
    for inc in ["afile", "fifo", "nowhere"]:
        r(f"include-path[{inc}]", ["--arm", "fp32", "--include-path", inc], timeout=30)
    for model in ["afile", "adir", "", "fifo"]:
        r(f"model[{model!r}]", ["--arm", "fp32", "--model", model], timeout=60)
    r(
        "model-garbage-config",
        ["--arm", "fp32", "--model", "badmodel"],
        setup=lambda w: write(w / "badmodel/config.json", '{"model_type": "kimi_linear", "hidden_size": -4}'),
    )
    r(
        "model-config-deep",
        ["--arm", "fp32", "--model", "deepmodel"],
        setup=lambda w: write(w / "deepmodel/config.json", DEEP),
    )
    # remote runs
    srv = [
        "run",
        "--arm",
        "srv",
        "--tasks",
        "gsm8k",
        "--limit",
        "1",
        "--max-new-tokens",
        "2",
        "--no-progress",
        "--data-dir",
        str(ROOT / "evalkit/assets/gsm8k"),
        "--max-retries",
        "0",
        "--timeout",
        "2",
    ]
    for url in [
        "",
        "ftp://x",
        "http://",
        "http://127.0.0.1:99999",
        "http://127.0.0.1:1/\x7f",
        "http://é.invalid:1",
        "http://127.0.0.1:-1",
    ]:
        P.append(Probe(f"server[{url!r}]", "run-remote", srv + ["--server", url, "--out", "o-srv"], (2,)))
    for name, val in [
        ("concurrency", "0"),
        ("concurrency", "-1"),
        ("timeout", "nan"),
        ("timeout", "-1"),
        ("timeout", "inf"),
        ("max-retries", "-1"),
        ("max-retries", str(10**9)),
    ]:
        P.append(
            Probe(
                f"{name}[{val}]",
                "run-remote",
                srv + ["--server", "http://127.0.0.1:1", f"--{name}", val, "--out", "o-srv"],
                (2,),
            )
        )
    # secrets
    P.append(
        Probe(
            "secret-url-userinfo",
            "secrets",
            srv + ["--server", f"http://u:{SECRET}@127.0.0.1:1", "--out", "o-sec1"],
            (0, 1, 2),
        )
    )
    P.append(
        Probe(
            "secret-url-query",
            "secrets",
            srv + ["--server", f"http://127.0.0.1:1/v1?api_key={SECRET}", "--out", "o-sec2"],
            (0, 1, 2),
        )
    )
    P.append(
        Probe(
            "secret-api-key-abbrev",
            "secrets",
            srv + ["--server", "http://127.0.0.1:1", "--api", SECRET, "--out", "o-sec3"],
            (0, 1, 2),
        )
    )
    P.append(
        Probe(
            "secret-api-key-abbrev=",
            "secrets",
            srv + ["--server", "http://127.0.0.1:1", f"--api-k={SECRET}", "--out", "o-sec4"],
            (0, 1, 2),
        )
    )
    P.append(
        Probe(
            "secret-env-key",
            "secrets",
            srv + ["--server", "http://127.0.0.1:1", "--out", "o-sec5"],
            (0, 1, 2),
            env={"OPENAI_API_KEY": SECRET},
        )
    )
    P.append(
        Probe(
            "secret-api-key-newline",
            "secrets",
            srv + ["--server", "http://127.0.0.1:1", "--api-key", SECRET + "\nX", "--out", "o-sec6"],
            (0, 1, 2),
        )
    )
    P.append(
        Probe(
            "secret-url-fragment-pw",
            "secrets",
            srv + ["--server", f"http://user:{SECRET2}@[::1", "--out", "o-sec7"],
            (2,),
        )
    )
    P.append(
        Probe(
            "secret-in-arm-note-url",
            "secrets",
            srv
            + [
                "--server",
                "http://127.0.0.1:1",
                "--arm-note",
                f"see https://x:{SECRET}@h",
                "--out",
                "o-sec8",
            ],
            (0, 1, 2),
        )
    )
    P.append(
        Probe(
            "secret-config-token-key",
            "secrets",
            srv + ["--config", "secret-input1.yaml", "--server", "http://127.0.0.1:1", "--out", "o-sec9"],
            (0, 1, 2),
            setup=lambda w: write(w / "secret-input1.yaml", f"api_key: {SECRET}\n"),
        )
    )
    P.append(
        Probe(
            "secret-config-server-query",
            "secrets",
            srv + ["--config", "secret-input2.yaml", "--out", "o-sec10"],
            (0, 1, 2),
            setup=lambda w: write(
                w / "secret-input2.yaml", f"server: ['http://127.0.0.1:1/?token={SECRET}']\n"
            ),
        )
    )
    return P


def config_probes() -> list[Probe]:
    P = []
    base = [
        "run",
        "--model",
        "tiny",
        "--arm",
        "fp32",
        "--tasks",
        "gsm8k",
        "--limit",
        "1",
        "--max-new-tokens",
        "2",
        "--no-progress",
        "--data-dir",
        str(ROOT / "evalkit/assets/gsm8k"),
        "--out",
        "o-cfg",
    ]
    bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n" for p, c in zip("abcdefgh", "bcdefghi")
    )
    cases = {
        "yaml-bomb": bomb,
        "yaml-bomb-as-tasks": bomb.replace("i: &i", "tasks: &i"),
        "deep-yaml": "limit: " + "[" * 20000 + "]" * 20000 + "\n",
        "deep-yaml-mapping": "limit: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",
        "python-tag": "limit: !!python/object/apply:os.system ['echo PWNED']\n",
        "merge-key": "base: &b {limit: 1}\n<<: *b\n",
        "merge-key-only": "<<: {limit: 1}\n",
        "dup-keys": "limit: 1\nlimit: abc\n",
        "scalar": "42\n",
        "list": "- limit\n- 1\n",
        "nul": "limit: 1\x00\n",
        "bad-utf8-key": b"\xff: 1\n",
        "unknown-key": "nonsense: 1\n",
        "key-int": "1: 2\n",
        "key-null": "~: 2\n",
        "key-list": "? [a, b]\n: 1\n",
        "limit-float": "limit: 1.5\n",
        "limit-huge": f"limit: {10**400}\n",
        "limit-nan": "limit: .nan\n",
        "limit-inf": "limit: .inf\n",
        "limit-neg": "limit: -3\n",
        "limit-date": "limit: 2024-01-01\n",
        "limit-binary": "limit: !!binary aGVsbG8=\n",
        "limit-set": "limit: !!set {a}\n",
        "tasks-mapping-in-list": "tasks: [{a: 1}]\n",
        "tasks-empty-list": "tasks: []\n",
        "tasks-null-in-list": "tasks: [gsm8k, null]\n",
        "arm-list": "arm: [fp16, fp32]\n",
        "switch-text": "no-progress: 'yes'\n",
        "switch-null": "no-progress: ~\n",
        "config-in-config": "config: other.yaml\n",
        "out-list": "out: [a, b]\n",
        "task-option-mapping": "task-option: {gsm8k: 1}\n",
        "kernels-deep": "kernels: " + DEEP[:2000] + "\n",
        "huge-string": "arm-note: " + "x" * 5_000_000 + "\n",
        "tab-indent": "limit:\n\t1\n",
        "bom": "\ufefflimit: 1\n",
        "utf16": "limit: 1\n".encode("utf-16"),
        "empty": "",
        "only-comment": "# nothing\n",
        "document-stream": "limit: 1\n---\nlimit: 2\n",
    }
    for name, text in cases.items():
        P.append(
            Probe(
                f"config:{name}",
                "config",
                base + ["--config", f"cfg-{name}.yaml"],
                (0, 2),
                setup=lambda w, n=name, t=text: write(w / f"cfg-{n}.yaml", t),
                timeout=60,
            )
        )
    for path in ["fifo", "adir", "zero-link", "nowhere.yaml", "dangling", ""]:
        P.append(Probe(f"config-path[{path!r}]", "config", base + ["--config", path], (2,), timeout=30))
    P.append(
        Probe(
            "config-twice",
            "config",
            base + ["--config", "cfg-empty.yaml", "--config", "cfg-scalar.yaml"],
            (0, 2),
        )
    )
    return P


def run_dir_probes() -> list[Probe]:
    """compare / resume over damaged or foreign run directories."""
    P = []
    gsm = str(ROOT / "evalkit/assets/gsm8k")
    resume = [
        "run",
        "--model",
        "tiny",
        "--arm",
        "fp16",
        "--tasks",
        "gsm8k",
        "--limit",
        "3",
        "--max-new-tokens",
        "4",
        "--no-progress",
        "--data-dir",
        gsm,
        "--out",
    ]

    def damaged(name, mutate, expect_cmp=(2,), expect_resume=(0, 2)):
        def setup(w, mutate=mutate, name=name):
            d = copy_run(w, "base-fp16", f"dmg-{name}")
            mutate(d)

        P.append(
            Probe(
                f"compare:{name}",
                "run-dirs",
                ["compare", "base-fp32", f"dmg-{name}"],
                expect_cmp,
                setup=setup,
            )
        )
        P.append(Probe(f"resume:{name}", "run-dirs", resume + [f"dmg-{name}"], expect_resume, setup=setup))

    def trunc(file, n):
        return lambda d: (d / file).write_bytes((d / file).read_bytes()[:n])

    damaged("manifest-truncated", trunc("manifest.json", 100))
    damaged("manifest-empty", trunc("manifest.json", 0))
    damaged("manifest-list", lambda d: (d / "manifest.json").write_text("[]"))
    damaged("manifest-deep", lambda d: (d / "manifest.json").write_text(DEEP))
    damaged("manifest-nul", lambda d: (d / "manifest.json").write_bytes(b"\x00" * 10))
    damaged("manifest-dir", lambda d: ((d / "manifest.json").unlink(), (d / "manifest.json").mkdir()))
    damaged("manifest-fifo", lambda d: ((d / "manifest.json").unlink(), os.mkfifo(d / "manifest.json")))
    damaged(
        "manifest-zero-link",
        lambda d: ((d / "manifest.json").unlink(), (d / "manifest.json").symlink_to("/dev/zero")),
    )

    def mfield(**kv):
        def m(d):
            j = json.loads((d / "manifest.json").read_text())
            for k, v in kv.items():
                j[k] = v
            (d / "manifest.json").write_text(json.dumps(j))

        return m

    damaged("manifest-version-999", mfield(evalkit_version="999.0"), expect_cmp=(0, 2))
    # compare reads the manifest fields it needs only: odd values elsewhere may pass (no traceback)
    damaged("manifest-arm-dict", mfield(arm={"x": 1}), expect_cmp=(0, 2))
    damaged("manifest-tasks-str", mfield(tasks="gsm8k"), expect_cmp=(0, 2))
    damaged("manifest-seed-str", mfield(seed="abc"), expect_cmp=(0, 2))
    damaged("manifest-limit-neg", mfield(limit=-1), expect_cmp=(0, 2))
    damaged(
        "manifest-nan",
        lambda d: (d / "manifest.json").write_text(
            (d / "manifest.json").read_text().replace("{", '{"zz": NaN, ', 1)
        ),
        expect_cmp=(0, 2),
    )
    damaged("samples-truncated-line", trunc("samples.jsonl", -20), expect_cmp=(0, 2))
    damaged("samples-nul", lambda d: open(d / "samples.jsonl", "ab").write(b"\x00\x00\x00\n"))
    damaged("samples-bad-utf8", lambda d: open(d / "samples.jsonl", "ab").write(b'{"id": "\xff"}\n'))
    damaged("samples-number-line", lambda d: open(d / "samples.jsonl", "ab").write(b"42\n"))
    damaged(
        "samples-dup",
        lambda d: open(d / "samples.jsonl", "ab").write(
            (d / "samples.jsonl").read_bytes().splitlines(keepends=True)[0]
        ),
        expect_cmp=(0, 2),
    )
    damaged(
        "samples-nan-score",
        lambda d: (d / "samples.jsonl").write_text(
            (d / "samples.jsonl").read_text().replace('"exact_match', '"zz": NaN, "exact_match')
        ),
        expect_cmp=(0, 2),
    )
    damaged(
        "samples-huge-number",
        lambda d: (d / "samples.jsonl").write_text(
            (d / "samples.jsonl").read_text().replace("{", '{"zz": 1' + "0" * 5000 + ", ", 1)
        ),
        expect_cmp=(0, 2),
    )
    damaged("samples-dir", lambda d: ((d / "samples.jsonl").unlink(), (d / "samples.jsonl").mkdir()))
    damaged("samples-fifo", lambda d: ((d / "samples.jsonl").unlink(), os.mkfifo(d / "samples.jsonl")))
    damaged("samples-empty", trunc("samples.jsonl", 0), expect_cmp=(2,))
    damaged(
        "samples-long-line",
        lambda d: open(d / "samples.jsonl", "ab").write(b'{"id": "' + b"a" * 30_000_000 + b'"}\n'),
    )
    damaged("summary-garbage", lambda d: (d / "summary.json").write_text("{"), expect_cmp=(0, 2))
    damaged("headroom-garbage", lambda d: (d / "headroom.json").write_text("[1,"), expect_cmp=(0, 2))
    damaged("headroom-deep", lambda d: (d / "headroom.json").write_text(DEEP), expect_cmp=(0, 2))
    damaged("lock-fifo", lambda d: ((d / ".lock").unlink(), os.mkfifo(d / ".lock")), expect_cmp=(0, 2))
    for a, b in [
        ("nowhere", "base-fp16"),
        ("afile", "base-fp16"),
        ("adir", "base-fp16"),
        ("fifo", "base-fp16"),
        ("base-fp16", "base-fp16"),
        ("zero-link", "base-fp16"),
        ("", ""),
    ]:
        P.append(Probe(f"compare[{a!r},{b!r}]", "run-dirs", ["compare", a, b], (0, 2), timeout=30))
    cmpx = ["compare", "base-fp32", "base-fp16"]
    for extra in (
        ["--margin", "nan"],
        ["--margin", "-1"],
        ["--margin", "inf"],
        ["--margin", "1e400"],
        ["--logprob-margin", "nan"],
        ["--max-chars", "-1"],
        ["--max-chars", "0"],
        ["--json", "adir"],
        ["--md", "afile/x.md"],
        ["--out", "/dev/stdout"],
        ["--plot", "afile/x.png"],
        ["--label-baseline", "a\nb"],
        ["--label-candidate", "\x1b[31mred"],
        ["--label-baseline", ""],
        ["--replicate", "afile"],
        ["--replicate", "base-fp16"],
        ["--drift", "afile"],
        ["--drift", "base-fp16"],
        ["--plan", "fifo"],
        ["--plan", "afile"],
        ["--plan", "cfg-yaml-bomb.yaml"],
        ["--json", "zero-link"],
        ["--md", "/dev/full"],
    ):
        P.append(Probe(f"compare{extra}", "compare-args", cmpx + extra, (0, 2), timeout=30))
    return P


def other_command_probes() -> list[Probe]:
    P = []
    for extra in (
        ["nowhere"],
        ["afile"],
        ["fifo"],
        ["--margin", "0"],
        ["--margin", "nan"],
        ["--power", "1"],
        ["--power", "0"],
        ["--power", "nan"],
        ["--effect", "0", "base-fp16"],
        ["--effect", "-0.1", "base-fp16"],
        ["--looks", "0", "--discordance", "0.1"],
        ["--looks", str(10**6), "--discordance", "0.1"],
        ["--family-size", "0", "--discordance", "0.1"],
        ["--family-size", str(10**18), "--discordance", "0.1"],
        ["--discordance", "nan"],
        ["--discordance", "-1"],
        ["--discordance", "2"],
        ["--discordance", "0.1", "--cell", ""],
        ["--discordance", "0.1", "--cell", "@"],
        ["--discordance", "0.1", "--cell", "gsm8k@-1"],
        ["--calibrate-from", "afile"],
        ["--discordance", "0.1", "--out", "adir"],
        ["--discordance", "0.1", "--name", "a\nb: c", "--out", "pn.yaml"],
        ["--discordance", "1e-300"],
        ["--discordance", "0.1", "--margin", "1e-300"],
        ["base-fp16", "--allow-partial", "--effect", "1e-9"],
    ):
        P.append(Probe(f"plan{extra}", "plan", ["plan", *extra], (0, 2), timeout=60))
    ab = ["ab", "--model", "tiny", "--max-new-tokens", "2", "--no-progress"]
    for plan_text, _extra in [
        ("[]", []),
        ("{}", []),
        ("cells: 5", []),
        (DEEP, []),
        ("cells: [{task: gsm8k, n_max: -1}]", []),
    ]:
        P.append(
            Probe(
                f"ab-plan[{plan_text[:24]!r}]",
                "ab",
                ab + ["--plan", "abp.yaml", "--candidate", "fp16", "--out", "o-ab"],
                (2,),
                setup=lambda w, t=plan_text: write(w / "abp.yaml", t),
            )
        )
    for extra in (
        ["--plan", "fifo"],
        ["--plan", "pn.yaml", "--candidate", ""],
        ["--plan", "pn.yaml", "--candidate", "fp16", "--looks", "0"],
        ["--plan", "pn.yaml", "--candidate", "fp16", "--out", "afile"],
    ):
        argv = ab + extra + ([] if "--candidate" in extra else ["--candidate", "fp16"])
        argv += [] if "--out" in extra else ["--out", "o-ab2"]
        P.append(Probe(f"ab{extra}", "ab", argv, (2,), timeout=60))
    sweep = [
        "sweep",
        "--model",
        "tiny",
        "--tasks",
        "gsm8k",
        "--limit",
        "1",
        "--max-new-tokens",
        "2",
        "--no-progress",
    ]
    for extra in (
        ["--arms", "", "--out", "o-sw"],
        ["--arms", ",", "--out", "o-sw"],
        ["--arms", "fp32,fp32", "--out", "o-sw"],
        ["--arms", "nonsense", "--out", "o-sw"],
        ["--arms", "fp32", "--margin", "nan", "--out", "o-sw"],
        ["--arms", "fp32", "--report-only", "--out", "adir"],
        ["--arms", "fp32", "--out", "afile"],
        ["--arms", "fp32", "--report-only", "--out", "base-fp16"],
    ):
        P.append(Probe(f"sweep{extra}", "sweep", sweep + extra, (2,), timeout=60))
    drift = ["drift", "--model", "tiny", "--no-plots", "--no-progress", "--device", "cpu"]
    for extra in (
        ["--length", "0"],
        ["--length", "-1"],
        ["--length", "1e12"],
        ["--generate", "-1"],
        ["--prompt-length", "0"],
        ["--chunk-size", "0"],
        ["--chunk-size", "-64"],
        ["--decode-block", "0"],
        ["--prompts", "0"],
        ["--prompts", "-1"],
        ["--input", "nowhere"],
        ["--input", "adir"],
        ["--input", "fifo"],
        ["--input", "afile", "--length", "64"],
        ["--input", "zero-link"],
        ["--report-only", "nowhere"],
        ["--report-only", "base-fp16"],
        ["--report-only", "afile"],
        ["--arms", ""],
        ["--arms", "fp16,nonsense"],
        ["link"],
        ["link", "afile", "adir"],
        ["link", "base-fp16", "base-fp32"],
        ["--task", "nosuch"],
        ["--title", "\u202e" + "t" * 100_000, "--length", "256", "--generate", "4", "--prompt-length", "64"],
    ):
        P.append(
            Probe(
                f"drift{extra}",
                "drift",
                drift + extra + (["--out", "o-drift"] if extra[0] != "link" else []),
                (0, 2),
                timeout=60,
            )
        )
    for extra in (
        ["--show", ""],
        ["--show", "nosuch"],
        ["--show", "passkey", "--length", "-1"],
        ["--show", "passkey", "--length", "nan"],
        ["--show", "passkey", "--length", "1e9k"],
        ["--show", "passkey", "--length", "1k", "--chars", "-1"],
        ["--show", "gsm8k", "--data-dir", "afile"],
        ["--show", "gsm8k", "--data-dir", "fifo"],
        ["--show", "passkey", "--length", "1k", "--tokenizer", "afile"],
        ["--json", "--show", "é"],
    ):
        P.append(Probe(f"tasks{extra}", "tasks", ["tasks", *extra], (0, 2), timeout=60))
    for extra in (
        ["--launches", "0"],
        ["--launches", "-1"],
        ["--seed", "-1"],
        ["--formats", ""],
        ["--formats", "nonsense"],
        ["--json", "adir"],
        ["--device", "cuda"],
        ["--json", "afile/x.json"],
    ):
        P.append(
            Probe(
                f"verify-kernels{extra}",
                "verify-kernels",
                ["verify-kernels", "--device", "cpu", *extra],
                (0, 1, 2),
                timeout=120,
            )
        )

    def quoted(model):
        def check(work, out, model=model):
            import shlex

            for line in out.splitlines():
                if "--model" in line and line.strip().startswith(
                    ("vllm", "python", "evalkit", "sglang", "atom")
                ):
                    try:
                        words = shlex.split(line.rstrip("\\ "))
                    except ValueError:
                        return [f"unparsable shell line: {line[:80]}"]
                    if model not in words:
                        return [f"model name not one shell word: {line[:120]}"]
            return []

        return check

    for extra in (
        ["--port", "-1"],
        ["--port", "70000"],
        ["--arm", ""],
        ["--tasks", ""],
        ["--arm", "fp16@chunk=-4"],
    ):
        P.append(Probe(f"recipes{extra}", "recipes", ["recipes", *extra], (0, 2)))
    for model in ["a b; touch PWNED", "$(touch PWNED)", "x'y"]:
        P.append(
            Probe(
                f"recipes-model[{model!r}]",
                "recipes",
                ["recipes", "--model", model, "--engine", "vllm"],
                (0, 2),
                check=lambda w, o, m=model: quoted(m)(w, o) + (["PWNED"] if (w / "PWNED").exists() else []),
            )
        )
    serve = ["serve", "--model", "tiny", "--device", "cpu"]
    for extra in (
        ["--arm", "fp16", "--port", "-1"],
        ["--arm", "fp16", "--port", "70000"],
        ["--arm", "fp16", "--host", "::::"],
        ["--arm", "fp16", "--max-num-seqs", "0"],
        ["--arm", "fp16", "--max-body-mb", "0"],
        ["--arm", "fp16", "--max-body-mb", "-1"],
        ["--arm", "fp16", "--shutdown-timeout", "-1"],
        ["--arm", "fp16", "--port-file", "adir"],
        ["--arm", ""],
        ["--arm", "fp16", "--api-key", ""],
        ["--arm", "fp16", "--host", "256.1.1.1"],
    ):
        P.append(Probe(f"serve{extra}", "serve-args", serve + extra, (2,), timeout=30))
    for argv in (["nosuch"], ["run"], ["run", "--arm"], ["--version", "x"], ["compare", "--help"], ["é"]):
        P.append(Probe(f"top{argv}", "top", argv, (0, 2)))
    return P


# ---------------------------------------------------------------- signals
def signal_probe(work: Path, sig: int, dp: bool, name: str) -> Outcome:
    """Interrupt a run once it has written a sample, resume it, and count: every question once."""
    import shutil

    out = work / f"sig-{name}"
    shutil.rmtree(out, ignore_errors=True)
    limit = 6
    argv = [
        PY,
        "-m",
        "evalkit",
        "run",
        "--model",
        "tiny",
        "--arm",
        "fp32",
        "--tasks",
        "gsm8k",
        "--limit",
        str(limit),
        "--max-new-tokens",
        "24",
        "--no-progress",
        "--data-dir",
        str(ROOT / "evalkit/assets/gsm8k"),
        "--out",
        str(out),
        "--device",
        "cpu",
    ] + (["--data-parallel", "2"] if dp else [])
    t0 = time.time()
    problems = []
    p = subprocess.Popen(
        argv,
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_limit_memory,
    )
    samples = out / "samples.jsonl"
    while time.time() - t0 < 120 and p.poll() is None:
        if samples.exists() and samples.stat().st_size > 0:
            break
        time.sleep(0.2)
    children = _children(p.pid)
    p.send_signal(sig)
    try:
        text = p.communicate(timeout=60)[0].decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        text = p.communicate()[0].decode("utf-8", "replace")
        problems.append("hang after the signal")
    if "Traceback (most recent call last)" in text and sig != signal.SIGKILL:
        problems.append("traceback on interrupt")
    time.sleep(1.0)
    alive = [c for c in children if _alive(c)]
    if alive:
        problems.append(f"orphaned workers {alive}")
        for c in alive:
            os.kill(c, signal.SIGKILL)
    rc, text2, _ = evalkit([a for a in argv[3:]], work, timeout=240)
    if rc != 0:
        problems.append(f"resume exit {rc}: {text2[-300:]}")
    ids = (
        [_key(json.loads(line)) for line in samples.read_text().splitlines() if line.strip()]
        if samples.exists()
        else []
    )
    if len(ids) != limit or len(set(ids)) != limit:
        problems.append(f"{len(ids)} sample lines, {len(set(ids))} distinct, expected {limit}")
    return Outcome(
        f"signal:{name}",
        "signals",
        not problems,
        p.returncode,
        round(time.time() - t0, 2),
        problems,
        (text + "\n--- resume ---\n" + text2)[-600:],
    )


def _key(sample: dict) -> tuple:
    return sample["task"], sample["doc_id"], sample.get("length")


def _children(pid: int) -> list[int]:
    try:
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    except OSError:
        return []
    kids = [int(x) for x in out.split()]
    return kids + [g for k in kids for g in _children(k)]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


# ---------------------------------------------------------------- serve
def http(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict | None = None,
    timeout: float = 30.0,
) -> tuple[int, bytes]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Authorization": f"Bearer {SECRET}", "Content-Type": "application/json", **(headers or {})}
    h = {k: v for k, v in h.items() if v is not None}
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def serve_probes(work: Path) -> list[Outcome]:
    log = open(work / "serve.log", "wb")
    port_file = work / "serve.port"
    port_file.unlink(missing_ok=True)
    p = subprocess.Popen(
        [
            PY,
            "-m",
            "evalkit",
            "serve",
            "--model",
            "tiny",
            "--arm",
            "fp16",
            "--device",
            "cpu",
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--api-key",
            SECRET,
            "--max-body-mb",
            "2",
            "--log-level",
            "info",
        ],
        cwd=work,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    t0 = time.time()
    while not port_file.exists() and time.time() - t0 < 120 and p.poll() is None:
        time.sleep(0.3)
    port = int(port_file.read_text())
    results = []
    comp = {"model": "tiny", "prompt": "Hi", "max_tokens": 2}
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}

    def j(d):
        return json.dumps(d).encode()

    cases: list[tuple[str, str, str, bytes | None, dict | None, tuple[int, ...]]] = [
        ("ok-completion", "POST", "/v1/completions", j(comp), None, (200,)),
        ("ok-chat", "POST", "/v1/chat/completions", j(chat), None, (200,)),
        (
            "body-over-limit",
            "POST",
            "/v1/completions",
            b'{"prompt": "' + b"a" * 3_000_000 + b'"}',
            None,
            (413,),
        ),
        ("nested-200k", "POST", "/v1/completions", DEEP.encode() * 2, None, (400, 413, 422)),
        (
            "nested-in-field",
            "POST",
            "/v1/completions",
            j({**comp, "stop": None})[:-1] + b', "x": ' + DEEP[:40000].encode() + b"}",
            None,
            (400, 422),
        ),
        (
            "nested-messages",
            "POST",
            "/v1/chat/completions",
            b'{"model":"tiny","messages":' + b"[" * 30000 + b"]" * 30000 + b"}",
            None,
            (400, 422),
        ),
        (
            "text-plain",
            "POST",
            "/v1/completions",
            j(comp),
            {"Content-Type": "text/plain"},
            (200, 400, 415, 422),
        ),
        ("no-content-type", "POST", "/v1/completions", j(comp), {"Content-Type": None}, (200, 400, 415, 422)),
        (
            "form-urlencoded",
            "POST",
            "/v1/completions",
            b"prompt=hi&max_tokens=2",
            {"Content-Type": "application/x-www-form-urlencoded"},
            (400, 415, 422),
        ),
        (
            "multipart",
            "POST",
            "/v1/completions",
            b"--x\r\n\r\n--x--",
            {"Content-Type": "multipart/form-data; boundary=x"},
            (400, 415, 422),
        ),
        (
            "invalid-utf8",
            "POST",
            "/v1/completions",
            b'{"model":"tiny","prompt":"\xff\xfe","max_tokens":2}',
            None,
            (400, 422),
        ),
        ("utf16-body", "POST", "/v1/completions", json.dumps(comp).encode("utf-16"), None, (200, 400, 422)),
        ("bom-body", "POST", "/v1/completions", b"\xef\xbb\xbf" + j(comp), None, (200, 400, 422)),
        ("nul-in-prompt", "POST", "/v1/completions", j({**comp, "prompt": "a\x00b"}), None, (200, 400)),
        (
            "lone-surrogate",
            "POST",
            "/v1/completions",
            b'{"model":"tiny","prompt":"\\ud800","max_tokens":2}',
            None,
            (200, 400),
        ),
        ("max_tokens-neg", "POST", "/v1/completions", j({**comp, "max_tokens": -1}), None, (400, 422)),
        ("max_tokens-huge", "POST", "/v1/completions", j({**comp, "max_tokens": 10**30}), None, (400, 422)),
        ("max_tokens-float", "POST", "/v1/completions", j({**comp, "max_tokens": 2.5}), None, (400, 422)),
        (
            "max_tokens-nan",
            "POST",
            "/v1/completions",
            b'{"model":"tiny","prompt":"a","max_tokens":NaN}',
            None,
            (400, 422),
        ),
        ("max_tokens-str", "POST", "/v1/completions", j({**comp, "max_tokens": "2"}), None, (200, 400, 422)),
        ("logprobs-neg", "POST", "/v1/completions", j({**comp, "logprobs": -1}), None, (400, 422)),
        ("logprobs-huge", "POST", "/v1/completions", j({**comp, "logprobs": 10**9}), None, (400, 422)),
        ("logprobs-21", "POST", "/v1/completions", j({**comp, "logprobs": 21}), None, (200, 400, 422)),
        (
            "chat-top_logprobs-huge",
            "POST",
            "/v1/chat/completions",
            j({**chat, "logprobs": True, "top_logprobs": 10**6}),
            None,
            (400, 422),
        ),
        (
            "chat-top_logprobs-neg",
            "POST",
            "/v1/chat/completions",
            j({**chat, "logprobs": True, "top_logprobs": -2}),
            None,
            (400, 422),
        ),
        ("n-huge", "POST", "/v1/completions", j({**comp, "n": 10**9}), None, (400, 422)),
        ("n-zero", "POST", "/v1/completions", j({**comp, "n": 0}), None, (400, 422)),
        ("n-1000", "POST", "/v1/completions", j({**comp, "n": 1000}), None, (200, 400, 422)),
        ("best_of-huge", "POST", "/v1/completions", j({**comp, "best_of": 10**6}), None, (200, 400, 422)),
        (
            "stop-huge-list",
            "POST",
            "/v1/completions",
            j({**comp, "stop": ["x"] * 100_000}),
            None,
            (200, 400, 422),
        ),
        (
            "stop-huge-string",
            "POST",
            "/v1/completions",
            j({**comp, "stop": "x" * 1_000_000}),
            None,
            (200, 400, 422),
        ),
        ("stop-empty-string", "POST", "/v1/completions", j({**comp, "stop": [""]}), None, (200, 400, 422)),
        ("stop-nested", "POST", "/v1/completions", j({**comp, "stop": [["x"]]}), None, (400, 422)),
        (
            "prompt-list-huge",
            "POST",
            "/v1/completions",
            j({**comp, "prompt": ["a"] * 100_000}),
            None,
            (200, 400, 413, 422),
        ),
        ("prompt-token-ids-neg", "POST", "/v1/completions", j({**comp, "prompt": [-1, 5]}), None, (400, 422)),
        (
            "prompt-token-ids-huge",
            "POST",
            "/v1/completions",
            j({**comp, "prompt": [2**63]}),
            None,
            (400, 422),
        ),
        ("prompt-empty", "POST", "/v1/completions", j({**comp, "prompt": ""}), None, (200, 400, 422)),
        ("prompt-empty-list", "POST", "/v1/completions", j({**comp, "prompt": []}), None, (400, 422)),
        ("prompt-null", "POST", "/v1/completions", j({**comp, "prompt": None}), None, (400, 422)),
        (
            "temperature-nan",
            "POST",
            "/v1/completions",
            b'{"model":"tiny","prompt":"a","max_tokens":2,"temperature":NaN}',
            None,
            (400, 422),
        ),
        (
            "temperature-inf",
            "POST",
            "/v1/completions",
            b'{"model":"tiny","prompt":"a","max_tokens":2,"temperature":Infinity}',
            None,
            (400, 422),
        ),
        (
            "temperature-1e308",
            "POST",
            "/v1/completions",
            j({**comp, "temperature": 1e308}),
            None,
            (200, 400, 422),
        ),
        ("top_p-neg", "POST", "/v1/completions", j({**comp, "top_p": -0.5}), None, (400, 422)),
        ("top_p-2", "POST", "/v1/completions", j({**comp, "top_p": 2}), None, (400, 422)),
        ("top_k-neg", "POST", "/v1/completions", j({**comp, "top_k": -5}), None, (200, 400, 422)),
        (
            "seed-huge",
            "POST",
            "/v1/completions",
            j({**comp, "seed": 2**80, "temperature": 1.0}),
            None,
            (200, 400, 422),
        ),
        (
            "seed-neg",
            "POST",
            "/v1/completions",
            j({**comp, "seed": -1, "temperature": 1.0}),
            None,
            (200, 400, 422),
        ),
        (
            "logit_bias-huge",
            "POST",
            "/v1/completions",
            j({**comp, "logit_bias": {str(i): 100 for i in range(50000)}}),
            None,
            (200, 400, 422),
        ),
        (
            "logit_bias-bad-key",
            "POST",
            "/v1/completions",
            j({**comp, "logit_bias": {"abc": 1}}),
            None,
            (200, 400, 422),
        ),
        (
            "stream-options-bad",
            "POST",
            "/v1/completions",
            j({**comp, "stream": True, "stream_options": "x"}),
            None,
            (400, 422),
        ),
        ("stream-ok", "POST", "/v1/completions", j({**comp, "stream": True}), None, (200,)),
        (
            "chat-role-bad",
            "POST",
            "/v1/chat/completions",
            j({**chat, "messages": [{"role": "wizard", "content": "x"}]}),
            None,
            (200, 400, 422),
        ),
        (
            "chat-content-list",
            "POST",
            "/v1/chat/completions",
            j({**chat, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}),
            None,
            (200, 400, 422),
        ),
        (
            "chat-content-image",
            "POST",
            "/v1/chat/completions",
            j(
                {
                    **chat,
                    "messages": [
                        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                    ],
                }
            ),
            None,
            (400, 422),
        ),
        (
            "chat-messages-empty",
            "POST",
            "/v1/chat/completions",
            j({**chat, "messages": []}),
            None,
            (400, 422),
        ),
        (
            "chat-10k-messages",
            "POST",
            "/v1/chat/completions",
            j({**chat, "messages": [{"role": "user", "content": "a"}] * 10000}),
            None,
            (200, 400, 413, 422),
        ),
        ("model-unknown", "POST", "/v1/completions", j({**comp, "model": "other"}), None, (200, 404, 400)),
        (
            "model-huge",
            "POST",
            "/v1/completions",
            j({**comp, "model": "m" * 1_000_000}),
            None,
            (200, 400, 404, 422),
        ),
        ("unknown-field", "POST", "/v1/completions", j({**comp, "zzz": 1}), None, (200, 400, 422)),
        (
            "dup-keys",
            "POST",
            "/v1/completions",
            b'{"model":"tiny","prompt":"a","max_tokens":2,"max_tokens":-1}',
            None,
            (200, 400, 422),
        ),
        ("body-array", "POST", "/v1/completions", b"[]", None, (400, 422)),
        (
            "int-5000-digits",
            "POST",
            "/v1/completions",
            b'{"model":"tiny","prompt":"a","max_tokens":' + b"9" * 5000 + b"}",
            None,
            (400, 422),
        ),
        (
            "float-1e999",
            "POST",
            "/v1/completions",
            b'{"prompt":"a","max_tokens":2,"temperature":1e999}',
            None,
            (400, 422),
        ),
        ("body-empty", "POST", "/v1/completions", b"", None, (400, 422)),
        ("body-null", "POST", "/v1/completions", b"null", None, (400, 422)),
        ("get-on-post", "GET", "/v1/completions", None, None, (405, 404)),
        ("put", "PUT", "/v1/completions", j(comp), None, (405, 404)),
        ("path-traversal", "GET", "/../../etc/passwd", None, None, (404, 400)),
        ("path-unicode", "GET", "/v1/%FF%FE", None, None, (404, 400)),
        ("models", "GET", "/v1/models", None, None, (200,)),
        ("no-auth", "POST", "/v1/completions", j(comp), {"Authorization": None}, (401,)),
        ("wrong-auth", "POST", "/v1/completions", j(comp), {"Authorization": "Bearer nope"}, (401,)),
        (
            "auth-lowercase-bearer",
            "POST",
            "/v1/completions",
            j(comp),
            {"Authorization": f"bearer {SECRET}"},
            (200, 401),
        ),
        ("auth-basic", "POST", "/v1/completions", j(comp), {"Authorization": "Basic " + "a" * 10}, (401,)),
        (
            "auth-huge",
            "POST",
            "/v1/completions",
            j(comp),
            {"Authorization": "Bearer " + "a" * 60000},
            (401, 400, 431),
        ),
        (
            "auth-prefix-of-key",
            "POST",
            "/v1/completions",
            j(comp),
            {"Authorization": f"Bearer {SECRET[:-1]}"},
            (401,),
        ),
        ("metrics-no-auth", "GET", "/metrics", None, {"Authorization": None}, (401,)),
        ("openapi-no-auth", "GET", "/openapi.json", None, {"Authorization": None}, (401,)),
        ("redoc-no-auth", "GET", "/redoc", None, {"Authorization": None}, (401, 404)),
        ("docs-oauth2-no-auth", "GET", "/docs/oauth2-redirect", None, {"Authorization": None}, (401, 404)),
        ("tokenize-no-auth", "POST", "/tokenize", j({"prompt": "x"}), {"Authorization": None}, (401, 404)),
        (
            "v1-trailing-slash-no-auth",
            "POST",
            "/v1/completions/",
            j(comp),
            {"Authorization": None},
            (401, 404, 307),
        ),
        ("double-slash-no-auth", "POST", "//v1/completions", j(comp), {"Authorization": None}, (401, 404)),
        ("content-length-lies", "POST", "/v1/completions", j(comp), {"Content-Length": "5"}, (400, 422)),
        (
            "echo-logprobs-max0",
            "POST",
            "/v1/completions",
            j({**comp, "echo": True, "logprobs": 1, "max_tokens": 0}),
            None,
            (200, 400, 422),
        ),
        ("min_tokens-neg", "POST", "/v1/completions", j({**comp, "min_tokens": -1}), None, (400, 422)),
        (
            "frequency_penalty-nan",
            "POST",
            "/v1/completions",
            b'{"model":"tiny","prompt":"a","frequency_penalty":NaN}',
            None,
            (200, 400, 422),
        ),
        ("suffix", "POST", "/v1/completions", j({**comp, "suffix": "x"}), None, (200, 400, 422)),
        (
            "prompt-long-string",
            "POST",
            "/v1/completions",
            j({**comp, "prompt": "a " * 900_000}),
            None,
            (400, 413, 422),
        ),
    ]
    for name, method, path, body, headers, expect in cases:
        t = time.time()
        problems = []
        status = None
        data = b""
        try:
            status, data = http(port, method, path, body, headers)
        except Exception as exc:  # noqa: BLE001 - a dropped connection is itself a finding
            problems.append(f"connection error: {type(exc).__name__}: {exc}")
        if status is not None:
            if status not in expect:
                problems.append(f"status {status}, expected {expect}")
            if status >= 500:
                problems.append("5xx")
            if status >= 400 and path.startswith("/v1"):
                try:
                    err = json.loads(data)
                    if not isinstance(err.get("error"), dict) or "message" not in err["error"]:
                        problems.append("4xx without an OpenAI error object")
                except ValueError:
                    problems.append("4xx body not JSON")
            if SECRET.encode() in data:
                problems.append("secret in response")
        try:
            hs, _ = http(port, "GET", "/health", timeout=20)
            if hs != 200:
                problems.append(f"/health {hs} after the probe")
        except Exception as exc:  # noqa: BLE001
            problems.append(f"server unresponsive after the probe: {exc}")
        results.append(
            Outcome(
                f"serve:{name}",
                "serve-http",
                not problems,
                status,
                round(time.time() - t, 2),
                problems,
                data[:300].decode("utf-8", "replace"),
            )
        )
    results += _serve_socket_probes(port)
    # remote runs against the live server: the key given every way never reaches the run's files
    gsm = str(ROOT / "evalkit/assets/gsm8k")
    remote = [
        "run",
        "--server",
        f"http://127.0.0.1:{port}",
        "--model",
        "tiny",
        "--tasks",
        "gsm8k",
        "--limit",
        "1",
        "--max-new-tokens",
        "2",
        "--no-progress",
        "--data-dir",
        gsm,
        "--arm",
        "srv",
    ]
    for name, extra, env in [
        ("--api", ["--api", SECRET], None),
        ("--api-k=", [f"--api-k={SECRET}"], None),
        ("env", [], {"OPENAI_API_KEY": SECRET}),
        ("config", ["--config", "secret-input3.yaml"], None),
    ]:
        write(work / "secret-input3.yaml", f"api-key: {SECRET}\n")
        shutil.rmtree(work / f"o-remote-{name}", ignore_errors=True)  # a fresh run, not a resume
        probe = Probe(
            f"serve:remote-run-key[{name}]",
            "secrets",
            remote + extra + ["--out", f"o-remote-{name}"],
            (0,),
            env=env,
            timeout=120,
        )
        rc, text, seconds = evalkit(probe.argv, work, env, probe.timeout)
        results.append(judge(probe, work, rc, text, seconds))
    # shut down: SIGINT, expect a clean exit within the shutdown timeout
    t = time.time()
    p.send_signal(signal.SIGINT)
    try:
        rc = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = None
    log.close()
    text = (work / "serve.log").read_text(errors="replace")
    problems = []
    if rc is None:
        problems.append("serve did not stop on SIGINT")
    if "Traceback (most recent call last)" in text:
        problems.append("traceback in the server log")
    if SECRET in text:
        problems.append("secret in the server log")
    results.append(
        Outcome(
            "serve:log-and-shutdown",
            "serve-http",
            not problems,
            rc,
            round(time.time() - t, 2),
            problems,
            text[-600:],
        )
    )
    return results


def _serve_socket_probes(port: int) -> list[Outcome]:
    """Raw-socket probes: partial bodies, partial headers, many clients at once."""
    out = []

    def one(name, fn):
        t = time.time()
        problems = []
        try:
            problems += fn()
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{type(exc).__name__}: {exc}")
        try:
            if http(port, "GET", "/health", timeout=20)[0] != 200:
                problems.append("/health not 200 after the probe")
        except Exception as exc:  # noqa: BLE001
            problems.append(f"server unresponsive after the probe: {exc}")
        out.append(
            Outcome(f"serve:{name}", "serve-socket", not problems, None, round(time.time() - t, 2), problems)
        )

    def slow_body():
        # announce 1000 bytes, send 10, then stall: the server must keep answering others
        socks = []
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Authorization: Bearer {SECRET}\r\nContent-Length: 1000\r\n\r\n".encode()
                + b'{"model":'
            )
            socks.append(s)
        status, _ = http(
            port,
            "POST",
            "/v1/completions",
            json.dumps({"prompt": "Hi", "max_tokens": 2}).encode(),
            timeout=30,
        )
        for s in socks:
            s.close()
        return [] if status == 200 else [f"a normal request got {status} while 20 bodies stalled"]

    def slow_headers():
        socks = []
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            socks.append(s)
        status, _ = http(port, "GET", "/v1/models", timeout=30)
        for s in socks:
            s.close()
        return [] if status == 200 else [f"/v1/models {status} while 20 header blocks stalled"]

    def garbage_request_line():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(200) + b"\r\n\r\n")
        try:
            s.recv(1000)
        except OSError:
            pass
        s.close()
        return []

    def huge_header():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 2_000_000 + b"\r\n\r\n")
        try:
            data = s.recv(1000)
        except OSError:
            data = b""
        s.close()
        return [] if not data or data.split(b" ")[1][:1] in (b"2", b"4") else [f"answer {data[:40]!r}"]

    def chunked_unbounded():
        # chunked body past --max-body-mb with no Content-Length: must be cut off, not buffered whole
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {SECRET}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        chunk = b"a" * 65536
        answer = b""
        try:
            for _ in range(80):  # 5 MB
                s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            s.sendall(b"0\r\n\r\n")
            answer = s.recv(1000)
        except OSError:
            pass
        s.close()
        code = answer.split(b" ")[1] if answer.count(b" ") else b""
        return (
            [] if code in (b"413", b"400", b"") else [f"a 5 MB chunked body over a 2 MB limit got {code!r}"]
        )

    def concurrent():
        codes = []

        def go():
            try:
                codes.append(
                    http(
                        port,
                        "POST",
                        "/v1/completions",
                        json.dumps({"prompt": "Hi there", "max_tokens": 4}).encode(),
                        timeout=120,
                    )[0]
                )
            except Exception as exc:  # noqa: BLE001
                codes.append(str(exc))

        threads = [threading.Thread(target=go) for _ in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        bad = [c for c in codes if c != 200]
        return [f"{len(bad)}/24 concurrent requests failed: {bad[:3]}"] if bad else []

    def disconnect_mid_stream():
        for _ in range(10):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            body = json.dumps({"prompt": "Hi", "max_tokens": 16, "stream": True}).encode()
            s.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Authorization: Bearer {SECRET}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            s.recv(10)
            s.close()
        return []

    one("slowloris-body-x20", slow_body)
    one("slowloris-headers-x20", slow_headers)
    one("tls-hello-on-http", garbage_request_line)
    one("header-2MB", huge_header)
    one("chunked-5MB-over-limit", chunked_unbounded)
    one("concurrent-24", concurrent)
    one("disconnect-mid-stream-x10", disconnect_mid_stream)
    return out


# ---------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="/tmp/evalkit-adversarial")
    ap.add_argument("--json", help="write every probe's outcome here")
    ap.add_argument("--only", help="run the probes whose name contains this text")
    ap.add_argument("--kinds", help="comma-separated kinds (run-args, config, run-dirs, ..., signals, serve)")
    args = ap.parse_args(argv)
    work = Path(args.work).resolve()
    fixtures(work)
    kinds = set(args.kinds.split(",")) if args.kinds else None
    probes = cli_probes() + config_probes() + run_dir_probes() + other_command_probes()
    outcomes: list[Outcome] = []

    def record(o: Outcome) -> None:  # printed and saved as it comes: a pass stopped midway keeps its part
        outcomes.append(o)
        print(
            f"{'ok  ' if o.ok else 'FAIL'} {o.kind:14} {o.name[:70]:70} rc={o.rc} {o.seconds:5.1f}s "
            + "; ".join(o.problems)[:300],
            flush=True,
        )
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps([asdict(x) for x in outcomes], indent=1) + "\n")

    for probe in probes:
        if (kinds and probe.kind not in kinds) or (args.only and args.only not in probe.name):
            continue
        try:
            if probe.setup:
                probe.setup(work)
        except OSError as exc:  # the probe's own fixture failed: say so, go on
            record(Outcome(probe.name, probe.kind, False, None, 0.0, [f"setup failed: {exc}"]))
            continue
        rc, out, seconds = evalkit(probe.argv, work, probe.env, probe.timeout, probe.stdin)
        record(judge(probe, work, rc, out, seconds))
    if not args.only and (not kinds or "signals" in kinds):
        for sig, dp, name in [
            (signal.SIGINT, False, "SIGINT"),
            (signal.SIGTERM, False, "SIGTERM"),
            (signal.SIGKILL, False, "SIGKILL"),
            (signal.SIGINT, True, "SIGINT-dp2"),
            (signal.SIGTERM, True, "SIGTERM-dp2"),
            (signal.SIGKILL, True, "SIGKILL-dp2"),
        ]:
            record(signal_probe(work, sig, dp, name))
    if not args.only and (not kinds or "serve" in kinds):
        for o in serve_probes(work):
            record(o)
    failed = [o for o in outcomes if not o.ok]
    print(f"{len(outcomes)} probes, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
