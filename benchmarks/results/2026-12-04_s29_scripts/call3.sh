#!/usr/bin/env bash
# Session 29, call 3 (carry [".whl"]; HEAD 734a490): lossless in the server with session 28's attention (not run
# since): DDTREE 63 with the shipped tiny pair, TP = 1, CUDA graphs, batch 1 and 8, the tree attention on by default,
# teacher-forced against transformers (tie tolerance 0.12: session 27's largest stock-SGLang gap was 0.0565, so the
# default rule gives 0.113; no stock run here, for the device time).
set -u
python3 benchmarks/gpu/harness.py --site /tmp/site --pair shipped --speculative-algorithm DDTREE --budgets 63 \
  --runs sglang-ddtree63 --num-prompts 8 --max-new-tokens 32 --skip-engine --tie-tolerance 0.12 \
  --deadline 220 --out $OUT > $OUT/harness_ddtree63.log 2>&1
echo harness rc $?
grep -h "tree attention verify\|verify stays with\|tree GDN verify:" $OUT/*.log | sed 's/^.*sglang-/sglang-/' | sort | uniq -c | head
tail -n 24 $OUT/harness_ddtree63.log
