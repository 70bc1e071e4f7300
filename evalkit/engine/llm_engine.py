"""`LLMEngine`: the in-process engine (greedy generation and log-likelihood scoring).

    engine = LLMEngine("path/to/checkpoint", state_dtype="fp16")
    outs = engine.generate(["Question: ..."], SamplingParams(max_new_tokens=256, stop=["\\n\\n"]))
    outs[0].text, outs[0].finish_reason, outs[0].flags

For a server loop: `rid = engine.add_request(prompt, params)`, then `step = engine.step()` while
`engine.has_unfinished()` (a `StepResult`: `step.outputs` finished in that step, and the prompt
tokens it prefilled or the sequences it decoded); `partial_token_ids(rid)` for streaming,
`abort(rid)`, `reset()`."""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import time
from collections.abc import Callable
from collections.abc import Sequence as Seq
from pathlib import Path
from typing import Any

import torch

from evalkit.errors import InputError

from ..model.loader import LoadedModel, load_model
from .capacity import CAPACITY_CONTEXTS, Capacity, plan_capacity
from .config import EngineConfig
from .cpu_threads import apply_cpu_threads
from .forced import ForcedScore, copy_sequence_state, row_scores
from .health import is_repetition, logit_flags, merge_layer_max, nonfinite_rows, state_flags
from .memory import gpu_pool_budget
from .model_runner import ModelRunner
from .sampling import Output, SamplingParams, row_key, sample_rows, token_logprobs
from .scheduler import Scheduler
from .sequence import Sequence, Status
from .state import StatePools
from .step_result import StepResult
from .stops import StopStrings

Prompt = str | list[int] | list[dict[str, str]]


class LLMEngine:
    def __init__(self, model: Any = None, config: EngineConfig | None = None, **overrides: Any):
        """`config`: every knob, passed whole; `overrides` (EngineConfig fields by name, or the loose
        spellings `state_dtype`/`prefill_chunk_size`/`intra_chunk_dtype`/`dtype`, parsed once into
        the arm and the kernel choice) are a shorthand for scripts and tests:
        `LLMEngine(path, state_dtype="fp16")`."""
        cfg = (config or EngineConfig()).with_options(**overrides)
        if model is not None:
            cfg.model = model
        if cfg.model is None:
            raise InputError("no model given")
        device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if isinstance(cfg.model, LoadedModel):
            self.loaded = cfg.model
        else:
            self.loaded = load_model(
                cfg.model,
                device=device,
                dtype=cfg.kernels.torch_weight_dtype(),
                trust_remote_code=cfg.trust_remote_code,
            )
        want = cfg.kernels.torch_weight_dtype()
        if want is not None and want != self.loaded.model.dtype:
            have = str(self.loaded.model.dtype).removeprefix("torch.")
            raise InputError(f"--kernels weights={cfg.kernels.weights}: the model given is loaded in {have}")
        self.loaded.model.use_kernels(cfg.kernels)  # once: the layers read the choice from here on
        if self.loaded.model.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = cfg.kernels.tf32
        self.model = self.loaded.model
        self.arch = self.loaded.arch
        self.tokenizer = self.loaded.tokenizer
        self.stops = StopStrings(self.tokenizer)
        cfg.device = str(self.model.device)
        self.config = cfg.resolved(self.arch.max_position_embeddings)
        self.twin = None
        if self.config.twin_check and not self.config.state_format.exact:
            from evalkit.kernels.twin_check import TwinChecker

            self.twin = TwinChecker(every=self.config.twin_check)  # every n-th rounding KDA launch
        self._pool_budget: int | None = None  # the pools' GPU memory, set by _make_pools on CUDA
        self.state = self._make_pools()
        if self.model.device.type == "cpu":
            apply_cpu_threads()  # one thread unless EVALKIT_CPU_THREADS / OMP_NUM_THREADS say otherwise
        self.runner = ModelRunner(self.model, self.state, self.config)
        self.scheduler = Scheduler(
            self.config, self.state, on_admit=self.runner.bind, on_release=self.runner.detach
        )
        self.eos_ids = set(self.arch.eos_token_id)
        if self.tokenizer is not None and self.tokenizer.eos_token_id is not None:
            self.eos_ids.add(int(self.tokenizer.eos_token_id))
        self._ids = itertools.count()
        self._live: dict[int, Sequence] = {}  # unfinished requests by id
        self._decode_steps = 0
        self._fork_ids: dict[int, int] = {}  # generation request id -> its forced answer's id
        self.stats = {
            "prefill_steps": 0,  # prefill forwards
            "prefill_tokens": 0,
            "prefill_s": 0.0,
            "decode_steps": 0,  # decode forwards
            "decode_tokens": 0,
            "decode_s": 0.0,
            "max_batch": 0,
        }
        if self.runner.use_graphs:
            self.runner.capture_graphs()

    # -- memory --------------------------------------------------------------------------------
    def _make_pools(self) -> StatePools:
        c, arch = self.config, self.arch
        sdt = c.state_format.pool_dtype
        mdt = self.model.dtype
        per_slot = StatePools.bytes_per_slot(arch, sdt, mdt)
        per_tok = max(StatePools.bytes_per_token(arch, mdt), 1)
        slots = c.max_num_seqs
        if self.model.device.type == "cuda":
            budget = gpu_pool_budget(arch, c, self.model.device)
            self._pool_budget = budget
            slots = min(slots, max(1, budget // per_slot - 1))
            if slots < c.max_num_seqs:
                print(f"[evalkit] {c.max_num_seqs} state slots do not fit; using {slots}", flush=True)
                c.max_num_seqs = slots
            left = budget - (slots + 1) * per_slot
            blocks = max(left // (per_tok * c.block_size), 2)
        else:  # enough for every slot at max_model_len, within cpu_kv_cache_bytes
            full = slots * -(-c.max_model_len // c.block_size)
            blocks = min(c.cpu_kv_cache_bytes // (per_tok * c.block_size), full)
        if c.kv_cache_tokens:
            blocks = -(-c.kv_cache_tokens // c.block_size)
        num_blocks = blocks + 1  # + the scratch block
        return StatePools(
            arch,
            slots,
            c.arm,
            mdt,
            self.model.device,
            num_blocks,
            c.block_size,
            kda_chunk_size=c.kda_chunk_size,
            kda_ops=self.twin,  # None: evalkit.kernels
            # the CPU KDA prefill vectorises over the sequences of a call, in a way that depends on
            # their number; one call per sequence keeps each sequence's numerics its own
            serial_prefill=c.batch_invariant and self.model.device.type == "cpu",
        )

    # -- requests ------------------------------------------------------------------------------
    def encode(self, prompt: Prompt) -> list[int]:
        from evalkit.prompt_ids import encode_prompt

        return encode_prompt(self.tokenizer, prompt)

    def add_request(
        self,
        prompt: Prompt,
        params: SamplingParams | None = None,
        request_id: int | None = None,
        forced_answer: Seq[int] | None = None,
    ) -> int:
        """A generation request. With `forced_answer` (token ids) it also teacher-forces that answer
        in decode mode from its post-prompt state (`evalkit.engine.forced`), without a second
        prefill: the forced output comes back separately, as request `forced_request_id(rid)`."""
        rid = next(self._ids) if request_id is None else request_id
        seq = Sequence(self.encode(prompt), params or SamplingParams(), request_id=rid)
        if forced_answer is not None:
            seq.fork_answer = [int(t) for t in forced_answer]
            if not seq.fork_answer:
                raise InputError("teacher forcing: empty answer")
            seq.fork_request_id = next(self._ids)
            self._fork_ids[rid] = seq.fork_request_id
        self.scheduler.add(seq)
        self._live[rid] = seq
        return rid

    def forced_request_id(self, request_id: int) -> int | None:
        """The request id of the forced answer of a request made with `forced_answer`."""
        return self._fork_ids.get(request_id)

    def add_forced_request(self, prompt: Prompt, answer: Seq[int], request_id: int | None = None) -> int:
        """Teacher-force `answer` (token ids) after `prompt` in decode mode (`evalkit.engine.forced`):
        the prompt is prefilled as for generation, then each answer token is a decode step. Its
        `Output.forced` is a `ForcedScore`."""
        answer = [int(t) for t in answer]
        if not answer:
            raise InputError("teacher forcing: empty answer")
        rid = next(self._ids) if request_id is None else request_id
        seq = Sequence(self.encode(prompt), SamplingParams(max_new_tokens=len(answer)), request_id=rid)
        seq.forced = answer
        seq.forced_score = ForcedScore(tokens=answer)
        self.scheduler.add(seq)
        self._live[rid] = seq
        return rid

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    # -- one step ------------------------------------------------------------------------------
    def step(self) -> StepResult:
        """One scheduler step: a prefill step or a decode step (or nothing, when nothing waits)."""
        kind, work = self.scheduler.schedule()
        if kind == "prefill":
            return StepResult(self._prefill_step(work), prefilled_tokens=sum(n for _, n in work))
        if kind == "decode":
            return StepResult(self._decode_step([s for s, _ in work]), decoded_sequences=len(work))
        return StepResult()

    def partial_token_ids(self, request_id: int) -> list[int] | None:
        """Tokens generated so far by an unfinished request (None when unknown or finished)."""
        seq = self._live.get(request_id)
        return None if seq is None else list(seq.generated)

    def partial_logprobs(self, request_id: int) -> list[Any] | None:
        """The log-probabilities (`TokenLogprob`) of the tokens generated so far by an unfinished
        request that asked for them (None when unknown, finished or not asked): streamed per chunk."""
        seq = self._live.get(request_id)
        return None if seq is None or seq.logprobs is None else list(seq.logprobs)

    def abort(self, request_id: int) -> bool:
        """Drop an unfinished request and free its slot; False if it was not running."""
        seq = self._live.pop(request_id, None)
        if seq is None:
            return False
        if seq in self.scheduler.waiting:
            self.scheduler.waiting.remove(seq)
        else:
            self.scheduler.finish(seq)
        return True

    def reset(self) -> None:
        """Abort every unfinished request (e.g. after an error in a server loop)."""
        for rid in list(self._live):
            self.abort(rid)

    def _prefill_step(self, work: list[tuple[Sequence, int]]) -> list[Output]:
        t0 = time.perf_counter()
        logits = self.runner.prefill(work)
        done: list[Output] = []
        completed = []
        last_logits = {}
        for (seq, n), lg in zip(work, logits):
            last_logits[seq.seq_id] = lg
            if lg is not None:
                for f in logit_flags(lg):
                    seq.flags |= f
                if seq.is_scoring:
                    self._score_rows(seq, seq.num_computed - n, n, lg)
                if seq.prompt_logprobs is not None:
                    self._prompt_logprob_rows(seq, seq.num_computed - n, lg)
            self.scheduler.after_prefill(seq)
            if seq.num_computed >= seq.n_prompt:
                completed.append(seq)
        if completed:
            self._check_state(completed)
        with self.state.freeing_together():  # scoring requests finish here, many a step
            for seq in completed:
                done.extend(self._after_prompt(seq, last_logits[seq.seq_id]))
        self._sync()
        self.stats["prefill_steps"] += 1
        self.stats["prefill_tokens"] += sum(n for _, n in work)
        self.stats["prefill_s"] += time.perf_counter() - t0
        return done

    def _after_prompt(self, seq: Sequence, lg: torch.Tensor | None) -> list[Output]:
        """A sequence whose prompt is in: finished (scoring, or nothing to generate) or its first
        token chosen from `lg`, the logits of its last prompt rows; the outputs that finished."""
        if seq.is_scoring:
            self.scheduler.finish(seq)
            return [self._output(seq)]
        done: list[Output] = []
        seq.t_first_token = time.perf_counter()
        if seq.fork_answer is not None:
            done.extend(self._fork(seq, lg[-1:]))
        if seq.forced is not None:
            self._force(seq, lg[-1:])
        elif seq.params.max_new_tokens == 0:
            seq.finish_reason = "length"
        else:
            tok = int(lg[-1].argmax())
            self._append(seq, self._choose([seq], lg[-1:], [tok])[0])
        if seq.finish_reason:
            self.scheduler.finish(seq)
            done.append(self._output(seq))
        return done

    def _decode_step(self, seqs: list[Sequence]) -> list[Output]:
        t0 = time.perf_counter()
        logits = self.runner.decode(seqs, copy_logits=False)  # read within this step only
        tokens = logits.argmax(-1)
        bad = nonfinite_rows(logits)
        packed = torch.stack([tokens, bad.long()]).cpu()
        if bool(packed[1].any()):
            for seq, f in zip(seqs, logit_flags(logits)):
                seq.flags |= f
        self._decode_steps += 1
        if self._decode_steps % self.config.health_interval == 0:
            self._check_state(seqs)
        forced = [i for i, s in enumerate(seqs) if s.forced is not None]
        if forced:
            self._force_rows([seqs[i] for i in forced], logits[forced])
        finished = []
        for seq, tok in zip(seqs, self._choose(seqs, logits, packed[0].tolist())):
            if seq.forced is None:
                self._append(seq, tok)
            if seq.finish_reason:
                finished.append(seq)
        # one check (one device sync) for every sequence that finished in this step: a whole wave
        # of sequences can end in the same step, and a check each would be a sync each
        self._check_state(finished)
        done = []
        with self.state.freeing_together():
            for seq in finished:
                self.scheduler.finish(seq)
                done.append(self._output(seq))
        self.stats["decode_steps"] += 1
        self.stats["decode_tokens"] += len(seqs)
        self.stats["decode_s"] += time.perf_counter() - t0
        self.stats["max_batch"] = max(self.stats["max_batch"], len(seqs))
        return done

    def _sync(self) -> None:
        if self.model.device.type == "cuda":
            torch.cuda.synchronize(self.model.device)

    def _check_state(self, seqs: list[Sequence]) -> None:
        live = [s for s in seqs if s.slot is not None]
        if not live or not self.state.kda:
            return
        slots = torch.tensor([s.slot for s in live], dtype=torch.long, device=self.state.device)
        rows = self.state.layer_max_abs(slots).t().tolist()  # [seq][layer]: the check's one sync
        bad = [i for i, r in enumerate(rows) if not all(math.isfinite(v) for v in r)]
        counts = dict(zip(bad, self.state.nonfinite_count(slots[bad]).tolist())) if bad else {}
        threshold = self.overflow_threshold
        for i, (seq, row) in enumerate(zip(live, rows)):
            m = float("nan") if any(v != v for v in row) else max(row)
            seq.state_max_abs = m if m != m else max(seq.state_max_abs, m)  # NaN sticks
            seq.state_layer_max_abs = merge_layer_max(seq.state_layer_max_abs, row)
            seq.state_nonfinite = max(seq.state_nonfinite, int(counts.get(i, 0)))
            seq.flags |= state_flags(m, threshold)

    @property
    def overflow_threshold(self) -> float:
        """|state| at or above this flags "overflow": the config's, else the arm's format max."""
        t = self.config.overflow_threshold
        return self.state.state_format.max_finite if t is None else t

    def _choose(self, seqs: list[Sequence], logits: torch.Tensor, greedy: list[int]) -> list[int]:
        """The next token of each sequence: its greedy token (`greedy`, the argmax: untouched for
        greedy requests), or a coupled Gumbel-max draw; records log-probabilities where asked.
        A teacher-forced sequence's entry is ignored by the caller."""
        tokens = list(greedy)
        drawn = [i for i, s in enumerate(seqs) if s.sample_seed is not None and s.forced is None]
        if drawn:
            keys = [
                row_key(seqs[i].sample_seed, seqs[i].params.sample_index, seqs[i].n_generated) for i in drawn
            ]
            picks = sample_rows(logits[drawn], [seqs[i].params for i in drawn], keys)
            for i, t in zip(drawn, picks):
                tokens[i] = t
        asked = [i for i, s in enumerate(seqs) if s.logprobs is not None and s.forced is None]
        if asked:
            rows = token_logprobs(
                logits[asked], [tokens[i] for i in asked], [seqs[i].params.logprobs for i in asked]
            )
            for i, row in zip(asked, rows):
                seqs[i].logprobs.append(row)
        return tokens

    def _prompt_logprob_rows(self, seq: Sequence, start: int, lg: torch.Tensor) -> None:
        """Log-probabilities of the prompt tokens that logits rows start.. predict (prefill mode)."""
        n = min(lg.shape[0], seq.n_prompt - 1 - start)
        if n <= 0:
            return
        targets = seq.token_ids[start + 1 : start + 1 + n]
        seq.prompt_logprobs.extend(token_logprobs(lg[:n], targets, [seq.params.prompt_logprobs] * n))

    def _score_rows(self, seq: Sequence, start: int, n: int, lg: torch.Tensor) -> None:
        """Add the log-probs of the continuation tokens predicted by these logits rows."""
        positions = self.runner._want_rows(seq, start, n, all_logits=False)
        targets = torch.tensor([seq.token_ids[p + 1] for p in positions], device=lg.device)
        logp = torch.log_softmax(lg, dim=-1)
        picked = logp.gather(1, targets[:, None])[:, 0]
        seq.logprob += float(picked.double().sum())
        seq.is_greedy = seq.is_greedy and bool((lg.argmax(-1) == targets).all())

    def _fork(self, parent: Sequence, logits: torch.Tensor) -> list[Output]:
        """Start the forced answer of `parent` from its post-prompt state (in its reserved slot)."""
        answer = parent.fork_answer
        child = Sequence(
            parent.token_ids[: parent.n_prompt],
            SamplingParams(max_new_tokens=len(answer)),
            request_id=parent.fork_request_id,
        )
        child.forced, child.forced_score = answer, ForcedScore(tokens=answer)
        child.slot, child.block_table = parent.fork_slot, parent.fork_blocks
        parent.fork_slot, parent.fork_blocks = None, []
        child.num_computed = parent.num_computed
        child.flags, child.state_max_abs = set(parent.flags), parent.state_max_abs
        child.state_layer_max_abs = list(parent.state_layer_max_abs)
        child.state_nonfinite = parent.state_nonfinite
        child.t_first_token = parent.t_first_token
        copy_sequence_state(self.state, self.runner, parent, child)
        child.status = Status.DECODE
        self._live[child.request_id] = child
        self._fork_ids.pop(parent.request_id, None)
        self._force(child, logits)
        if child.finish_reason:
            self.scheduler.finish(child)
            return [self._output(child)]
        self.scheduler.decoding.append(child)
        return []

    def _force(self, seq: Sequence, logits: torch.Tensor) -> None:
        self._force_rows([seq], logits)

    def _force_rows(self, seqs: list[Sequence], logits: torch.Tensor) -> None:
        """Score the next answer token of each teacher-forced sequence (one logits row each), then
        queue that token as the next decode input, or finish after the last one."""
        nxt = [s.forced[len(s.forced_score.token_logprobs)] for s in seqs]
        targets = torch.tensor(nxt, dtype=torch.long, device=logits.device)
        logps, margins = row_scores(logits, targets)
        for seq, tok, lp, mg in zip(seqs, nxt, logps, margins):
            seq.forced_score.token_logprobs.append(lp)
            seq.forced_score.margins.append(mg)
            if len(seq.forced_score.token_logprobs) == len(seq.forced):
                seq.finish_reason = "length"
            else:
                seq.token_ids.append(tok)

    def _append(self, seq: Sequence, tok: int) -> None:
        seq.token_ids.append(tok)
        p = seq.params
        n = seq.n_generated
        if n >= p.min_tokens:
            if tok in self.eos_ids and not p.ignore_eos:
                seq.finish_reason = "eos"
                return
            if tok in p.stop_token_ids:
                seq.finish_reason = "stop"
                return
            # after the previous token the strings were checked too (none found) if it was past min_tokens
            if p.stop and self.stops.completed(seq.token_ids, n, p.stop, n - 1 >= max(p.min_tokens, 1)):
                seq.finish_reason = "stop"
                return
        if n >= p.max_new_tokens or len(seq.token_ids) >= self.config.max_model_len:
            seq.finish_reason = "length"

    def _output(self, seq: Sequence) -> Output:
        self._live.pop(seq.request_id, None)
        gen = seq.generated
        text = self.tokenizer.decode(gen, skip_special_tokens=True) if self.tokenizer is not None else ""
        if seq.finish_reason == "stop" and seq.params.stop:
            cut = [i for i in (text.find(s) for s in seq.params.stop) if i >= 0]
            if cut:
                text = text[: min(cut)]
        if not seq.is_scoring and is_repetition(gen):
            seq.flags.add("repetition")
        now = time.perf_counter()
        timings = {"total_s": now - seq.t_arrival}
        if seq.t_first_token is not None:
            timings["first_token_s"] = seq.t_first_token - seq.t_arrival
        return Output(
            request_id=seq.request_id,
            token_ids=gen,
            text=text,
            finish_reason=seq.finish_reason or "length",
            n_prompt=seq.n_prompt,
            n_generated=len(gen),
            flags=sorted(seq.flags),
            state_max_abs=seq.state_max_abs if self.state.kda else None,
            state_layer_max_abs=list(seq.state_layer_max_abs) if self.state.kda else None,
            state_nonfinite=seq.state_nonfinite if self.state.kda else None,
            timings=timings,
            forced=seq.forced_score,
            logprobs=seq.logprobs,
            prompt_logprobs=seq.prompt_logprobs,
        )

    # -- batch APIs ----------------------------------------------------------------------------
    def generate(
        self,
        prompts: Seq[Prompt],
        params: SamplingParams | Seq[SamplingParams] | None = None,
        use_tqdm: bool = True,
        on_finish: Callable[[int, Output], None] | None = None,
    ) -> list[Output]:
        """Greedy generation for every prompt; outputs in prompt order. `on_finish(index, output)` is
        called as soon as each one is done (index: position in `prompts`)."""
        params = params or SamplingParams()
        plist = list(params) if isinstance(params, (list, tuple)) else [params] * len(prompts)
        if len(plist) != len(prompts):
            raise InputError(f"{len(prompts)} prompts but {len(plist)} sampling params")
        rids = [self.add_request(p, sp) for p, sp in zip(prompts, plist)]
        results: dict[int, Output] = {}
        self._run(rids, results, on_finish, use_tqdm, "generate")
        return [results[r] for r in rids]

    def loglikelihood(
        self, requests: Seq[tuple[Seq[int], Seq[int]]], use_tqdm: bool = False
    ) -> list[tuple[float, bool]]:
        """(sum of log p(continuation | context), whether greedy decoding reproduces it) per pair."""
        rids, seqs = [], []
        for ctx, cont in requests:
            ctx, cont = [int(t) for t in ctx], [int(t) for t in cont]
            if not cont:
                raise InputError("loglikelihood: empty continuation")
            if not ctx:  # lm-eval's convention: condition on the end-of-text token
                ctx = [next(iter(sorted(self.eos_ids)))]
            rid = next(self._ids)
            seq = Sequence(ctx + cont, SamplingParams(max_new_tokens=0), request_id=rid, score_from=len(ctx))
            self.scheduler.add(seq)
            self._live[rid] = seq
            rids.append(rid)
            seqs.append(seq)
        results: dict[int, Output] = {}
        self._run(rids, results, None, use_tqdm, "loglikelihood")
        return [(s.logprob, s.is_greedy) for s in seqs]

    def forced_decode(
        self, requests: Seq[tuple[Prompt, Seq[int]]], use_tqdm: bool = False
    ) -> list[ForcedScore]:
        """Decode-mode teacher forcing of (prompt, answer ids) pairs (see `add_forced_request`);
        batch-invariant like generation: a pair's scores do not depend on the other pairs."""
        rids = [self.add_forced_request(p, a) for p, a in requests]
        results: dict[int, Output] = {}
        self._run(rids, results, None, use_tqdm, "forced decode")
        return [results[r].forced for r in rids]

    def _run(self, rids, results, on_finish, use_tqdm, desc) -> None:
        from tqdm.auto import tqdm

        index = {r: i for i, r in enumerate(rids)}
        wanted = set(rids)
        bar = tqdm(total=len(rids), desc=desc, dynamic_ncols=True, disable=not use_tqdm)
        st = self.stats
        base = {k: st[k] for k in ("prefill_tokens", "prefill_s", "decode_tokens", "decode_s")}

        def rate(kind: str) -> float:  # tokens per second spent in that phase
            return (st[f"{kind}_tokens"] - base[f"{kind}_tokens"]) / max(
                st[f"{kind}_s"] - base[f"{kind}_s"], 1e-9
            )

        try:
            while wanted - results.keys() and self.has_unfinished():
                for out in self.step().outputs:
                    if out.request_id in wanted:
                        results[out.request_id] = out
                        bar.update(1)
                        if on_finish is not None:
                            on_finish(index[out.request_id], out)
                bar.set_postfix_str(
                    f"prefill {rate('prefill'):,.0f} tok/s, decode {rate('decode'):,.0f} tok/s",
                    refresh=False,
                )
        finally:
            bar.close()

    def close(self) -> None:
        """Free the pools and CUDA graphs (the loaded weights stay with `self.loaded`)."""
        self.reset()
        self.runner.release_graphs()
        self.state = self.runner = self.scheduler = None
        if torch.cuda.is_available():
            import gc

            gc.collect()
            torch.cuda.empty_cache()

    # -- manifest ------------------------------------------------------------------------------
    @functools.cached_property
    def _weights_fingerprint(self) -> str | None:
        """Of the checkpoint on disk, read once per engine (describe() is called more than once per
        run); None for a model built in memory (benchmarks, tests)."""
        from evalkit.model.checkpoint import weights_fingerprint

        try:
            return weights_fingerprint(Path(self.loaded.path))
        except Exception:  # noqa: BLE001 - no directory or no safetensors files
            return None

    def kernels_record(self) -> dict[str, Any]:
        """The manifest's `kernels`: the run's `KernelChoice` in full, and the weights dtype that
        ran (what "auto" chose is part of what ran)."""
        return {
            **self.config.kernels.describe(),
            "weights_dtype": str(self.model.dtype).removeprefix("torch."),
        }

    def describe(self) -> dict[str, Any]:
        c = self.config
        dev = self.model.device
        return {
            "engine": "evalkit-local",
            "model": {
                "path": str(self.loaded.path),
                "config_hash": self.arch.config_hash,
                "weights_fingerprint": self._weights_fingerprint,
            },
            "state_dtype": c.arm.format.name,
            "state_format": c.state_format.describe(),
            "intra_chunk_dtype": c.arm.intra_chunk_dtype,
            "arm": c.arm.describe(),
            "kernels": self.kernels_record(),
            "kernel_build": kernel_build(dev),
            "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
            "model_dtype": str(self.model.dtype).replace("torch.", ""),
            "batch_invariant": c.batch_invariant,
            "batch_invariance": {
                "decode_width": c.decode_width if c.batch_invariant else None,
                "prefill_rows": c.max_num_batched_tokens if c.batch_invariant else None,
                "prefill_chunk_size": c.prefill_chunk_size,
                # store chunks of a sequence per prefill forward (None: as many as prefill_rows hold)
                "chunks_per_forward": c.chunks_per_forward,
                "kda_chunk_size": c.kda_chunk_size,
            },
            "max_num_seqs": c.max_num_seqs,
            "max_model_len": c.max_model_len,
            "cuda_graphs": self.runner.use_graphs,
            "cuda_graph_error": self.runner.graph_error,
            "twin_check": None
            if self.twin is None
            else {"every": c.twin_check, "summary": self.twin.summary()},
            "health": {"interval": c.health_interval, "overflow_threshold": self.overflow_threshold},
            "capacity": self.capacity().to_dict(),
        }

    def capacity(self, contexts: tuple[int, ...] = CAPACITY_CONTEXTS) -> Capacity:
        """What this arm's state costs per sequence, and how many sequences of each context fit in
        the memory the pools were given (GPU; on the CPU the bytes alone)."""
        c = self.config
        return plan_capacity(
            self.arch,
            c.arm.format.name,
            c.state_format.pool_dtype,
            self.model.dtype,
            c.block_size,
            self._pool_budget,
            contexts,
        )


def kernel_build(device: torch.device) -> str:
    """Which kernel code ran: backend + a hash of evalkit.kernels' sources (+ triton version)."""
    from evalkit import kernels

    root = Path(kernels.__file__).parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode())
        h.update(f.read_bytes())
    if device.type == "cuda" or kernels.use_triton(torch.empty(0)):
        import triton

        return f"triton-{triton.__version__}+src.{h.hexdigest()[:12]}"
    return f"torch-cpu-{torch.__version__}+src.{h.hexdigest()[:12]}"


__all__ = ["LLMEngine", "Status", "kernel_build"]
