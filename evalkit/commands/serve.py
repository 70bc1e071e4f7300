"""`evalkit serve`: an OpenAI-compatible server over the in-process engine, so lm-eval
(`local-completions`), vLLM's benchmark clients or `evalkit run --server` can drive it."""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import sys
from pathlib import Path

from evalkit.commands.kernels_option import add_kernels_argument, kernels_from_args
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
    add_kernels_argument(parser)
    parser.add_argument(
        "--api-key",
        default=os.environ.get("EVALKIT_API_KEY"),
        help="require `Authorization: Bearer KEY` on /v1/* (also EVALKIT_API_KEY)",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=float,
        default=30.0,
        help="on SIGTERM/SIGINT, seconds in-flight requests may take before they are aborted (30)",
    )
    parser.add_argument("--max-body-mb", type=float, default=8.0, help="largest request body, MiB (8)")
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow code shipped in the checkpoint's tokenizer folder to run (off by default)",
    )
    parser.add_argument(
        "--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug")
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check(args: argparse.Namespace) -> None:
    if not (0 <= args.port < 65536):
        raise InputError(f"--port {args.port} is not a TCP port")
    if not (math.isfinite(args.shutdown_timeout) and args.shutdown_timeout >= 0):
        raise InputError(f"--shutdown-timeout must be a number of seconds >= 0, got {args.shutdown_timeout}")
    if not (math.isfinite(args.max_body_mb) and args.max_body_mb * (1 << 20) >= 1):
        raise InputError(f"--max-body-mb must be a positive number of MiB, got {args.max_body_mb}")
    if args.max_num_seqs is not None and args.max_num_seqs < 1:
        raise InputError("--max-num-seqs must be at least 1")
    if args.port_file:
        folder = Path(args.port_file).resolve().parent
        if not folder.is_dir():
            raise InputError(f"--port-file {args.port_file}: the folder {folder} does not exist")
        if not os.access(folder, os.W_OK):
            raise InputError(f"--port-file {args.port_file}: the folder {folder} is not writable")
    if args.api_key == "":
        raise InputError("--api-key is empty")


def main(args: argparse.Namespace) -> int:
    from evalkit.backends.local import LocalBackend
    from evalkit.runner.setup import check_device, default_model, parse_local_arm
    from evalkit.serve.server import Server, bind

    _check(args)
    arm = parse_local_arm(args.arm)
    check_device(args.device)
    try:  # before the model loads: a busy port is reported in a second, not after minutes
        sock = bind(args.host, args.port)
    except OSError as exc:
        raise InputError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from exc
    if args.api_key is None and not is_loopback(args.host):
        print(
            f"evalkit serve: warning: listening on {args.host} without --api-key: anyone who can reach "
            "this address can use the model",
            file=sys.stderr,
            flush=True,
        )
    model = args.model or default_model()[0]
    backend = LocalBackend(
        model,
        arm=arm,
        kernels=kernels_from_args(args),
        device=args.device,
        max_num_seqs=args.max_num_seqs,
        trust_remote_code=args.trust_remote_code,
    )
    name = args.served_model_name or args.model or "evalkit-reference"
    aliases = tuple(x for x in (model, args.model) if x and x != name)
    server = Server(
        backend.engine,
        model_name=name,
        host=args.host,
        aliases=aliases,
        log_level=args.log_level,
        shutdown_timeout_s=args.shutdown_timeout,
        sock=sock,
        api_key=args.api_key,
        max_body_bytes=int(args.max_body_mb * (1 << 20)),
    )
    print(
        f"evalkit serve: {name} (state {arm.label}) on {server.url}  "
        f"[/v1/models /v1/completions /v1/chat/completions /health /metrics]",
        flush=True,
    )
    if args.port_file:
        try:
            server.write_port_file(args.port_file)
        except OSError as exc:
            raise InputError(f"--port-file {args.port_file}: {exc.strerror or exc}") from exc
    server.run()
    stats = server.loop.stats.as_dict()
    print(
        f"evalkit serve: stopped after {stats['finished']} requests ({stats['aborted']} aborted), mean "
        f"batch size {stats['mean_batch_size']:.2f} (max {stats['max_batch']})",
        flush=True,
    )
    return 0
