#!/usr/bin/env bash
# The MLA prefill's context expanded once per forward (this commit) against once per store chunk
# (BEFORE, the parent commit), on this machine's CPU: one 16,384-token prompt on the tiny random
# Kimi-Linear model (KDA + MLA layers), fp16 state stored every 2,048 tokens, forwards of 16,384 rows
# (one forward, 8 store chunks), the "pieces" row of scripts/bench_long_prompt.py; the two builds
# alternate (before, after, before, after), 3 timed repeats each. The log-likelihood of the last
# 16 tokens must be the same in all four runs.
# Usage (repository root, clean tree): bash results/bench/mla-expand-once-cpu/run.sh BEFORE_COMMIT
set -eu
BEFORE=${1:?usage: run.sh BEFORE_COMMIT}
OUT=results/bench/mla-expand-once-cpu
TMP=$(mktemp -d)
git worktree add -q "$TMP/before" "$BEFORE"
trap 'git worktree remove --force "$TMP/before"; rm -rf "$TMP"' EXIT
for round in 1 2; do
  for build in before after; do
    src=$PWD; [ $build = before ] && src=$TMP/before
    (cd "$src" && PYTHONPATH="$src" python scripts/bench_long_prompt.py --out "$TMP/$build-$round" --arch tiny \
      --device cpu --len 16384 --budget 16384 --repeats 3 --state fp16 --rows pieces) > "$TMP/$build-$round.log" 2>&1
    cp "$TMP/$build-$round/bench_long_prompt.json" "$TMP/$build-$round.json"
    tail -n 2 "$TMP/$build-$round.log"
  done
done
mkdir -p "$TMP/keep" && cp "$TMP"/*.json "$TMP"/*.log "$TMP/keep/"
mv "$TMP/keep"/* "$OUT/"  # after the runs: the tree they ran from stays clean
