"""Request shapes of the OpenAI API subset `evalkit serve` speaks (plus vLLM's `ignore_eos`,
`min_tokens`), and OpenAI-style error bodies."""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evalkit.engine.sampling import MAX_LOGPROBS

# OpenAI's default for /v1/completions is 16 tokens; chat has no limit, capped by the server.
DEFAULT_COMPLETION_TOKENS = 16
MAX_N = 128  # choices per prompt: a bound on the work one request may queue
MAX_CHOICES = 1024  # prompts x n in one request


class _Common(BaseModel):
    model_config = ConfigDict(extra="allow")  # unknown fields are ignored, as vLLM does

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=0)
    max_completion_tokens: int | None = Field(default=None, ge=0)
    temperature: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0, allow_inf_nan=False)
    top_k: int | None = Field(default=None, ge=-1)  # -1 or 0: off (vLLM's convention)
    n: int = Field(default=1, ge=1, le=MAX_N)
    stop: Union[str, list[str], None] = None
    seed: int | None = Field(default=None, ge=-(2**63), lt=2**64)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    ignore_eos: bool = False
    min_tokens: int = Field(default=0, ge=0)
    logprobs: Any = None

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else [s for s in self.stop if s]

    def sampling(self, sample_index: int) -> dict[str, Any]:
        """The engine's sampling fields for choice `sample_index` (greedy when temperature is 0
        or absent); a negative seed is taken modulo 2**64, so every int64 seed is accepted."""
        return {
            "temperature": float(self.temperature or 0.0),
            "top_p": 1.0 if self.top_p is None else float(self.top_p),
            "top_k": 0 if self.top_k is None else int(self.top_k),
            "seed": None if self.seed is None else self.seed % 2**64,
            "sample_index": sample_index,
        }


class CompletionRequest(_Common):
    # token ids first: pydantic tries the members in order, and a long id list validated against
    # list[str] first costs seconds (1.1M ids: 1.2 s against 0.2 s) on the event loop
    prompt: Union[list[int], list[list[int]], str, list[str]]
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=MAX_LOGPROBS)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: Union[str, list[dict[str, Any]], None] = None

    @field_validator("content")
    @classmethod
    def _text_parts_only(cls, content: Any) -> Any:
        """An image or audio part is refused: dropping it would answer as if the model had seen it."""
        for part in content if isinstance(content, list) else []:
            kind = part.get("type", "text")
            if kind != "text":
                raise ValueError(f"content part of type {str(kind)[:40]!r}: this model takes text parts only")
        return content

    def text(self) -> str:
        if isinstance(self.content, list):  # [{"type": "text", "text": ...}]
            return "".join(str(p.get("text", "")) for p in self.content if p.get("type", "text") == "text")
        return self.content or ""


class ChatRequest(_Common):
    messages: list[ChatMessage] = Field(min_length=1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_LOGPROBS)


ErrorType = Literal["invalid_request_error", "not_found_error", "server_error"]


class APIError(Exception):
    """An error reported to the client as {"error": {...}} with an HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        type_: ErrorType = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.type = status, message, param, type_

    def body(self) -> dict[str, Any]:
        return {
            "error": {"message": self.message, "type": self.type, "param": self.param, "code": self.status}
        }
