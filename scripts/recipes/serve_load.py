"""Load on `evalkit serve`: C concurrent HTTP clients x R requests each against a tiny random
Kimi-Linear checkpoint on the CPU; reports answered/lost requests, wall time, requests/s and the
engine's mean decode batch size, next to the same requests sent one client at a time.

    python scripts/recipes/serve_load.py --out results/serve [--clients 64 --requests 8 --max-tokens 3]

Takes about a minute on 2 CPU cores. Writes load.json and load.md under --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import tempfile
import time
from pathlib import Path


async def _client(url: str, c: int, n: int, max_tokens: int) -> list[str]:
    import httpx

    out = []
    async with httpx.AsyncClient(base_url=url, timeout=600) as http:
        for k in range(n):
            r = await http.post(
                "/completions",
                json={"prompt": f"Question {c}-{k}: how many?", "max_tokens": max_tokens, "ignore_eos": True},
            )
            r.raise_for_status()
            out.append(r.json()["choices"][0]["text"])
    return out


def measure(engine, clients: int, requests: int, max_tokens: int) -> dict:
    import httpx

    from evalkit.serve.server import Server

    async def all_clients(url: str):
        return await asyncio.gather(*(_client(url, c, requests, max_tokens) for c in range(clients)))

    with Server(engine, model_name="tiny") as srv:
        t0 = time.perf_counter()
        got = asyncio.run(all_clients(srv.url))
        wall = time.perf_counter() - t0
        health = httpx.get(srv.url[: -len("/v1")] + "/health").json()
    answered = sum(len(g) for g in got)
    return {
        "clients": clients,
        "requests_per_client": requests,
        "max_tokens": max_tokens,
        "answered": answered,
        "lost": clients * requests - answered,
        "wall_s": round(wall, 2),
        "requests_per_s": round(answered / wall, 2),
        "mean_batch_size": round(health["mean_batch_size"], 2),
        "max_batch": health["max_batch"],
        "decode_steps": health["decode_steps"],
        "failed": health["failed"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/serve")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=3)
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "evalkit-serve-load"))
    a = ap.parse_args()

    import torch

    from evalkit.engine import LLMEngine
    from evalkit.testing.tiny_models import build_tiny_checkpoint

    torch.set_num_threads(1)
    ckpt = build_tiny_checkpoint(Path(a.workdir) / "tiny-hybrid", kind="hybrid")
    results = {}
    for name, clients, requests in (("concurrent", a.clients, a.requests), ("one_client", 1, a.requests * 4)):
        engine = LLMEngine(str(ckpt), state_dtype="fp32", device="cpu", max_num_seqs=64)
        print(f"{name}: {clients} clients x {requests} requests ...", flush=True)
        try:
            results[name] = measure(engine, clients, requests, a.max_tokens)
        except Exception as exc:  # noqa: BLE001 -- keep what the other part measured
            results[name] = {"error": repr(exc)}
        print(json.dumps(results[name]), flush=True)
    info = {
        "machine": f"{platform.node()} ({platform.processor() or platform.machine()}), "
        f"{torch.get_num_threads()} torch thread",
        "checkpoint": "tiny hybrid (4 layers, 128 hidden)",
        "command": f"python scripts/recipes/serve_load.py --out {a.out} --clients {a.clients} "
        f"--requests {a.requests} --max-tokens {a.max_tokens}",
    }
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "load.json").write_text(json.dumps({**info, **results}, indent=1) + "\n")
    c, s = results.get("concurrent", {}), results.get("one_client", {})
    md = [
        "# evalkit serve under load\n",
        f"- machine: {info['machine']}",
        f"- model: {info['checkpoint']}",
        f"- command: `{info['command']}`\n",
        "| run | clients x requests | answered | lost | wall s | req/s | mean decode batch | max batch |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in (("concurrent", c), ("one client", s)):
        if "error" in r:
            md.append(f"| {name} | error: {r['error']} | | | | | | |")
        else:
            md.append(
                f"| {name} | {r['clients']} x {r['requests_per_client']} | {r['answered']} | "
                f"{r['lost']} | {r['wall_s']} | {r['requests_per_s']} | {r['mean_batch_size']} | "
                f"{r['max_batch']} |"
            )
    (out / "load.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
