"""The FastAPI application: OpenAI-compatible endpoints over an `EngineLoop`.

Greedy unless `temperature` > 0: then the engine's coupled sampler draws (keyed by `seed`, the
choice's index and the position, so a seeded request is reproducible and two arms given the same
seed are coupled). `/v1/completions` returns log-probabilities (`logprobs=k`) and, with `echo`,
the prompt's (`max_tokens=0` scores the prompt alone), as vLLM does; chat, with `logprobs` and
`top_logprobs`, those of the generated tokens; streamed (`stream: true`), each chunk carries the
log-probabilities of the tokens it sends, as vLLM streams them. Text prompts are tokenized
as vLLM does (completions: with the tokenizer's special tokens;
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
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from evalkit import __version__
from evalkit.errors import EvalkitError
from evalkit.serve.engine_loop import Aborted, EngineLoop, Finished, Handle, ShuttingDown
from evalkit.serve.guards import Guards
from evalkit.serve.logprobs import StreamLogprobs, chat_logprobs, completion_logprobs
from evalkit.serve.metrics import metrics_registry, render
from evalkit.serve.protocol import (
    DEFAULT_COMPLETION_TOKENS,
    MAX_CHOICES,
    APIError,
    ChatRequest,
    CompletionRequest,
)
from evalkit.serve.tokenize import TokenizerLanes

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


# ---- errors as OpenAI-style JSON -------------------------------------------------------------


def error_json(error: APIError) -> Response:
    """The error as JSON; a message that echoes a lone surrogate (say a fuzzed `model` name) cannot
    be encoded as UTF-8, so it is sent \\u-escaped rather than failing with a 500."""
    try:
        return JSONResponse(error.body(), status_code=error.status)
    except UnicodeEncodeError:
        return Response(json.dumps(error.body()), status_code=error.status, media_type="application/json")


async def api_error_response(_: Request, exc: APIError) -> Response:
    return error_json(exc)


async def validation_error_response(_: Request, exc: RequestValidationError) -> Response:
    err = exc.errors()[0] if exc.errors() else {}
    if err.get("type") == "json_invalid":  # loc is ("body", character offset): not a parameter
        why = (err.get("ctx") or {}).get("error", "")
        return error_json(APIError(400, f"the body is not valid JSON: {why}"))
    loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
    msg = f"{loc}: {err.get('msg', 'invalid request')}" if loc else err.get("msg", "invalid request")
    return error_json(APIError(400, msg, param=loc or None))


async def http_error_response(_: Request, exc: StarletteHTTPException) -> Response:
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    return error_json(APIError(exc.status_code, str(exc.detail), type_=kind))


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


# ---- small pieces of a response ---------------------------------------------------------------


def max_tokens_of(req: Any, default: int) -> int:
    for v in (req.max_completion_tokens, req.max_tokens):
        if v is not None:
            return int(v)
    return default


def decode_ids(tokenizer: Any, ids: list[int]) -> str:
    return tokenizer.decode(ids)


def usage(outs: list[Finished], n: int = 1) -> dict[str, int]:
    """Token counts; with `n` choices per prompt the prompt counts once, as OpenAI counts it."""
    p = sum(o.n_prompt for o in outs[::n])
    c = sum(o.n_generated for o in outs)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def sse(obj: Any) -> str:
    return f"data: {json.dumps(obj)}\n\n"


def stream_chunk(
    base: dict[str, Any],
    chat: bool,
    text: str | None,
    finish: str | None,
    first: bool = False,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One server-sent event's object: a chat delta or a completion's text piece, with the
    log-probabilities of the tokens it sends when they were asked for."""
    if chat:
        delta: dict[str, Any] = (
            {"role": "assistant", "content": ""} if first else ({"content": text} if text else {})
        )
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": logprobs}
    else:
        choice = {"index": 0, "text": text or "", "finish_reason": finish, "logprobs": logprobs}
    return {**base, "choices": [choice]}


async def until_disconnected(request: Request) -> None:
    """Returns once the client has gone (the body is already read, so only that message is left)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class ServeHandlers:
    """The endpoints of one served model: what they share (the engine loop, the tokenizer, the
    model's names and limits) is held here; `create_app` routes to the methods."""

    def __init__(
        self,
        loop: EngineLoop,
        tokenizer: Any,
        make_params: ParamsFactory,
        *,
        model_name: str,
        describe: dict[str, Any],
        max_model_len: int | None,
        vocab_size: int | None,
        aliases: tuple[str, ...],
    ) -> None:
        self.loop = loop
        self.tokenizer = tokenizer
        self.make_params = make_params
        self.model_name = model_name
        self.describe = describe
        self.max_model_len = max_model_len
        # tokenizing a long prompt takes seconds: off the event loop, in lanes by length, so /health,
        # streams and short requests stay responsive meanwhile
        self.lanes = TokenizerLanes(tokenizer)
        self.fp = fingerprint(describe)
        self.names = {model_name, *aliases}
        self.vocab = vocab_size or (len(tokenizer) if hasattr(tokenizer, "__len__") else None)
        self.created = int(time.time())
        self.registry = metrics_registry(loop, model_name)

    # ---- checks ----------------------------------------------------------------------------

    def check_common(self, req: Any) -> None:
        if req.model is not None and req.model not in self.names:
            raise APIError(
                404,
                f"The model `{req.model}` does not exist; this server serves `{self.model_name}`.",
                param="model",
                type_="not_found_error",
            )
        if req.stream and req.n != 1:
            raise APIError(400, "streaming takes n=1", param="n")
        cap_name = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
        cap = max_tokens_of(req, -1)  # the cap generation obeys; -1: none given
        if req.min_tokens and cap >= 0 and req.min_tokens > cap:
            message = f"min_tokens ({req.min_tokens}) must not exceed {cap_name} ({cap})"
            raise APIError(400, message, param="min_tokens")

    def check_ids(self, ids: list[int], max_tokens: int) -> None:
        """The length first (constant time), then each id: a long id list costs one pass at most."""
        if not ids:
            raise APIError(400, "the prompt is empty", param="prompt")
        if self.max_model_len is not None and len(ids) + max_tokens > self.max_model_len:
            raise APIError(
                400,
                f"prompt ({len(ids)} tokens) + max_tokens ({max_tokens}) exceeds the model's "
                f"{self.max_model_len}",
                param="max_tokens",
            )
        if self.vocab is not None and any(not (0 <= t < self.vocab) for t in ids):
            raise APIError(400, f"prompt token ids must lie in [0, {self.vocab})", param="prompt")

    def check_choices(self, n_prompts: int, n: int) -> None:
        if n_prompts * n > MAX_CHOICES:
            raise APIError(
                400, f"{n_prompts} prompts x n={n} exceeds {MAX_CHOICES} choices per request", param="n"
            )

    # ---- generation ------------------------------------------------------------------------

    async def tokenize(self, prompt: Any, param: str) -> list[int]:
        """Token ids of a text or chat prompt (ids pass through); a text whose length alone shows
        it cannot fit the context is refused before any tokenizing."""
        why = self.lanes.too_long(prompt, self.max_model_len)
        if why:
            raise APIError(400, why, param=param)
        try:
            return await self.lanes.encode(prompt)
        except Exception as exc:  # noqa: BLE001 -- e.g. a lone surrogate, or a template that rejects the roles
            raise APIError(400, f"cannot tokenize the {param}: {exc}", param=param) from exc

    def params_for(self, req: Any, max_tokens: int, sample_index: int = 0, **logprobs: Any) -> Any:
        try:
            return self.make_params(
                max_tokens=max_tokens,
                stop=req.stop_list(),
                ignore_eos=req.ignore_eos,
                min_tokens=req.min_tokens,
                **req.sampling(sample_index),
                **logprobs,
            )
        except EvalkitError as exc:  # a value the engine refuses (the protocol checks most first)
            raise APIError(400, str(exc)) from exc

    async def run_all(self, request: Request, jobs: list[tuple[list[int], Any]]) -> list[Finished]:
        """Generate every (prompt ids, params); if the client disconnects first, abort them all."""
        handles = [self.loop.submit(ids, params) for ids, params in jobs]
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
                    self.loop.cancel(h)

    async def stream(
        self,
        request: Request,
        ids: list[int],
        req: Any,
        max_tokens: int,
        chat: bool,
        asked: dict[str, Any] | None = None,
    ) -> AsyncIterator[str]:
        """Server-sent events; with `asked` log-probabilities (`logprobs=k`), each text chunk
        carries those of the tokens generated since the previous one, as vLLM streams them."""
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        obj = "chat.completion.chunk" if chat else "text_completion"
        base = {
            "id": rid,
            "object": obj,
            "created": int(time.time()),
            "model": self.model_name,
            "system_fingerprint": self.fp,
        }
        handle: Handle = self.loop.submit(ids, self.params_for(req, max_tokens, **(asked or {})), stream=True)
        st = StreamText(self.tokenizer, req.stop_list())
        lps = StreamLogprobs(self.tokenizer, chat) if asked else None
        gone = asyncio.ensure_future(until_disconnected(request))
        getter: asyncio.Future | None = None
        try:
            if chat:
                yield sse(stream_chunk(base, chat, None, None, first=True))
            while not handle.future.done():
                getter = asyncio.ensure_future(handle.stream.get())
                await asyncio.wait({getter, handle.future, gone}, return_when=asyncio.FIRST_COMPLETED)
                if gone.done():  # the client left: free its slot now, not when decoding ends
                    getter.cancel()
                    self.loop.cancel(handle)
                    return
                if getter.done():
                    token_ids, token_logprobs = getter.result()
                    piece = st.delta(token_ids)
                    if piece:
                        chunk_lps = lps.take(token_logprobs) if lps is not None else None
                        yield sse(stream_chunk(base, chat, piece, None, logprobs=chunk_lps))
                else:
                    getter.cancel()
            try:
                out = handle.future.result()
            except Exception as exc:  # noqa: BLE001 -- report in-band, the status is already sent
                yield sse(api_error(exc).body())
                yield "data: [DONE]\n\n"
                return
            rest = st.final(out.text)
            rest_lps = lps.take(out.logprobs) if lps is not None else None  # the tokens not yet sent
            if rest or rest_lps:
                yield sse(stream_chunk(base, chat, rest, None, logprobs=rest_lps))
            yield sse(stream_chunk(base, chat, None, FINISH.get(out.finish_reason, out.finish_reason)))
            if (req.stream_options or {}).get("include_usage"):
                yield sse({**base, "choices": [], "usage": usage([out])})
            yield "data: [DONE]\n\n"
        finally:  # an abandoned stream (the client left mid-wait) leaves no task pending forever
            gone.cancel()
            if getter is not None:
                getter.cancel()
            if not handle.future.done():
                self.loop.cancel(handle)

    # ---- endpoints -------------------------------------------------------------------------

    async def models(self) -> dict[str, Any]:
        card = {
            "id": self.model_name,
            "object": "model",
            "created": self.created,
            "owned_by": "evalkit",
            "root": self.describe.get("model", {}).get("path", self.model_name),
        }
        if self.max_model_len:
            card["max_model_len"] = self.max_model_len
        return {"object": "list", "data": [card]}

    async def version(self, request: Request) -> dict[str, Any]:
        """With `--api-key`, a caller without the key learns only the version (not the model's
        absolute path or fingerprints: `Guards` marks whether the key was given)."""
        if not request.scope.get("state", {}).get("authorized", True):
            return {"version": f"evalkit {__version__}"}
        return {"version": f"evalkit {__version__}", "engine": self.describe, "system_fingerprint": self.fp}

    async def health(self) -> JSONResponse:
        ok = self.loop.alive
        body = {
            "status": "ok" if ok else "engine loop stopped",
            "model": self.model_name,
            "state_dtype": self.describe.get("state_dtype"),
            **self.loop.stats.as_dict(),
        }
        return JSONResponse(body, status_code=200 if ok else 503)

    async def metrics(self) -> Response:
        body, content_type = render(self.registry)
        return Response(body, media_type=content_type)

    async def completions(self, req: CompletionRequest, request: Request) -> Any:
        self.check_common(req)
        p = req.prompt
        prompts: list[Any] = [p] if isinstance(p, str) or (p and isinstance(p[0], int)) else list(p)
        if not prompts:
            raise APIError(400, "the prompt is empty", param="prompt")
        max_tokens = max_tokens_of(req, DEFAULT_COMPLETION_TOKENS)
        if max_tokens == 0 and not req.echo:
            raise APIError(
                400, "max_tokens=0 needs echo=true (it scores the prompt alone)", param="max_tokens"
            )
        self.check_choices(len(prompts), req.n)
        ids = [await self.tokenize(x, "prompt") for x in prompts]
        for x in ids:
            self.check_ids(x, max_tokens)
        if req.stream:
            if len(ids) != 1:
                raise APIError(400, "streaming takes one prompt", param="prompt")
            if req.echo:
                raise APIError(400, "echo is not streamed: use stream=false", param="stream")
            asked_stream = {"logprobs": req.logprobs} if req.logprobs is not None else None
            return StreamingResponse(
                self.stream(request, ids[0], req, max_tokens, chat=False, asked=asked_stream),
                media_type="text/event-stream",
            )
        asked: dict[str, Any] = {}
        if req.logprobs is not None:
            asked["logprobs"] = req.logprobs
            if req.echo:
                asked["prompt_logprobs"] = req.logprobs
        jobs = [(x, self.params_for(req, max_tokens, j, **asked)) for x in ids for j in range(req.n)]
        outs = await self.run_all(request, jobs)
        choices = []
        for i, o in enumerate(outs):
            prompt, prompt_ids = prompts[i // req.n], ids[i // req.n]
            echo_text = None
            if req.echo:
                echo_text = (
                    prompt
                    if isinstance(prompt, str)
                    else await self.lanes.run(len(prompt_ids), decode_ids, prompt_ids)
                )
            logprobs = None
            if req.logprobs is not None:  # decodes every token: off the event loop, as tokenizing
                logprobs = await self.lanes.run(
                    len(prompt_ids) if req.echo else o.n_generated,
                    completion_logprobs,
                    o.logprobs or [],
                    echo_text,
                    prompt,
                    prompt_ids,
                    o.prompt_logprobs,
                )
            choices.append(
                {
                    "index": i,
                    "text": (echo_text or "") + o.text,
                    "logprobs": logprobs,
                    "finish_reason": FINISH.get(o.finish_reason, o.finish_reason),
                    "evalkit_flags": o.flags,
                }
            )
        return {
            "id": "cmpl-" + uuid.uuid4().hex,
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
            "system_fingerprint": self.fp,
            "choices": choices,
            "usage": usage(outs, req.n),
        }

    async def chat(self, req: ChatRequest, request: Request) -> Any:
        self.check_common(req)
        messages = [{"role": m.role, "content": m.text()} for m in req.messages]
        ids = await self.tokenize(messages, "messages")
        max_tokens = max_tokens_of(req, max(1, (self.max_model_len or 4096) - len(ids)))
        self.check_ids(ids, max_tokens)
        if req.top_logprobs is not None and not req.logprobs:
            raise APIError(400, "top_logprobs needs logprobs=true", param="top_logprobs")
        asked = {"logprobs": req.top_logprobs or 0} if req.logprobs else {}
        if req.stream:
            return StreamingResponse(
                self.stream(request, ids, req, max_tokens, chat=True, asked=asked or None),
                media_type="text/event-stream",
            )
        jobs = [(ids, self.params_for(req, max_tokens, j, **asked)) for j in range(req.n)]
        outs = await self.run_all(request, jobs)
        logprobs = [
            await self.lanes.run(o.n_generated, chat_logprobs, o.logprobs) if req.logprobs else None
            for o in outs
        ]
        return {
            "id": "chatcmpl-" + uuid.uuid4().hex,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "system_fingerprint": self.fp,
            "choices": [
                {
                    "index": j,
                    "message": {"role": "assistant", "content": out.text},
                    "logprobs": logprobs[j],
                    "finish_reason": FINISH.get(out.finish_reason, out.finish_reason),
                    "evalkit_flags": out.flags,
                }
                for j, out in enumerate(outs)
            ],
            "usage": usage(outs, req.n),
        }


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
    app.add_exception_handler(APIError, api_error_response)
    app.add_exception_handler(RequestValidationError, validation_error_response)
    app.add_exception_handler(StarletteHTTPException, http_error_response)
    h = ServeHandlers(
        loop,
        tokenizer,
        make_params,
        model_name=model_name,
        describe=describe,
        max_model_len=max_model_len,
        vocab_size=vocab_size,
        aliases=aliases,
    )
    app.get("/v1/models")(h.models)
    app.get("/version")(h.version)
    app.get("/health")(h.health)
    app.get("/metrics")(h.metrics)
    app.post("/v1/completions")(h.completions)
    app.post("/v1/chat/completions")(h.chat)
    return app
