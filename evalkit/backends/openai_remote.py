"""The remote backend: any OpenAI-compatible server (vLLM, SGLang, ATOM, `evalkit serve`).

Why it is built this way:
- Greedy (temperature 0) with a fixed `seed`, so one server and a fleet of replicas give the
  same answers: questions are sharded across `--server` URLs from one shared queue. A sampled
  run's request carries its own temperature and seed (`GenRequest.sampling`), so any replica
  that honours seeds draws the same sample.
- A remote failure must never become a wrong answer. Transient failures (429, 5xx, timeouts,
  dropped connections, malformed JSON) are retried with exponential backoff and jitter, each
  retry on the next replica; after the last retry the request comes back with `error` set and
  the runner stores it unscored. The loop is ours, not the openai client's `max_retries` (set to
  0): the client retries on the same URL, while each retry here goes to the next replica and is
  counted in the run's record, and a refused prompt log-probability must stop the run at once.
- Results are handed to `on_result` from the calling thread (worker threads only talk HTTP), so
  the runner's writer needs no locking and Ctrl-C stops the run at once.
"""

from __future__ import annotations

import copy
import math
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from evalkit.backends.base import COUPLED, UNCOUPLED, GenRequest, GenResult, OnResult
from evalkit.backends.request_order import parse_request_order, request_sequence
from evalkit.backends.server_config import fetch_json, server_config
from evalkit.errors import EvalkitError
from evalkit.redact import mask_text

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
# retries per request: past this, backoffs capped at 30 s would hold a dead server's run for days
MAX_RETRIES = 100


def normalize_base_url(url: str) -> str:
    """Accept `host:port`, `http://host:port`, `.../v1`, or a full endpoint URL; return `.../v1`."""
    url = url.strip().rstrip("/")
    if not url:
        raise EvalkitError("empty --server URL")
    if "://" not in url:
        url = "http://" + url
    for suffix in ("/chat/completions", "/completions"):
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    if not url.endswith("/v1"):
        url = url + "/v1"
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise EvalkitError(f"--server {mask_text(url)!r} is not a URL ({mask_text(str(exc))})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise EvalkitError(f"--server {mask_text(url)!r} is not an http(s) URL with a host")
    if parsed.query or parsed.fragment:  # the endpoints are appended to its path; a key goes in --api-key
        raise EvalkitError(f"--server {mask_text(url)!r}: a base URL has no query or fragment (?...)")
    return url


def server_root(base_url: str) -> str:
    """`http://host:port/v1` -> `http://host:port`: where a server's own endpoints (`/version`,
    `/get_server_info`, the prefix-cache flushes) live, beside the OpenAI API."""
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


def truncate_at_stop(text: str, stop: list[str]) -> tuple[str, bool]:
    """Cut `text` at the earliest stop string (servers that ignore `stop` leave junk behind)."""
    cut = len(text)
    for s in stop:
        if s:
            i = text.find(s)
            if i != -1:
                cut = min(cut, i)
    return text[:cut], cut < len(text)


class TransientError(Exception):
    """A failure worth retrying (the server may answer next time)."""


class PermanentError(Exception):
    """A failure no retry will fix (bad request, unknown model)."""


class GoldRefused(EvalkitError):
    """The server does not offer prompt log-probabilities: `--gold-logprob` cannot be measured
    for any question, so the run stops at the first refusal instead of recording every one."""

    def __init__(self, why: str) -> None:
        super().__init__(
            f"--gold-logprob: {why}; use a server that returns prompt log-probabilities "
            "(/v1/completions with echo and logprobs, as vLLM and evalkit serve do), or drop --gold-logprob"
        )


@dataclass
class _Reply:
    text: str
    finish_reason: str | None
    n_prompt: int | None
    n_generated: int
    fingerprint: str | None


def _classify(exc: BaseException) -> Exception:
    import openai

    if isinstance(exc, (TransientError, PermanentError)):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        return TransientError(f"timeout: {exc}")
    if isinstance(exc, openai.APIConnectionError):
        return TransientError(f"connection error: {exc.__cause__ or exc}")
    if isinstance(exc, openai.APIStatusError):
        msg = f"HTTP {exc.status_code}: {exc.message}"
        return TransientError(msg) if exc.status_code in RETRYABLE_STATUS else PermanentError(msg)
    if isinstance(exc, (ValueError, KeyError, IndexError, AttributeError, TypeError)):
        # json.JSONDecodeError is a ValueError; a 200 without `choices` ends up here too.
        return TransientError(f"malformed response: {type(exc).__name__}: {exc}")
    if isinstance(exc, openai.APIError):
        return TransientError(f"{type(exc).__name__}: {exc}")
    return PermanentError(f"{type(exc).__name__}: {exc}")


def _model_list(url: str, body: Any) -> dict[str, Any]:
    """The parsed /v1/models answer, checked: an OpenAI model list {"data": [{"id": ...}, ...]}."""
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        shape = type(body).__name__ if not isinstance(body, dict) else "an object without a `data` list"
        raise EvalkitError(
            f"{url} answered {shape}, not an OpenAI model list; is it an OpenAI-compatible server?"
        )
    return body


class OpenAIBackend:
    """Generates through one or more OpenAI-compatible servers (data-parallel replicas)."""

    name = "openai"

    def __init__(
        self,
        base_urls: list[str],
        *,
        model: str | None = None,
        concurrency: int = 8,
        request_order: str = "given",
        timeout: float = 600.0,
        max_retries: int = 5,
        seed: int | None = 1234,
        api_key: str | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import openai

        if not base_urls:
            raise EvalkitError("no --server URL given")
        if concurrency < 1:
            raise EvalkitError("--concurrency must be at least 1")
        if not 0 <= max_retries <= MAX_RETRIES:
            raise EvalkitError(f"--max-retries must be 0 to {MAX_RETRIES}")
        if not (math.isfinite(timeout) and timeout > 0):
            raise EvalkitError("--timeout must be a positive number of seconds")
        self.base_urls = [normalize_base_url(u) for u in base_urls]
        self.concurrency = concurrency
        self.request_order = parse_request_order(request_order)
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.seed = seed
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._sleep = sleep
        self._rng = random.Random()
        self._rng_lock = threading.Lock()
        self._fingerprints: set[str] = set()
        self._reported_models: set[str] = set()
        self._stats = {"requests": 0, "retries": 0, "errors": 0}
        self._stats_lock = threading.Lock()
        key = api_key or "EMPTY"
        # the key goes to every endpoint (vLLM --api-key guards /v1/models too), never to disk
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._clients = [
            openai.OpenAI(base_url=u, api_key=key, max_retries=0, timeout=self.timeout)
            for u in self.base_urls
        ]
        self._models_info = [self._fetch_models(i) for i in range(len(self.base_urls))]
        self.model_substituted = False
        self._description: dict[str, Any] | None = None
        self.model = self._choose_model(model)
        for i, url in enumerate(self.base_urls[1:], start=1):
            if self.model not in self.served_models(i):
                raise EvalkitError(
                    f"the replicas differ: {url} does not serve {self.model!r} "
                    f"(it serves {', '.join(self.served_models(i)) or 'nothing'})"
                )

    # ---- discovery -----------------------------------------------------------------------

    def _fetch_models(self, i: int) -> dict[str, Any]:
        """GET /v1/models (retried: a server may still be starting); unreachable -> clear error."""
        url = self.base_urls[i] + "/models"
        last: str = ""
        for attempt in range(self.max_retries + 1):
            try:
                r = httpx.get(url, timeout=min(self.timeout, 30.0), headers=self._headers)
                if r.status_code == 200:
                    return _model_list(url, r.json())
                last = f"HTTP {r.status_code}"
                if r.status_code in (401, 403):
                    raise EvalkitError(
                        f"{url} refused the request (HTTP {r.status_code}): "
                        + ("wrong API key" if self._headers else "set OPENAI_API_KEY or pass --api-key")
                    )
                if r.status_code not in RETRYABLE_STATUS:
                    break
            except (httpx.HTTPError, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            if attempt < self.max_retries:
                self._sleep(self._backoff(attempt))
        raise EvalkitError(f"cannot list models at {url} ({last}); is the server running?")

    def served_models(self, replica: int = 0) -> list[str]:
        data = self._models_info[replica]["data"]
        return [str(m["id"]) for m in data if isinstance(m, dict) and isinstance(m.get("id"), (str, int))]

    def _choose_model(self, wanted: str | None) -> str:
        """The name to send: `wanted` if served; else the only served model (a path given as
        --model is often served under another name); else a clear error."""
        served = self.served_models()
        if wanted in served:
            return str(wanted)
        if len(served) == 1:
            self.model_substituted = wanted is not None
            return served[0]
        where = f"{self.base_urls[0]}/models"
        if not served:
            raise EvalkitError(f"{where} lists no model")
        raise EvalkitError(f"{where} serves {', '.join(served)}; pass --model with one of them")

    def _server_version(self, i: int) -> Any:
        return fetch_json(server_root(self.base_urls[i]) + "/version", self._headers)

    def _server_info(self, i: int) -> Any:
        """SGLang's `/get_server_info` (its server arguments); None elsewhere."""
        return fetch_json(server_root(self.base_urls[i]) + "/get_server_info", self._headers)

    def _model_card(self, i: int) -> Any:
        for card in self._models_info[i]["data"]:
            if isinstance(card, dict) and card.get("id") == self.model:
                return card
        return None

    @property
    def max_model_len(self) -> int | None:
        """vLLM's (and evalkit serve's) /v1/models card carries max_model_len; None if absent."""
        for card in self._models_info[0]["data"]:
            if isinstance(card, dict) and card.get("id") == self.model:
                value = card.get("max_model_len")
                return value if isinstance(value, int) and not isinstance(value, bool) else None
        return None

    def describe(self) -> dict[str, Any]:
        """The manifest's backend record; the servers are asked once per backend."""
        if self._description is None:
            self._description = self._describe()
        return copy.deepcopy(self._description)

    def _describe(self) -> dict[str, Any]:
        versions = {u: self._server_version(i) for i, u in enumerate(self.base_urls)}
        infos = {u: self._server_info(i) for i, u in enumerate(self.base_urls)}
        return {
            "name": self.name,
            "base_urls": self.base_urls,
            "model": self.model,
            "models": {u: info for u, info in zip(self.base_urls, self._models_info)},
            "server_versions": versions,
            "server_info": infos,
            # per server: the state dtype, chunked-prefill size and prefix caching it reports
            "server_config": {
                u: server_config(infos[u], versions[u], self._model_card(i))
                for i, u in enumerate(self.base_urls)
            },
            "concurrency_per_server": self.concurrency,
            "request_order": self.request_order,  # given, or shuffled:SEED (a numerics-floor replicate)
            "timeout_s": self.timeout,
            "max_retries": self.max_retries,
            "seed": self.seed,
            "temperature": 0.0,
        }

    def sampling_coupling(self) -> str:
        """Coupled when every replica is `evalkit serve` (its /version says so): its sampler keys
        the randomness by the request's seed as the local engine does. Another server may honour
        the seed, but not with the same random numbers for both arms."""
        versions = self.describe()["server_versions"].values()
        ours = all(isinstance(v, dict) and str(v.get("version", "")).startswith("evalkit ") for v in versions)
        return COUPLED if ours else UNCOUPLED

    def run_info(self) -> dict[str, Any]:
        """What was learned while generating: fingerprints, reported models, retry counts."""
        with self._stats_lock:
            return {
                "system_fingerprints": sorted(self._fingerprints),
                "reported_models": sorted(self._reported_models),
                **self._stats,
            }

    # ---- one request ---------------------------------------------------------------------

    def _backoff(self, attempt: int) -> float:
        base = min(self.backoff_max, self.backoff_base * (2**attempt))
        with self._rng_lock:
            return base * (0.5 + 0.5 * self._rng.random())

    def _call(self, replica: int, req: GenRequest) -> _Reply:
        client = self._clients[replica]
        common: dict[str, Any] = {"model": self.model, "max_tokens": req.max_new_tokens, "temperature": 0.0}
        if self.seed is not None:
            common["seed"] = self.seed
        if req.stop:
            common["stop"] = list(req.stop)
        extra: dict[str, Any] = {}
        if req.sampling is not None:  # one sample of a sampled run: its own seed (evalkit.runner.sampling)
            common.update(temperature=req.sampling.temperature, seed=req.sampling.seed)
            if req.sampling.top_p < 1.0:
                common["top_p"] = req.sampling.top_p
            if req.sampling.top_k > 0:
                extra["top_k"] = req.sampling.top_k  # vLLM's and evalkit serve's extension
        if req.ignore_eos:
            extra["ignore_eos"] = True
        if req.min_tokens:
            extra["min_tokens"] = req.min_tokens
        if extra:
            common["extra_body"] = extra
        if isinstance(req.prompt, list) and req.prompt and isinstance(req.prompt[0], dict):
            resp = client.chat.completions.create(messages=req.prompt, **common)
            choice = resp.choices[0]
            text = choice.message.content
        else:
            resp = client.completions.create(prompt=req.prompt, **common)
            choice = resp.choices[0]
            text = choice.text
        if text is None:
            raise TransientError("malformed response: the choice has no text")
        usage = getattr(resp, "usage", None)
        if getattr(resp, "model", None):
            with self._stats_lock:
                self._reported_models.add(str(resp.model))
        return _Reply(
            text=str(text),
            finish_reason=getattr(choice, "finish_reason", None),
            n_prompt=getattr(usage, "prompt_tokens", None),
            n_generated=int(getattr(usage, "completion_tokens", 0) or 0),
            fingerprint=getattr(resp, "system_fingerprint", None),
        )

    def _gold(self, home: int, req: GenRequest) -> Any:
        """The reference answer's log-probabilities from the completions API's prompt log-probs
        (`echo=True`, top-2 `logprobs`, one generated token, as vLLM offers them); a GoldScore
        whose `error` says why when the server does not offer them. Never fails the question."""
        from evalkit.backends import gold

        if not isinstance(req.prompt, str):
            return gold.failed("prompt", "chat prompts: the chat API returns no prompt log-probabilities")
        last = ""
        for attempt in range(self.max_retries + 1):
            replica = (home + attempt) % len(self._clients)
            try:
                resp = self._clients[replica].completions.create(
                    model=self.model,
                    prompt=req.prompt + req.gold,
                    echo=True,
                    logprobs=2,
                    max_tokens=1,
                    temperature=0.0,
                    **({"seed": self.seed} if self.seed is not None else {}),
                )
                choice = resp.choices[0]
                logprobs = getattr(choice, "logprobs", None)
                if logprobs is None:
                    raise GoldRefused(f"{self.base_urls[replica]} returned no prompt log-probabilities")
                n = len(req.prompt)
                return gold.from_prompt_logprobs(logprobs, n, n + len(req.gold))
            except GoldRefused:
                raise
            except Exception as exc:  # noqa: BLE001 -- classified like any request
                err = _classify(exc)
                last = f"{self.base_urls[replica]}: {err}"
                if isinstance(err, PermanentError):
                    raise GoldRefused(f"the server refused prompt log-probabilities ({last})") from exc
                if attempt < self.max_retries:
                    self._sleep(self._backoff(attempt))
        return gold.failed("prompt", f"prompt log-probabilities failed: {last}")

    def _answer(self, home: int, req: GenRequest) -> GenResult:
        start = time.perf_counter()
        last_error = ""
        n = len(self._clients)
        for attempt in range(self.max_retries + 1):
            replica = (home + attempt) % n
            with self._stats_lock:
                self._stats["requests"] += 1
                if attempt:
                    self._stats["retries"] += 1
            try:
                reply = self._call(replica, req)
            except Exception as exc:  # noqa: BLE001 -- every failure is classified, none escapes
                err = _classify(exc)
                last_error = f"{self.base_urls[replica]}: {err}"
                if isinstance(err, PermanentError):
                    break
                if attempt < self.max_retries:
                    self._sleep(self._backoff(attempt))
                continue
            text, cut = truncate_at_stop(reply.text, req.stop)
            with self._stats_lock:
                if reply.fingerprint:
                    self._fingerprints.add(reply.fingerprint)
            finish = "stop" if cut else reply.finish_reason
            return GenResult(
                text=text,
                n_prompt=reply.n_prompt,
                n_generated=reply.n_generated,
                finish_reason=finish,
                timings={"latency_s": time.perf_counter() - start, "attempts": float(attempt + 1)},
            )
        with self._stats_lock:
            self._stats["errors"] += 1
        return GenResult(
            text="",
            finish_reason="error",
            error=last_error or "failed",
            timings={"latency_s": time.perf_counter() - start},
        )

    # ---- the batch -----------------------------------------------------------------------

    def generate(self, requests: list[GenRequest], on_result: OnResult) -> None:
        """Answer every request; `on_result` runs on this thread as each one finishes."""
        if not requests:
            return
        todo: queue.Queue[int] = queue.Queue()
        for i in request_sequence(len(requests), self.request_order):
            todo.put(i)
        done: queue.Queue[tuple[int, GenResult]] = queue.Queue()
        stop = threading.Event()
        refused: list[GoldRefused] = []  # the first refusal of prompt log-probabilities ends the batch

        def worker(home: int) -> None:
            while not stop.is_set():
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    result = self._answer(home, requests[i])
                    if requests[i].gold is not None and result.error is None:
                        result.gold = self._gold(home, requests[i])
                except GoldRefused as exc:
                    refused.append(exc)
                    stop.set()
                    return
                except Exception as exc:  # noqa: BLE001 -- a bug here must not lose the request
                    result = GenResult(text="", finish_reason="error", error=f"internal: {exc!r}")
                done.put((i, result))

        n_workers = min(len(requests), self.concurrency * len(self._clients))
        threads = [
            threading.Thread(
                target=worker, args=(w % len(self._clients),), daemon=True, name=f"evalkit-openai-{w}"
            )
            for w in range(n_workers)
        ]
        for t in threads:
            t.start()
        try:
            remaining = len(requests)
            while remaining:
                try:
                    i, result = done.get(timeout=0.2)  # a timeout keeps Ctrl-C responsive
                except queue.Empty:
                    if refused:
                        raise refused[0] from None
                    continue
                on_result(i, result)
                remaining -= 1
        finally:
            stop.set()

    def close(self) -> None:
        for c in self._clients:
            c.close()
