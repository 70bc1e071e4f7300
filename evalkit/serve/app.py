"""The FastAPI application: OpenAI-compatible endpoints over an `EngineLoop`.

Greedy only (evalkit measures a deterministic decoder): `temperature` must be absent or 0.
Text prompts are tokenized as vLLM does (completions: with the tokenizer's special tokens;
chat: the chat template with a generation prompt, no extra special tokens), through the same
function the local backend uses, so `evalkit run --server` equals `evalkit run --model`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from evalkit import __version__
from evalkit.backends.local import encode_prompt
from evalkit.errors import EvalkitError
from evalkit.serve.engine_loop import Aborted, EngineLoop, Finished, Handle, ShuttingDown
from evalkit.serve.guards import Guards
from evalkit.serve.metrics import metrics_registry, render
from evalkit.serve.protocol import DEFAULT_COMPLETION_TOKENS, APIError, ChatRequest, CompletionRequest

DEFAULT_MAX_BODY_BYTES = 8 << 20  # a 139k-token prompt is about 1 MB, as text or as token ids
FINISH = {"eos": "stop", "stop": "stop", "length": "length"}
ParamsFactory = Callable[..., Any]


def fingerprint(describe: dict[str, Any]) -> str:
    """Stable id of what answers (model config and arm): clients record it per response."""
    blob = json.dumps(describe, sort_keys=True, default=str).encode()
    return "fp_" + hashlib.sha256(blob).hexdigest()[:16]


class StreamText:
    """Turns token snapshots into text deltas that never need retracting: it holds back a
    possible stop-string prefix and an incomplete UTF-8 character until the next snapshot."""

    def __init__(self, tokenizer: Any, stop: list[str]) -> None:
        self.tokenizer = tokenizer
        self.stop = stop
        self.hold = max((len(s) for s in stop), default=1) - 1
        self.sent = ""

    def delta(self, token_ids: list[int]) -> str:
        text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
        for s in self.stop:
            i = text.find(s)
            if i != -1:
                text = text[:i]
        safe = text[: len(text) - self.hold] if self.hold else text
        safe = safe.rstrip("\ufffd")
        if len(safe) <= len(self.sent) or not safe.startswith(self.sent):
            return ""
        out, self.sent = safe[len(self.sent) :], safe
        return out

    def final(self, text: str) -> str:
        out = text[len(self.sent) :] if text.startswith(self.sent) else ""
        self.sent = text
        return out


def create_app(
    loop: EngineLoop,
    tokenizer: Any,
    make_params: ParamsFactory,
    *,
    model_name: str,
    describe: dict[str, Any],
    max_model_len: int | None = None,
    vocab_size: int | None = None,
    aliases: tuple[str, ...] = (),
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> FastAPI:
    app = FastAPI(title="evalkit serve", version=__version__)
    app.add_middleware(Guards, api_key=api_key, max_body_bytes=max_body_bytes)
    # tokenizing a long prompt takes seconds: do it off the event loop (one thread: the tokenizer
    # is not shared between threads) so /health and streams stay responsive meanwhile
    tokenizer_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalkit-tokenize")
    fp = fingerprint(describe)
    names = {model_name, *aliases}
    vocab = vocab_size or (len(tokenizer) if hasattr(tokenizer, "__len__") else None)
    created = int(time.time())

    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0] if exc.errors() else {}
        if err.get("type") == "json_invalid":  # loc is ("body", character offset): not a parameter
            why = (err.get("ctx") or {}).get("error", "")
            return JSONResponse(APIError(400, f"the body is not valid JSON: {why}").body(), status_code=400)
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        msg = f"{loc}: {err.get('msg', 'invalid request')}" if loc else err.get("msg", "invalid request")
        return JSONResponse(APIError(400, msg, param=loc or None).body(), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return JSONResponse(
            APIError(exc.status_code, str(exc.detail), type_=kind).body(), status_code=exc.status_code
        )

    # ---- helpers ---------------------------------------------------------------------------

    def check_common(req: Any) -> None:
        if req.model is not None and req.model not in names:
            raise APIError(
                404,
                f"The model `{req.model}` does not exist; this server serves `{model_name}`.",
                param="model",
                type_="not_found_error",
            )
        if req.temperature not in (None, 0, 0.0):
            raise APIError(400, "evalkit serve decodes greedily: temperature must be 0", param="temperature")
        if req.n != 1:
            raise APIError(400, "n must be 1", param="n")
        if req.logprobs not in (None, False, 0):
            raise APIError(400, "logprobs are not supported by evalkit serve", param="logprobs")
        if req.min_tokens and req.max_tokens is not None and req.min_tokens > req.max_tokens:
            raise APIError(400, "min_tokens must not exceed max_tokens", param="min_tokens")

    async def tokenize(prompt: Any, param: str) -> list[int]:
        try:
            return await asyncio.get_running_loop().run_in_executor(
                tokenizer_thread, encode_prompt, tokenizer, prompt
            )
        except Exception as exc:  # noqa: BLE001 -- e.g. a lone surrogate, or a template that rejects the roles
            raise APIError(400, f"cannot tokenize the {param}: {exc}", param=param) from exc

    def check_ids(ids: list[int], max_tokens: int) -> None:
        if not ids:
            raise APIError(400, "the prompt is empty", param="prompt")
        if vocab is not None and any(not (0 <= t < vocab) for t in ids):
            raise APIError(400, f"prompt token ids must lie in [0, {vocab})", param="prompt")
        if max_model_len is not None and len(ids) + max_tokens > max_model_len:
            raise APIError(
                400,
                f"prompt ({len(ids)} tokens) + max_tokens ({max_tokens}) exceeds the model's {max_model_len}",
                param="max_tokens",
            )

    def params_for(req: Any, max_tokens: int) -> Any:
        return make_params(
            max_tokens=max_tokens, stop=req.stop_list(), ignore_eos=req.ignore_eos, min_tokens=req.min_tokens
        )

    def api_error(exc: BaseException) -> APIError:
        """The HTTP error for a request the engine did not finish."""
        if isinstance(exc, APIError):
            return exc
        if isinstance(exc, ShuttingDown):
            return APIError(503, f"{exc}; retry on another replica", type_="server_error")
        if isinstance(exc, Aborted):
            return APIError(400, str(exc))
        if isinstance(exc, (ValueError, EvalkitError)):  # the engine refused the request (e.g. too long)
            return APIError(400, str(exc))
        return APIError(500, f"generation failed: {exc}", type_="server_error")

    async def until_disconnected(request: Request) -> None:
        """Returns once the client has gone (the body is already read, so only that message is left)."""
        while (await request.receive())["type"] != "http.disconnect":
            pass

    async def run_all(request: Request, prompts: list[list[int]], params: Any) -> list[Finished]:
        """Generate for every prompt; if the client disconnects first, abort them all in the engine."""
        handles = [loop.submit(ids, params) for ids in prompts]
        futures = [h.future for h in handles]
        gone = asyncio.ensure_future(until_disconnected(request))
        try:
            while True:
                failed = [f for f in futures if f.done() and f.exception() is not None]
                if failed:
                    raise api_error(failed[0].exception())  # type: ignore[arg-type]
                if all(f.done() for f in futures):
                    return [f.result() for f in futures]
                if gone.done():
                    raise APIError(400, "client disconnected")
                waiting = [f for f in futures if not f.done()]
                await asyncio.wait([*waiting, gone], return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            for h in handles:
                if not h.future.done():
                    loop.cancel(h)

    def usage(outs: list[Finished]) -> dict[str, int]:
        p = sum(o.n_prompt for o in outs)
        c = sum(o.n_generated for o in outs)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    def sse(obj: Any) -> str:
        return f"data: {json.dumps(obj)}\n\n"

    async def stream(
        request: Request, ids: list[int], req: Any, max_tokens: int, chat: bool
    ) -> AsyncIterator[str]:
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        obj = "chat.completion.chunk" if chat else "text_completion"
        base = {
            "id": rid,
            "object": obj,
            "created": int(time.time()),
            "model": model_name,
            "system_fingerprint": fp,
        }

        def chunk(text: str | None, finish: str | None, first: bool = False) -> dict[str, Any]:
            if chat:
                delta: dict[str, Any] = (
                    {"role": "assistant", "content": ""} if first else ({"content": text} if text else {})
                )
                choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            else:
                choice = {"index": 0, "text": text or "", "finish_reason": finish, "logprobs": None}
            return {**base, "choices": [choice]}

        handle: Handle = loop.submit(ids, params_for(req, max_tokens), stream=True)
        st = StreamText(tokenizer, req.stop_list())
        gone = asyncio.ensure_future(until_disconnected(request))
        try:
            if chat:
                yield sse(chunk(None, None, first=True))
            while not handle.future.done():
                getter = asyncio.ensure_future(handle.stream.get())
                await asyncio.wait({getter, handle.future, gone}, return_when=asyncio.FIRST_COMPLETED)
                if gone.done():  # the client left: free its slot now, not when decoding ends
                    getter.cancel()
                    loop.cancel(handle)
                    return
                if getter.done():
                    piece = st.delta(getter.result())
                    if piece:
                        yield sse(chunk(piece, None))
                else:
                    getter.cancel()
            try:
                out = handle.future.result()
            except Exception as exc:  # noqa: BLE001 -- report in-band, the status is already sent
                yield sse(api_error(exc).body())
                yield "data: [DONE]\n\n"
                return
            rest = st.final(out.text)
            if rest:
                yield sse(chunk(rest, None))
            yield sse(chunk(None, FINISH.get(out.finish_reason, out.finish_reason)))
            if (req.stream_options or {}).get("include_usage"):
                yield sse({**base, "choices": [], "usage": usage([out])})
            yield "data: [DONE]\n\n"
        finally:
            gone.cancel()
            if not handle.future.done():
                loop.cancel(handle)

    def max_tokens_of(req: Any, default: int) -> int:
        for v in (req.max_completion_tokens, req.max_tokens):
            if v is not None:
                return int(v)
        return default

    # ---- endpoints --------------------------------------------------------------------------

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {
            "id": model_name,
            "object": "model",
            "created": created,
            "owned_by": "evalkit",
            "root": describe.get("model", {}).get("path", model_name),
        }
        if max_model_len:
            card["max_model_len"] = max_model_len
        return {"object": "list", "data": [card]}

    @app.get("/version")
    async def version() -> dict[str, Any]:
        return {"version": f"evalkit {__version__}", "engine": describe, "system_fingerprint": fp}

    @app.get("/health")
    async def health() -> JSONResponse:
        ok = loop.alive
        body = {
            "status": "ok" if ok else "engine loop stopped",
            "model": model_name,
            "state_dtype": describe.get("state_dtype"),
            **loop.stats.as_dict(),
        }
        return JSONResponse(body, status_code=200 if ok else 503)

    registry = metrics_registry(loop, model_name)

    @app.get("/metrics")
    async def metrics() -> Response:
        body, content_type = render(registry)
        return Response(body, media_type=content_type)

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, request: Request) -> Any:
        check_common(req)
        if req.echo:
            raise APIError(400, "echo is not supported by evalkit serve", param="echo")
        p = req.prompt
        prompts: list[Any] = [p] if isinstance(p, str) or (p and isinstance(p[0], int)) else list(p)
        if not prompts:
            raise APIError(400, "the prompt is empty", param="prompt")
        max_tokens = max_tokens_of(req, DEFAULT_COMPLETION_TOKENS)
        ids = [await tokenize(x, "prompt") for x in prompts]
        for x in ids:
            check_ids(x, max_tokens)
        if req.stream:
            if len(ids) != 1:
                raise APIError(400, "streaming takes one prompt", param="prompt")
            return StreamingResponse(
                stream(request, ids[0], req, max_tokens, chat=False), media_type="text/event-stream"
            )
        outs = await run_all(request, ids, params_for(req, max_tokens))
        return {
            "id": "cmpl-" + uuid.uuid4().hex,
            "object": "text_completion",
            "created": int(time.time()),
            "model": model_name,
            "system_fingerprint": fp,
            "choices": [
                {
                    "index": i,
                    "text": o.text,
                    "logprobs": None,
                    "finish_reason": FINISH.get(o.finish_reason, o.finish_reason),
                    "evalkit_flags": o.flags,
                }
                for i, o in enumerate(outs)
            ],
            "usage": usage(outs),
        }

    @app.post("/v1/chat/completions")
    async def chat(req: ChatRequest, request: Request) -> Any:
        check_common(req)
        messages = [{"role": m.role, "content": m.text()} for m in req.messages]
        ids = await tokenize(messages, "messages")
        max_tokens = max_tokens_of(req, max(1, (max_model_len or 4096) - len(ids)))
        check_ids(ids, max_tokens)
        if req.stream:
            return StreamingResponse(
                stream(request, ids, req, max_tokens, chat=True), media_type="text/event-stream"
            )
        (out,) = await run_all(request, [ids], params_for(req, max_tokens))
        return {
            "id": "chatcmpl-" + uuid.uuid4().hex,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_name,
            "system_fingerprint": fp,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": out.text},
                    "logprobs": None,
                    "finish_reason": FINISH.get(out.finish_reason, out.finish_reason),
                    "evalkit_flags": out.flags,
                }
            ],
            "usage": usage([out]),
        }

    return app
