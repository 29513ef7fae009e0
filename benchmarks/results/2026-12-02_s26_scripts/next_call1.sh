#!/usr/bin/env bash
# Prepared in session 26 (not run: the device time ran out). The opt-in tree attention of the full-attention layers
# (SGLANG_DFLASH_TREE_ATTENTION=1) inside SGLang for the first time: DDTREE 63 with the shipped tiny pair, TP = 1,
# CUDA graphs, batch 1 and 8, teacher-forced against transformers beside stock SGLang (the bound on near ties).
# --plugin-env applies to every plugin run, so the run without it is session 23's (call 4: DDTREE 63 3.17 tokens a
# pass, largest gap 0.0711, the same command without --plugin-env).
# Carry [".whl"] (the harness's wheels, .whl/gpu/ and the sglang wheel). About 9 minutes; --deadline keeps it in the call.
# Look for: the verdict lines; "tree attention verify in the full-attention layers" in the plugin run's log; tokens per
# pass near 3.17.
set -u
python3 benchmarks/gpu/harness.py --site /tmp/site --pair shipped --speculative-algorithm DDTREE --budgets 63 \
  --runs sglang,sglang-ddtree63 --num-prompts 16 --max-new-tokens 48 --skip-engine \
  --plugin-env SGLANG_DFLASH_TREE_ATTENTION=1 --deadline 540 --out $OUT > $OUT/harness_attention.log 2>&1
echo harness rc $?
tail -n 30 $OUT/harness_attention.log
grep -h "tree attention verify\|tree GDN verify" $OUT/*.log | sort | uniq -c | head
