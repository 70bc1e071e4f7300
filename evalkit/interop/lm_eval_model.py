"""The lm-eval model `evalkit`: generation and log-likelihoods from evalkit's engine, with the
recurrent state stored as `arm` says (an `evalkit.arm` arm: fp32, fp16, bf16, m7, fp16@chunk=64, ...).

model_args: pretrained (checkpoint dir or hub id; default the embedded reference model),
arm (fp32; `state_dtype` is its older name), kernels (`evalkit.kernel_choice` switches separated
by `;`, since lm-eval splits model_args at commas: kernels=prefill_dots=bf16;weights=bf16),
max_num_seqs, max_gen_toks (256, lm-eval's default when a task sets none),
trust_remote_code (lm-eval's --trust_remote_code sets it: code shipped with the tokenizer runs).
The device comes from lm-eval's own `--device` (its default, cuda:0, falls back to the CPU when
no GPU is present). lm-eval's `batch_size` is accepted and ignored: the engine batches
continuously.
Decoding is greedy; a task asking for sampling gets a warning and greedy output.
"""

from __future__ import annotations

import logging
from typing import Any

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from tqdm import tqdm

from evalkit.backends.base import GenRequest, GenResult
from evalkit.backends.local import LocalBackend

log = logging.getLogger(__name__)


def _usable_device(device: str | None) -> str | None:
    if device and device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            log.warning("device %s requested but no CUDA GPU is present: using the CPU", device)
            return "cpu"
    return device


@register_model("evalkit")
class EvalkitLM(LM):
    def __init__(
        self,
        pretrained: str | None = None,
        arm: str | None = None,
        kernels: str | None = None,
        state_dtype: str | None = None,
        device: str | None = None,
        max_num_seqs: int | None = None,
        max_gen_toks: int = 256,
        engine: Any = None,
        trust_remote_code: bool | str = False,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        from evalkit.arm import parse_arm
        from evalkit.errors import InputError
        from evalkit.kernel_choice import parse_kernels

        if arm is not None and state_dtype is not None and parse_arm(arm) != parse_arm(state_dtype):
            raise ValueError(f"arm={arm} and state_dtype={state_dtype} disagree: give one (arm)")
        try:
            parsed = parse_arm(arm or state_dtype or "fp32")
            choice = parse_kernels((kernels or "").replace(";", ","))
        except InputError as exc:
            raise ValueError(str(exc)) from None
        if pretrained is None and engine is None:
            from evalkit.runner.setup import default_model

            pretrained = default_model()[0]
        self.pretrained = str(pretrained) if pretrained is not None else "engine"
        device = _usable_device(device)
        self.arm, self.kernels = parsed, choice
        self.max_gen_toks = int(max_gen_toks)
        self.backend = LocalBackend(
            pretrained,
            arm=parsed,
            kernels=choice,
            device=device,
            max_num_seqs=int(max_num_seqs) if max_num_seqs else None,
            engine=engine,
            trust_remote_code=str(trust_remote_code).lower() == "true",  # model_args may give text
        )
        self.engine = self.backend.engine
        self.tokenizer = self.backend.tokenizer
        self._warned_sampling = False

    # ---- lm-eval's chat hooks ------------------------------------------------------------

    @property
    def tokenizer_name(self) -> str:
        return self.pretrained.replace("/", "__")

    def apply_chat_template(
        self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": add_generation_prompt}
        if not add_generation_prompt:
            kwargs["continue_final_message"] = True  # a task's gen_prefix, as HFLM does
        return self.tokenizer.apply_chat_template(chat_history, **kwargs)

    def get_model_info(self) -> dict[str, Any]:
        return {
            "evalkit_engine": self.backend.describe(),
            "arm": self.arm.label,
            "kernels": self.kernels.label,
        }

    # ---- generation -----------------------------------------------------------------------

    def _gen_request(self, context: str, gen_kwargs: dict[str, Any]) -> GenRequest:
        from lm_eval.models.utils import normalize_gen_kwargs

        kw = normalize_gen_kwargs(dict(gen_kwargs), default_max_gen_toks=self.max_gen_toks)
        if kw.get("do_sample") and not self._warned_sampling:
            log.warning("evalkit decodes greedily; the task's sampling settings are ignored")
            self._warned_sampling = True
        return GenRequest(prompt=context, max_new_tokens=int(kw["max_gen_toks"]), stop=list(kw["until"]))

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        from lm_eval.models.utils import postprocess_generated_text

        gens = [self._gen_request(*req.args[:2]) for req in requests]
        texts: list[str | None] = [None] * len(gens)
        bar = tqdm(total=len(gens), disable=disable_tqdm, desc="evalkit generate_until")

        def on_result(i: int, result: GenResult) -> None:
            texts[i] = postprocess_generated_text(result.text, gens[i].stop, None)
            self.cache_hook.add_partial("generate_until", requests[i].args[:2], texts[i])
            bar.update(1)

        self.backend.generate(gens, on_result)
        bar.close()
        missing = [i for i, t in enumerate(texts) if t is None]
        if missing:
            raise RuntimeError(f"the engine returned no output for {len(missing)} requests")
        return [t for t in texts if t is not None]

    # ---- log-likelihoods ------------------------------------------------------------------

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """As lm-eval's HFLM: trailing spaces of the context move to the continuation, and the
        continuation's tokens are those of (context + continuation) past the context's."""
        n = len(context) - len(context.rstrip())
        if n:
            continuation, context = context[-n:] + continuation, context[:-n]
        whole = self.tokenizer.encode(context + continuation, add_special_tokens=False)
        ctx = self.tokenizer.encode(context, add_special_tokens=False)
        if not ctx:
            return [self._prefix_token()], whole
        return ctx, whole[len(ctx) :]

    def _prefix_token(self) -> int:
        tok = self.tokenizer
        for t in (tok.bos_token_id, tok.eos_token_id):
            if t is not None:
                return int(t)
        raise ValueError("the tokenizer has neither a BOS nor an EOS token to condition on")

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        pairs = [self._encode_pair(*req.args[:2]) for req in requests]
        results = self.engine.loglikelihood(pairs)
        out = [(float(lp), bool(greedy)) for lp, greedy in results]
        for req, res in zip(requests, out):
            self.cache_hook.add_partial("loglikelihood", req.args[:2], res)
        return out

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        """One window: a recurrent model has no context limit to slide over."""
        pairs = [
            ([self._prefix_token()], self.tokenizer.encode(req.args[0], add_special_tokens=False))
            for req in requests
        ]
        out = [float(lp) for lp, _ in self.engine.loglikelihood(pairs)]
        for req, res in zip(requests, out):
            self.cache_hook.add_partial("loglikelihood_rolling", (req.args[0],), res)
        return out
