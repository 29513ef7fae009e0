#!/bin/bash
# The GPU run behind the tiny pair v2 (sglang_dflash/assets/tiny-pair/draft), as sent to one H200:
#   bash benchmarks/results/2026-11-29_h200_tiny_pair_v2.sh   (carrying build/tinypair, OUT set)
# The target is the shipped one, unchanged. Stage 1 generates target-greedy rollouts once; stage 2 trains three
# drafter variants at the same time on the GPU from that pool, each ending by the same wall-clock deadline.
# build/tinypair/corpus.pt came from the 2-core CPU machine (Python 3.11.7's stdlib with its test suite):
#   python benchmarks/train_tiny_pair.py --out /tmp/tp_tok --tokenizer sglang_dflash/assets/tiny-pair/target \
#       --write-corpus build/tinypair/corpus.pt
# SMOKE=1 runs the same flow on the CPU at toy scale (OUT defaults to /tmp/tp2-out).
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/tp2-out}
W=/tmp/tp2
rm -rf "$W" && mkdir -p "$W" "$OUT"
S=benchmarks/train_tiny_pair.py
PY=${PY:-python3}
if [ "${SMOKE:-0}" = 1 ]; then
  DEV=cpu DEADLINE=150 ROLL="--rollouts 96 --rollout-batch 48 --rollout-time 5" SEQ=64 VAL=8 DRAFT="--draft-batch 8 --anchors 8 --eval-every 10"
else
  DEV=cuda DEADLINE=${DEADLINE:-450} ROLL="--rollouts 65536 --rollout-batch 8192 --rollout-time ${ROLL_TIME:-60}" SEQ=192 VAL=256 DRAFT="--draft-batch 128 --anchors 32"
fi
COMMON="--skip-target --device $DEV --corpus build/tinypair/corpus.pt --rollouts-file $W/rollouts.pt --draft-seq-len $SEQ --draft-val $VAL --bar-interval 30 --skip-eval"
(nvidia-smi --query-gpu=timestamp,name,utilization.gpu,memory.used,memory.total --format=csv -l 15 >"$OUT/gpu.log" 2>&1 &
 echo $! >"$W/smi.pid")
for v in roll a b c; do mkdir -p "$W/$v" && cp -r sglang_dflash/assets/tiny-pair/target "$W/$v/"; done

echo "[$SECONDS s] stage 1: rollouts" | tee "$OUT/run.log"
$PY $S --out "$W/roll" $COMMON $ROLL --rollouts-only >"$OUT/rollouts.log" 2>&1 || { echo "rollouts failed" | tee -a "$OUT/run.log"; tail -30 "$OUT/rollouts.log"; exit 1; }
grep -a "rollouts:" "$OUT/rollouts.log" | tail -3

DT=$((DEADLINE - SECONDS - 50))
[ $DT -lt 30 ] && DT=30
echo "[$SECONDS s] stage 2: three drafters, --draft-time $DT each" | tee -a "$OUT/run.log"
declare -A VARIANT=(
  [a]="--draft-layers 3"
  [b]="--draft-layers 3 --draft-tap-ids 1,3,5,6"
  [c]="--draft-layers 5 --draft-tap-ids 1,3,5,6"
)
for v in a b c; do
  $PY $S --out "$W/$v" $COMMON ${VARIANT[$v]} --cache-taps $DRAFT --draft-steps 100000 --draft-time $DT >"$OUT/$v.log" 2>&1 &
done
wait
echo "[$SECONDS s] done" | tee -a "$OUT/run.log"
for v in a b c; do echo "== $v: ${VARIANT[$v]}"; grep -a "drafter step\|drafter done\|cached\|GDN path\|Error" "$OUT/$v.log" | tail -6; done | tee -a "$OUT/run.log"
kill "$(cat "$W/smi.pid")" 2>/dev/null
cp "$W/roll/summary.json" "$W/roll_summary.json"
tar -C "$W" -cf "$OUT/drafts.tar" a/draft a/summary.json b/draft b/summary.json c/draft c/summary.json roll_summary.json
ls -la "$OUT"
