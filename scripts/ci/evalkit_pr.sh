#!/usr/bin/env bash
# evalkit on a pull request: evaluate two arms (or take two finished run directories), run the
# gated paired comparison, post its brief Markdown as a PR comment (updated in place on re-runs),
# and exit with the gate's code so the job fails when the candidate is not shown non-inferior.
#
#   bash scripts/ci/evalkit_pr.sh OUT_DIR
#
# The arms, one pair of:
#   EVALKIT_BASELINE_URL, EVALKIT_CANDIDATE_URL  OpenAI-compatible servers (`evalkit run --server`)
#   EVALKIT_BASELINE_RUN, EVALKIT_CANDIDATE_RUN  run directories made elsewhere (e.g. artifacts)
# Options (environment):
#   EVALKIT_MODEL         the served model's name (and tokenizer, if a local folder)
#   EVALKIT_TASKS         tasks to evaluate (gsm8k)
#   EVALKIT_LIMIT         questions per task (all)
#   EVALKIT_RUN_ARGS      more `evalkit run` options, e.g. "--concurrency 32 --tokenizer ORG/NAME"
#   EVALKIT_BASELINE_LABEL, EVALKIT_CANDIDATE_LABEL   arm labels (baseline, candidate)
#   EVALKIT_FAIL_ON       the gate: loss | not-noninferior | inconclusive (not-noninferior)
#   EVALKIT_COMPARE_ARGS  more `evalkit compare` options, e.g. "--margin 0.02"
#   EVALKIT_POST_COMMENT  1 to post the comment (default 1; needs GITHUB_TOKEN in a PR event)
#   EVALKIT, PYTHON       the evalkit command and the Python that has evalkit (evalkit, python3)
# Writes OUT_DIR/{baseline,candidate}/ (when evaluated), comment.md, compare.json, compare.txt.
# Exit: 0 the gate passed, 1 it failed, 2 a usage or input error.
set -euo pipefail

OUT=${1:?usage: evalkit_pr.sh OUT_DIR}
EVALKIT=${EVALKIT:-evalkit}
PYTHON=${PYTHON:-python3}
TASKS=${EVALKIT_TASKS:-gsm8k}
FAIL_ON=${EVALKIT_FAIL_ON:-not-noninferior}
BASE_LABEL=${EVALKIT_BASELINE_LABEL:-baseline}
CAND_LABEL=${EVALKIT_CANDIDATE_LABEL:-candidate}
mkdir -p "$OUT"

say() { echo "evalkit_pr: $*" >&2; }

# evaluate ARM_LABEL SERVER_URL: one `evalkit run` against a server, into OUT/ARM_LABEL
evaluate() {
    say "evaluating $1 on $2"
    # shellcheck disable=SC2086  # EVALKIT_RUN_ARGS is a list of options
    "$EVALKIT" run --server "$2" --arm "$1" --tasks "$TASKS" --out "$OUT/$1" \
        ${EVALKIT_MODEL:+--model "$EVALKIT_MODEL"} ${EVALKIT_LIMIT:+--limit "$EVALKIT_LIMIT"} \
        ${EVALKIT_RUN_ARGS:-} >&2
}

if [ -n "${EVALKIT_BASELINE_RUN:-}" ] && [ -n "${EVALKIT_CANDIDATE_RUN:-}" ]; then
    BASE=$EVALKIT_BASELINE_RUN
    CAND=$EVALKIT_CANDIDATE_RUN
elif [ -n "${EVALKIT_BASELINE_URL:-}" ] && [ -n "${EVALKIT_CANDIDATE_URL:-}" ]; then
    evaluate "$BASE_LABEL" "$EVALKIT_BASELINE_URL"
    evaluate "$CAND_LABEL" "$EVALKIT_CANDIDATE_URL"
    BASE=$OUT/$BASE_LABEL
    CAND=$OUT/$CAND_LABEL
else
    say "error: set EVALKIT_BASELINE_URL and EVALKIT_CANDIDATE_URL (servers) or EVALKIT_BASELINE_RUN and EVALKIT_CANDIDATE_RUN (run directories)"
    exit 2
fi

say "comparing $CAND against $BASE (gate: --fail-on $FAIL_ON)"
set +e
# shellcheck disable=SC2086  # EVALKIT_COMPARE_ARGS is a list of options
"$EVALKIT" compare "$BASE" "$CAND" --fail-on "$FAIL_ON" --brief \
    --md "$OUT/comment.md" --json "$OUT/compare.json" ${EVALKIT_COMPARE_ARGS:-} >"$OUT/compare.txt"
rc=$?
set -e
if [ "$rc" -ge 2 ]; then
    say "error: evalkit compare could not compare the runs (exit $rc)"
    exit "$rc"
fi

# the job summary: `evalkit compare` itself appends its brief report to $GITHUB_STEP_SUMMARY, once
if [ "${EVALKIT_POST_COMMENT:-1}" = 1 ]; then
    # a comment that cannot be posted (a fork's read-only token) must not hide the gate's result
    "$PYTHON" -m evalkit.ci.github_comment --file "$OUT/comment.md" || say "warning: comment not posted"
fi
if [ "$rc" -eq 1 ]; then
    say "gate failed: --fail-on $FAIL_ON (see $OUT/comment.md)"
else
    say "gate passed: --fail-on $FAIL_ON"
fi
exit "$rc"
