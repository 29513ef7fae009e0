#!/usr/bin/env bash
# Prepared in session 27 (not run: the device time ran out). The tree attention against SGLang's flashinfer backend
# inside the server (SGLang's pick on Hopper for DDTREE's trees; every server run so far used the triton backend):
# DDTREE 63 step costs at Qwen3.6-27B shapes of one TP=2 rank, dummy weights, TP = 1, 8 prompts x 48 tokens (batch 8
# = 8 requests), with the tree attention (the default) and with FlashInfer's custom-mask prefill (-backendattn).
# FlashInfer JIT-builds its kernels with the machine's nvcc at start-up (minutes: the first run pays it).
# Carry [".whl"]. Look for: each batch size's 20th step kernels (FlashInfer's prefill kernel names against
# _tree_attention_kernel + _merge_kernel) and the verify column of both runs (one machine start: comparable).
# If the flashinfer backend does not start with the sgl_kernel stand-in, the run's log says why; record that.
set -u
python3 benchmarks/gpu/sglang_step_costs.py --site /tmp/site --tp 1 --tp2-shard --budgets 63 --also-backend-attention \
  --attention-backend flashinfer --runs sglang-ddtree63-backendattn,sglang-ddtree63 --num-prompts 8 --max-new-tokens 48 \
  --deadline 560 --out $OUT > $OUT/next_call1.log 2>&1
echo step costs rc $?
for f in $OUT/*.kernels.txt; do echo "== $(basename $f)"; head -14 $f | awk '/^step/ {print; next} NF > 6 {print $1, $2, $(NF-4), $(NF-1), $NF}'; grep -h "_tree_attention_kernel\|_merge_kernel" $f | awk '{print $1, $(NF-4), $(NF-1), $NF}'; done
grep -h "Error\|error" $OUT/*.log | sort | uniq -c | sort -rn | head -5
grep "^| sglang\|^\[" $OUT/next_call1.log | cut -c1-220 | tail -12
