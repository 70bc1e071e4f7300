#!/usr/bin/env bash
# sglang: one server per state-dtype arm, `evalkit run` against each, then `evalkit compare`.
#   scripts/recipes/sglang_arms.sh MODEL [TASKS] [ARMS]   (see arms.sh for the environment knobs)
exec "$(dirname "$0")/arms.sh" sglang "$@"
