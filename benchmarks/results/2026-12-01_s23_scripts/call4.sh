#!/usr/bin/env bash
# Session 23, call 4 (carry [".whl"]): call 3's DDTREE 63 run, which its deadline stopped while SGLang started (each
# SGLang configuration takes about 105 s here), alone: the plugin inside stock SGLang with PDL on.
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 250 python3 benchmarks/gpu/harness.py --site /tmp/site --pair shipped --speculative-algorithm DDTREE \
  --budgets 63 --runs sglang-ddtree63 --num-prompts 16 --max-new-tokens 48 --skip-engine \
  --deadline 235 --out /tmp/h > $L/harness.log 2>&1; echo harness rc $?
tar -czf $L/harness_out.tgz -C /tmp h  # at most 8 files come back
echo "== summary"; tail -12 $L/harness.log; grep -n "tree GDN\|Traceback" /tmp/h/sglang-ddtree63.log | head -5
