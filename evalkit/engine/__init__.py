"""evalkit's in-process engine for Kimi-Linear checkpoints (nano-vllm's shape: config, sequence,
scheduler, model runner, engine), where the only thing an arm changes is the dtype of the
recurrent state pool.

High level:

    from evalkit.engine import LLMEngine, SamplingParams
    engine = LLMEngine("ckpt/dir", state_dtype="fp16")          # device: cuda if available
    outs = engine.generate(prompts, SamplingParams(max_new_tokens=256, stop=["\\n\\n"]))
    scores = engine.loglikelihood([(context_ids, continuation_ids), ...])  # [(logprob, is_greedy)]
    engine.describe()                                           # for the run manifest

Low level (what `evalkit drift` uses; stable):

    runner = engine.runner                       # ModelRunner over engine.model and engine.state
    seq = Sequence(token_ids, SamplingParams())  # any token list
    runner.attach(seq)                           # zeroed state slot (+ MLA cache for seq.max_len)
    logits = runner.prefill([(seq, n)], all_logits=True)[0]   # next n tokens -> fp32 [n, vocab]
    runner.state.kda_state(layer, seq.slot)      # stored recurrent state [H, K, V] (pool dtype)
    runner.state.kda.keys()                      # indices of the KDA layers
    seq.token_ids.append(t); logits = runner.decode([seq])    # one token -> [1, vocab]
    runner.detach(seq)                           # zero and release

Two engines (say fp32 and fp16) can share one loaded model: `LLMEngine(engine_a.loaded, ...)`.
Below that, `KimiLinearLM.forward(ForwardBatch, StatePools)` (evalkit.model) is one forward pass.
"""

from .config import EngineConfig
from .llm_engine import LLMEngine, kernel_build
from .model_runner import ModelRunner
from .sampling import Output, SamplingParams
from .sequence import Sequence, Status
from .state import StatePools
from .step_result import StepResult

__all__ = [
    "EngineConfig",
    "LLMEngine",
    "ModelRunner",
    "Output",
    "SamplingParams",
    "Sequence",
    "StatePools",
    "StepResult",
    "Status",
    "kernel_build",
]
