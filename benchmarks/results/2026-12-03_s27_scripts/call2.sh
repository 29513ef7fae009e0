#!/usr/bin/env bash
# Session 27, call 2 (carry [".whl"]; HEAD 0ee3003): the tree attention on by default (auto: an H200 with the
# harness's triton backend) for DFLASH and DDTREE 63 with the shipped tiny pair, TP = 1, CUDA graphs, batch 1 and 8,
# teacher-forced against transformers beside stock SGLang; then the SGLang-side tests on the GPU.
set -u
python3 benchmarks/gpu/harness.py --site /tmp/site --pair shipped --speculative-algorithm DFLASH DDTREE --budgets 63 \
  --runs sglang,sglang-dflash,sglang-ddtree63 --num-prompts 16 --max-new-tokens 48 --skip-engine \
  --deadline 470 --out $OUT > $OUT/harness_default.log 2>&1
echo harness rc $?
grep -h "tree attention verify\|verify stays with\|tree GDN verify:" $OUT/*.log | sed 's/^.*sglang-dflash:/sglang-dflash:/' | sort | uniq -c | head
PYTHONPATH=/tmp/site:$PWD timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_tree_attention_backend.py \
  tests/test_tree_attention.py > $OUT/gpu_tests.log 2>&1
echo tests rc $?; tail -n 3 $OUT/gpu_tests.log
tail -n 32 $OUT/harness_default.log
