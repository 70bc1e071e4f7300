"""Request shapes of the OpenAI API subset `evalkit serve` speaks (plus vLLM's `ignore_eos`,
`min_tokens`), and OpenAI-style error bodies."""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

# OpenAI's default for /v1/completions is 16 tokens; chat has no limit, capped by the server.
DEFAULT_COMPLETION_TOKENS = 16


class _Common(BaseModel):
    model_config = ConfigDict(extra="allow")  # unknown fields are ignored, as vLLM does

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=0)
    max_completion_tokens: int | None = Field(default=None, ge=0)
    temperature: float | None = Field(default=None, ge=0.0)
    top_p: float | None = None
    n: int = Field(default=1, ge=1)
    stop: Union[str, list[str], None] = None
    seed: int | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    ignore_eos: bool = False
    min_tokens: int = Field(default=0, ge=0)
    logprobs: Any = None

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else [s for s in self.stop if s]


class CompletionRequest(_Common):
    prompt: Union[str, list[str], list[int], list[list[int]]]
    echo: bool = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: Union[str, list[dict[str, Any]], None] = None

    def text(self) -> str:
        if isinstance(self.content, list):  # [{"type": "text", "text": ...}]
            return "".join(str(p.get("text", "")) for p in self.content if p.get("type", "text") == "text")
        return self.content or ""


class ChatRequest(_Common):
    messages: list[ChatMessage] = Field(min_length=1)


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
