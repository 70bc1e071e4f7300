"""`evalkit cache-probe --server URL`: does the server's answer depend on its prefix cache?

Exit codes: 0 no dependence shown, 1 answers depend on the prefix cache, 2 a usage or input error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from evalkit.errors import InputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "exit codes: 0 no dependence shown, 1 answers depend on the prefix cache, 2 usage or input error"
    )
    parser.add_argument("--server", required=True, help="the server's URL (host:port, http://host:port/v1)")
    parser.add_argument("--model", help="the served model's name (default: the only one it serves)")
    parser.add_argument("--limit", type=int, default=20, help="GSM8K test questions to probe (20)")
    parser.add_argument("--shots", type=int, default=8, help="few-shot examples in the shared prefix (8)")
    parser.add_argument("--max-tokens", type=int, default=64, help="greedy tokens per answer (64)")
    parser.add_argument(
        "--alpha", type=float, default=0.05, help="level of the paired tests, Holm over both (0.05)"
    )
    parser.add_argument("--seed", type=int, default=1234, help="`seed` sent with each request (1234)")
    parser.add_argument("--timeout", type=float, default=600.0, help="per-request timeout, seconds (600)")
    parser.add_argument(
        "--max-retries", type=int, default=3, help="the openai client's retries per request (3)"
    )
    parser.add_argument(
        "--api-key", help="key sent as `Authorization: Bearer` (default: OPENAI_API_KEY); never stored"
    )
    parser.add_argument(
        "--no-flush",
        action="store_true",
        help="never flush the server's cache (a shared server: other users' prefixes stay cached); "
        "cold answers then come from a unique prefix",
    )
    parser.add_argument("--out", required=True, help="directory for cache_probe.json and cache_probe.md")


def _check(args: argparse.Namespace) -> None:
    for flag in ("limit", "max_tokens"):
        if getattr(args, flag) < 1:
            raise InputError(f"--{flag.replace('_', '-')} must be at least 1")
    if args.shots < 0:
        raise InputError("--shots must be 0 or more")
    if not 0.0 < args.alpha < 1.0:
        raise InputError("--alpha must lie in (0, 1)")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} exists and is not a directory")


def main(args: argparse.Namespace) -> int:
    import openai

    from evalkit.backends.openai_remote import OpenAIBackend
    from evalkit.cache_probe import report
    from evalkit.cache_probe.probe import cold_method, probe_all
    from evalkit.cache_probe.prompts import gsm8k_prompts
    from evalkit.cache_probe.server import ProbeServer
    from evalkit.cache_probe.verdict import judge
    from evalkit.redact import redact_command
    from evalkit.store.manifest import base_manifest, now_utc

    _check(args)
    api_key = args.api_key or os.environ.get("OPENAI_API_KEY")
    backend = OpenAIBackend(
        [args.server], model=args.model, timeout=args.timeout, max_retries=args.max_retries, api_key=api_key
    )
    argv = ["evalkit", "cache-probe", *sys.argv[2:]] if sys.argv[1:2] == ["cache-probe"] else sys.argv
    manifest = base_manifest(redact_command(argv))
    base_url = backend.base_urls[0]
    description = backend.describe()
    client = openai.OpenAI(
        base_url=base_url, api_key=api_key or "EMPTY", max_retries=args.max_retries, timeout=args.timeout
    )
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    server = ProbeServer(client, base_url, backend.model, headers=headers, seed=args.seed)
    try:
        if not args.no_flush:
            server.find_flush()
        prompts = gsm8k_prompts(args.limit, args.shots)
        print(f"probing {len(prompts)} questions, cold by {cold_method(server)}", file=sys.stderr)
        probes = probe_all(server, prompts, args.max_tokens)
    except openai.APIError as exc:
        raise InputError(f"{base_url}: {type(exc).__name__}: {exc}") from None
    finally:
        client.close()
        backend.close()
    result = judge(probes, cold_method(server), args.alpha)
    manifest.update(
        server={
            "base_url": base_url,
            "model": backend.model,
            "server_config": description["server_config"][base_url],
            "server_versions": description["server_versions"],
        },
        settings={
            "questions": "gsm8k test, shipped copy",
            "limit": args.limit,
            "shots": args.shots,
            "max_tokens": args.max_tokens,
            "seed": args.seed,
            "temperature": 0.0,
            "alpha": args.alpha,
            "no_flush": args.no_flush,
        },
        finished_at=now_utc(),
    )
    report.write(Path(args.out), manifest, result, probes)
    print(result.verdict)
    print(f"-> {Path(args.out) / report.JSON_NAME}", file=sys.stderr)
    return 1 if result.depends else 0
