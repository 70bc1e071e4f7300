#!/usr/bin/env bash
# One device call (H200, <= 150 s): issue 42's goal 4, the main job's per-arm command from the
# command line (`python3 -m evalkit run --arm A`, the README's main job on one GPU), after the
# tokenizer stopped importing transformers (evalkit.json_tokenizer).
#   1. the first process on the fresh machine (fp16), its phases timed (scripts/startup_phases.py):
#      bytecode and Triton's cache both cold;
#   2. three warm repeats per arm (scripts/time_startup.py: wall, the run's own evaluation seconds,
#      the rest);
#   3. if time is left (started before 110 s): one fp16 process each with the new path, the old
#      tokenizer path (EVALKIT_TOKENIZER=transformers) and no bytecode (PYTHONDONTWRITEBYTECODE=1
#      with an empty PYTHONPYCACHEPREFIX: every module compiled from source, as the earlier
#      capacity-h200 timings likely ran: a prefix is the only place Python then reads bytecode from);
#   4. if time is left (started before 135 s): the phases of a warm fp16 process.
# Usage (device, from the repository root, carrying .whl): bash results/startup-h200/run.sh $OUT
set -u
OUT=${1:?usage: run.sh OUT}
EXTRA=${EXTRA:-}  # more `evalkit run` arguments (a dry run elsewhere: EXTRA="--limit 1"); none on the device
W=/tmp/startup-h200 && rm -rf $W && mkdir -p $W/runs "$OUT"
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }
log() { echo "[$(elapsed) s] $*" | tee -a $W/log.txt; }
{ echo "image env: PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE-<unset>} PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX-<unset>}"
  python3 -c "import sys; print('python', sys.version.split()[0], 'dont_write_bytecode', sys.flags.dont_write_bytecode)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  git log -1 --format='commit %h %s' 2>/dev/null || true; } > $W/env.txt 2>&1
source scripts/device_setup.sh >> $W/env.txt 2>&1
log "set-up done"
# An installed machine keeps the bytecode pip compiled; this image's site-packages take none and
# its environment may forbid writing any, so every process would compile every module it imports.
# Give it a writable cache and allow writing (recorded above: what the image had).
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/pycache
t0=$(date +%s%N)
python3 scripts/startup_phases.py --out $W/phases_cold_fp16.json -- --arm fp16 $EXTRA --out $W/runs/cold-fp16 \
  > $W/run-cold-fp16.txt 2>&1
rc=$?
log "cold first process (fp16): $(( ($(date +%s%N) - t0) / 1000000 )) ms wall, exit $rc"
for arm in fp16 fp32; do
  python3 scripts/time_startup.py --out $W/arm_$arm.json --repeats 3 -- --arm $arm $EXTRA >> $W/log.txt 2>&1
  rc=$?
  log "warm repeats $arm: exit $rc"
done
if [ "$(elapsed)" -lt 110 ]; then
  python3 scripts/time_startup.py --out $W/ab_fp16.json --repeats 1 --variant after \
    --variant before:EVALKIT_TOKENIZER=transformers \
    --variant nobytecode:PYTHONDONTWRITEBYTECODE=1,PYTHONPYCACHEPREFIX=/tmp/pycache-none \
    -- --arm fp16 $EXTRA >> $W/log.txt 2>&1
  rc=$?
  log "A/B (fp16): exit $rc"
else
  log "A/B skipped: no time left"
fi
if [ "$(elapsed)" -lt 135 ]; then
  t0=$(date +%s%N)
  python3 scripts/startup_phases.py --out $W/phases_warm_fp16.json -- --arm fp16 $EXTRA --out $W/runs/warm-fp16 \
    > $W/run-warm-fp16.txt 2>&1
  rc=$?
  log "warm phases (fp16): $(( ($(date +%s%N) - t0) / 1000000 )) ms wall, exit $rc"
else
  log "warm phases skipped: no time left"
fi
python3 -X importtime -c "import evalkit.cli, evalkit.arm, evalkit.engine, evalkit.backends.local, evalkit.json_tokenizer" 2> $W/importtime.txt
cp $W/log.txt $W/env.txt $W/arm_fp16.json $W/arm_fp32.json $W/phases_cold_fp16.json $W/phases_warm_fp16.json $OUT/ 2>/dev/null
[ -f $W/ab_fp16.json ] && cp $W/ab_fp16.json $OUT/
tar czf $OUT/startup-h200.tgz -C $W --exclude=runs --exclude=pycache . 2>/dev/null
ls -la $OUT
