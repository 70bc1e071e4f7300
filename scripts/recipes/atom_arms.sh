#!/usr/bin/env bash
# atom: one server per state-dtype arm, `evalkit run` against each, then `evalkit compare`.
#   scripts/recipes/atom_arms.sh MODEL [TASKS] [ARMS]   (see arms.sh for the environment knobs)
exec "$(dirname "$0")/arms.sh" atom "$@"
