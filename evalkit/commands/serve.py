"""`evalkit serve`: an OpenAI-compatible server over the in-process engine, so lm-eval
(`local-completions`), vLLM's benchmark clients or `evalkit run --server` can drive it."""

from __future__ import annotations

import argparse

from evalkit.errors import InputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="checkpoint dir or hub id (default: the embedded reference model)")
    parser.add_argument(
        "--arm",
        required=True,
        help="how the recurrent state is stored: FORMAT[@chunk=N][@intra=DTYPE] (evalkit/arm.py), e.g. fp16",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (8000; 0 picks a free one)")
    parser.add_argument("--port-file", help="write the bound port to this file once listening")
    parser.add_argument("--served-model-name", help="the model name clients send (default: --model)")
    parser.add_argument("--max-num-seqs", type=int, help="most sequences decoded together")
    parser.add_argument("--device", help="cpu | cuda | cuda:N")
    parser.add_argument(
        "--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug")
    )


def main(args: argparse.Namespace) -> int:
    from evalkit.backends.local import LocalBackend
    from evalkit.runner.setup import default_model, parse_local_arm
    from evalkit.serve.server import Server

    if not (0 <= args.port < 65536):
        raise InputError(f"--port {args.port} is not a TCP port")
    arm = parse_local_arm(args.arm)
    model = args.model or default_model()[0]
    backend = LocalBackend(model, arm=arm, device=args.device, max_num_seqs=args.max_num_seqs)
    name = args.served_model_name or args.model or "evalkit-reference"
    aliases = tuple(x for x in (model, args.model) if x and x != name)
    try:
        server = Server(
            backend.engine,
            model_name=name,
            host=args.host,
            port=args.port,
            aliases=aliases,
            log_level=args.log_level,
        )
    except OSError as exc:
        raise InputError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from exc
    print(
        f"evalkit serve: {name} (state {arm.label}) on {server.url}  "
        f"[/v1/models /v1/completions /v1/chat/completions /health /metrics]",
        flush=True,
    )
    if args.port_file:
        server.write_port_file(args.port_file)
    server.run()
    stats = server.loop.stats.as_dict()
    print(
        f"evalkit serve: stopped after {stats['finished']} requests, mean batch size "
        f"{stats['mean_batch_size']:.2f} (max {stats['max_batch']})",
        flush=True,
    )
    return 0
