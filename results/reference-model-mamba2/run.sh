#!/usr/bin/env bash
# One call on one H200 (issue 41): train the Mamba2 reference model (scripts/train_reference_model.py
# --arch mamba2: same sizes, data and loss as the KDA model and its GDN twin), then, on the same
# questions as the KDA/GDN records, every part bounded by the call's deadline and run side by side:
#   retrieval  passkey, niah_single_1 at 8k, 16k, 32k (the cells of results/reference-model{,-gdn}/h200/retrieval;
#              those ran task version 1, the tasks are at version 2 now: for the three families on the
#              same prompts use results/retrieval-three-families-h100/run.sh)
#   short      copy_list, kv_recite, kv_recite_long at 2k (the decode-heavy cells of the main job)
#   suite      the cells the training run's quick evaluation put in the 30-90% band (model/suite.json), if any
#   drift-32k  `evalkit drift` via scripts/gpu_drift.py: 16 prompts x 32k, fp32 weights, prefill and
#              decode modes, A/A floor (as results/reference-model{,-gdn}/h200/drift-32k)
# Arms, in the order they run (a part cut at the deadline keeps the arms it finished):
#   fp32 (baseline), fp16, bf16, m3-rtz (positive control), then the full-vs-chunked prefill factor:
#   fp16 and bf16 with one store at the prompt's end (@chunk=$CHUNK_FULL >= every prompt) against a
#   store every 2048 tokens (the default chunk: the fp16/bf16 arms) and every $CHUNK_SMALL tokens;
#   then the ladder m5, m4, m3, m2 and fp8_e4m3.
# Outputs in $OUT: m2.tar.gz (the trainer's bundle: checkpoint, recipe, loss curve, quick eval, card;
# kept current at every checkpoint), part.* (a tar of the sweeps without prompt text, drift studies
# and logs, split at 7 MB), call.log. Install with
#   python scripts/train_reference_model.py --arch mamba2 --install-from m2.tar.gz
# Device (repository root; nothing else):
#   bash results/reference-model-mamba2/run.sh
# Two calls on one machine kept warm (more training): TRAIN_MIN=9 PARTS= bash ...run.sh, then
# TRAIN=0 bash ...run.sh (the second call reuses /tmp/m2w/train and gives the parts the whole call;
# with RESUME=1 a sweep cut at an earlier call's deadline goes on from the arms it finished;
# on a fresh machine M2_BUNDLE=path/to/m2.tar.gz, carried, or else the installed
# models/reference-model-mamba2, stands in for it).
# A cold machine spends ~5 minutes compiling and autotuning FLA's chunk_gla (fwd + bwd) before the
# clock could start (call 1: 283 s). WARM_ONLY=1 runs only the trainer's check and warm-up (Triton's
# on-disk caches keep what they compiled and chose); the next call on the still-warm machine then
# trains TRAIN_SECONDS (the GDN twin's 298 s by default) from a hot cache, the budget permitting.
# CPU dry path (a tiny CPU training run, two questions a cell, short prompts; checks the script,
# measures nothing):
#   DRY=1 OUT=/tmp/m2dry PY=.venv/bin/python bash results/reference-model-mamba2/run.sh
[ "${DRY:-0}" = 1 ] || source scripts/device_setup.sh
set -u
start=$(( $(date +%s) - SECONDS ))  # the call's start: the setup above counts too
OUT_DIR=${OUT:?set OUT to the output folder}
PY=${PY:-python3}
CALL_S=${CALL_S:-560}    # the whole call's wall budget (the device allows 600 s a command)
PACK_S=${PACK_S:-40}     # kept for packing the outputs
W=${WORK:-/tmp/m2w}
if [ "${DRY:-0}" = 1 ]; then
  DEVICE=cpu; TRAIN_ARGS=(--device cpu --tiny --minutes "${TRAIN_MIN:-0.3}")
  LIMIT=${LIMIT:-2}; RET_LENGTHS=${RET_LENGTHS:-512}; SHORT_TASKS=${SHORT_TASKS:-copy_list,kv_recite}
  SHORT_LENGTHS=${SHORT_LENGTHS:-1k}; CHUNK_SMALL=${CHUNK_SMALL:-64}
  DRIFT_ARGS=(--device cpu --smoke --prompts 2 --ref-length 512 --ref-chunk 64 --decode-block 64)
else
  DEVICE=cuda; TRAIN_ARGS=(--minutes "${TRAIN_MIN:-5}" --train-seconds "${TRAIN_SECONDS:-298}")
  LIMIT=${LIMIT:-100}; RET_LENGTHS=${RET_LENGTHS:-8k,16k,32k}; SHORT_TASKS=${SHORT_TASKS:-copy_list,kv_recite,kv_recite_long}
  SHORT_LENGTHS=${SHORT_LENGTHS:-2k}; CHUNK_SMALL=${CHUNK_SMALL:-256}
  DRIFT_ARGS=(--prompts 16 --ref-length "${DRIFT_LENGTH:-32768}")
fi
CHUNK_FULL=${CHUNK_FULL:-65536}
ARMS=${ARMS:-fp32,fp16,bf16,m3-rtz,fp16@chunk=$CHUNK_FULL,bf16@chunk=$CHUNK_FULL,fp16@chunk=$CHUNK_SMALL,bf16@chunk=$CHUNK_SMALL,m5,m4,m3,m2,fp8_e4m3}
RET_TASKS=${RET_TASKS:-passkey,niah_single_1}
PARTS=${PARTS-retrieval,short,suite,drift-32k}  # set and empty: none
export PYTHONUNBUFFERED=1
if [ "${TRAIN:-1}" = 1 ]; then rm -rf "$W"; else  # a later call redoes only its own parts
  rm -rf "$W/pack"  # RESUME=1: the sweeps keep the arms an earlier call on this machine finished
  [ "${RESUME:-0}" = 1 ] || for part in ${PARTS//,/ }; do rm -rf "${W:?}/$part" "$W/$part".*; done
fi
mkdir -p "$W" "$OUT_DIR"
# TRAIN=0 on a fresh machine: M2_BUNDLE (the first call's m2.tar.gz, carried) holds the model
if [ "${TRAIN:-1}" != 1 ] && [ ! -f "$W/train/model/config.json" ]; then
  if [ -f "${M2_BUNDLE:-}" ]; then mkdir -p "$W/train" && tar -xzf "$M2_BUNDLE" -C "$W/train"
  elif [ -f models/reference-model-mamba2/config.json ]; then  # the installed model
    mkdir -p "$W/train" && cp -r models/reference-model-mamba2 "$W/train/model"
  fi
fi
exec > >(tee "$OUT_DIR/call.log") 2>&1
echo "start $(date +%T); device $DEVICE; arms $ARMS; limit $LIMIT; parts $PARTS"
left() { echo $(( start + CALL_S - PACK_S - $(date +%s) )); }

# -- train (the trainer keeps $OUT/m2.tar.gz current at every checkpoint); TRAIN=0: the model a
# previous call trained on this still-warm machine ($W/train), the whole call for the parts ------
if [ "${WARM_ONLY:-0}" = 1 ]; then
  timeout "$(left)" "$PY" scripts/train_reference_model.py --arch mamba2 --out "$W/warm" "${TRAIN_ARGS[@]}" \
    --warm-only > "$W/warm.log" 2>&1
  echo "warm-only rc=$? after $(( $(date +%s) - start )) s"
  grep -E "scan check|kernel warm-up|warm-only" "$W/warm.log"; cp "$W/warm.log" "$OUT_DIR/"
  exit 0
fi
if [ "${TRAIN:-1}" = 1 ]; then
  "$PY" scripts/train_reference_model.py --arch mamba2 --out "$W/train" --bundle "$OUT_DIR/m2.tar.gz" \
    "${TRAIN_ARGS[@]}" > "$W/train.log" 2>&1
  echo "train rc=$? after $(( $(date +%s) - start )) s"
fi
grep -E "model:|scan check|kernel warm-up|training done|default suite|eval " "$W/train.log" | tail -n 30
MODEL=$W/train/model
[ -f "$MODEL/config.json" ] || { echo "no checkpoint: stopping"; exit 1; }

# -- the parts, side by side on the one GPU, each until the deadline ------------------------------
S=$(left)
echo "parts get $S s each"
sweep() {  # name tasks lengths
  timeout "$S" "$PY" -m evalkit sweep --device "$DEVICE" --model "$MODEL" --arms "$ARMS" --tasks "$2" \
    --lengths "$3" --limit "$LIMIT" --margin 0.05 --no-progress --out "$W/$1" > "$W/$1.log" 2>&1
  echo "sweep $1 rc=$? after $(( $(date +%s) - start )) s"
}
has() { [[ ",$PARTS," == *",$1,"* ]]; }
pids=()  # `wait` alone would also wait for the tee of the log
if has retrieval; then sweep retrieval "$RET_TASKS" "$RET_LENGTHS" & pids+=($!); fi
if has short; then sweep short "$SHORT_TASKS" "$SHORT_LENGTHS" & pids+=($!); fi
if has suite && [ -f "$MODEL/suite.json" ]; then
  read -r SUITE_TASKS SUITE_LENGTHS < <("$PY" -c "import json,sys; s=json.load(open(sys.argv[1])); \
print(','.join(s['tasks']), ','.join(map(str, s['lengths'])))" "$MODEL/suite.json")
  echo "suite: $SUITE_TASKS at $SUITE_LENGTHS"
  sweep suite "$SUITE_TASKS" "$SUITE_LENGTHS" & pids+=($!)
fi
if has drift-32k; then
  ( "$PY" scripts/gpu_drift.py --out "$W/drift-32k" --parts ref-fp32 --ref-model "$MODEL" "${DRIFT_ARGS[@]}" \
      --max-minutes "$("$PY" -c "print(max(0.5, ($S - 20) / 60))")" > "$W/drift-32k.log" 2>&1
    echo "drift rc=$? after $(( $(date +%s) - start )) s" ) & pids+=($!)
fi
[ ${#pids[@]} -eq 0 ] || wait "${pids[@]}"

# -- reports of what finished (a sweep cut at the deadline has no report yet) ----------------------
for part in retrieval short suite; do
  [ -d "$W/$part" ] || continue
  "$PY" -m evalkit sweep --report-only --arms "$ARMS" --out "$W/$part" > "$W/$part.report.log" 2>&1
  echo "=== $part (report rc=$?)"; grep -E '^\| `|Bits of margin' "$W/$part.report.log" | head -n 40
done
[ -d "$W/drift-32k" ] && { echo "=== drift-32k"; tail -n 4 "$W/drift-32k.log"; }

# -- pack -----------------------------------------------------------------------------------------
P=$W/pack/mamba2
mkdir -p "$P"
dirs=(); for part in retrieval short suite; do [ -d "$W/$part" ] && dirs+=("$W/$part"); done
[ ${#dirs[@]} -gt 0 ] && "$PY" scripts/copy_run_dirs.py --drop-token-arrays "${dirs[@]}" "$P"
[ -d "$W/drift-32k" ] && cp -r "$W/drift-32k" "$P/"
cp "$W"/*.log "$P/" 2>/dev/null
tar -czf - -C "$W/pack" mamba2 | split -b 7000000 - "$OUT_DIR/part."
ls -la "$OUT_DIR"
echo "end $(date +%T) after $(( $(date +%s) - start )) s"
