#!/usr/bin/env bash
# CPU (this repository's venv): the long-prompt benchmark's schedules on the tiny random Kimi-Linear
# model (KDA + MLA layers) at 16k tokens, fp16 state stored every 2,048 tokens, 16,384-token
# forwards: several store chunks per forward against one per forward, and the same numbers check.
# Times are this machine's CPU and mean little for the GPU; the figures that count are the forward
# counts and same_numbers.
set -eu
python scripts/bench_long_prompt.py --out results/bench/long-prompt-cpu --arch tiny --device cpu \
  --len 16384 --budget 16384 --repeats 3 --state fp16 2>&1 | tee /tmp/long-prompt-cpu.log
mv /tmp/long-prompt-cpu.log results/bench/long-prompt-cpu/log.txt  # after the run: its tree stays clean
