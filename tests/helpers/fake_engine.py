"""A stand-in for `evalkit.engine.LLMEngine` with the same shape (add_request/step/generate),
used only until the real engine lands: deterministic greedy "decoding" over a byte tokenizer."""

from __future__ import annotations

from typing import Any


class ByteTokenizer:
    eos_token_id = 0
    name_or_path = "bytes"

    def __len__(self) -> int:
        return 256

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return bytes(i for i in ids if i).decode("utf-8", errors="replace")

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, **kw):
        text = "".join(f"<{m['role']}>{m['content']}\n" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")


from evalkit.engine.sampling import Output, SamplingParams  # noqa: E402 -- the real types


def next_token(ids: list[int]) -> int:
    """Lowercase letters and spaces, EOS now and then: a pure function of the history."""
    h = (sum(ids[-4:]) * 31 + len(ids) * 7) % 29
    return 0 if h == 28 else (32 if h >= 26 else 97 + h)


class FakeEngine:
    def __init__(self, max_num_seqs: int = 64, step_delay_s: float = 0.0) -> None:
        self.tokenizer = ByteTokenizer()
        self.step_delay_s = step_delay_s
        self.max_num_seqs = max_num_seqs
        self._seqs: dict[int, dict[str, Any]] = {}
        self._waiting: list[int] = []
        self._running: list[int] = []
        self._next = 0

    def describe(self) -> dict[str, Any]:
        return {"model": {"path": "fake"}, "arm": {"state_dtype": "fp32"}}

    def add_request(self, prompt: list[int] | str, params: SamplingParams) -> int:
        ids = self.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
        sid = self._next
        self._next += 1
        self._seqs[sid] = {"prompt": ids, "out": [], "params": params}
        self._waiting.append(sid)
        return sid

    def has_unfinished(self) -> bool:
        return bool(self._waiting or self._running)

    def _finish(self, sid: int, reason: str) -> Output:
        s = self._seqs.pop(sid)
        text = self.tokenizer.decode(s["out"])
        return Output(sid, s["out"], text, reason, len(s["prompt"]), len(s["out"]))

    def step(self) -> tuple[list[Output], int]:
        if self.step_delay_s:
            import time

            time.sleep(self.step_delay_s)
        while self._waiting and len(self._running) < self.max_num_seqs:
            self._running.append(self._waiting.pop(0))
        batch = list(self._running)
        finished = []
        for sid in batch:
            s = self._seqs[sid]
            p: SamplingParams = s["params"]
            tok = next_token(s["prompt"] + s["out"])
            if tok == 0 and not p.ignore_eos and len(s["out"]) >= p.min_tokens:
                finished.append(self._finish(sid, "eos"))
                continue
            s["out"].append(tok if tok else 101)
            text = self.tokenizer.decode(s["out"])
            hit = [text.find(x) for x in p.stop if x and x in text]
            if hit and len(s["out"]) >= p.min_tokens:
                s["out"] = self.tokenizer.encode(text[: min(hit)])
                finished.append(self._finish(sid, "stop"))
            elif len(s["out"]) >= p.max_new_tokens:
                finished.append(self._finish(sid, "length"))
        done = {o.request_id for o in finished}
        self._running = [s for s in self._running if s not in done]
        return finished, -len(batch)

    def partial_token_ids(self, sid: int) -> list[int] | None:
        s = self._seqs.get(sid)
        return None if s is None else list(s["out"])

    def generate(self, prompts, params, use_tqdm=False, on_finish=None) -> list[Output]:
        params = params if isinstance(params, list) else [params] * len(prompts)
        ids = {self.add_request(p, sp): i for i, (p, sp) in enumerate(zip(prompts, params))}
        outs: list[Any] = [None] * len(prompts)
        while self.has_unfinished():
            for o in self.step()[0]:
                outs[ids[o.request_id]] = o
                if on_finish:
                    on_finish(ids[o.request_id], o)
        return outs
