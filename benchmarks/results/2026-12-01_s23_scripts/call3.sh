#!/usr/bin/env bash
# Session 23, call 3 (carry [".whl"], filled by benchmarks/gpu/fetch_wheels.sh): the SGLang plugin inside stock SGLang
# 0.5.10.post1 with PDL on (the default since session 22; never run there before), TP=1, CUDA graphs, the shipped pair:
# DFLASH and DDTREE 63 judged teacher-forced against transformers. Then the vocabulary pass's GPU tests on the int32
# keys (call 1 stopped them at 100 s) and bench_ddtree on HEAD + vocab_key32.
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 300 python3 benchmarks/gpu/harness.py --site /tmp/site --pair shipped --speculative-algorithm DFLASH DDTREE \
  --budgets 63 --runs sglang,sglang-dflash,sglang-ddtree63 --num-prompts 16 --max-new-tokens 48 --skip-engine \
  --deadline 280 --out /tmp/h > $L/harness.log 2>&1; echo harness rc $?
tar -czf $L/harness_out.tgz -C /tmp h  # at most 8 files come back
timeout 150 python3 -m pytest -q tests/test_triton_tree_kernels.py -k "draft_top_k" > $L/tests_vocab.log 2>&1; echo tests rc $?
timeout 110 python3 benchmarks/bench_ddtree.py --requests 1,8 --budgets 16,64 --out $L > $L/ddtree.log 2>&1; echo ddtree rc $?
echo "== summary"; tail -1 $L/tests_vocab.log; tail -14 $L/harness.log; grep -il "griddepcontrol\|error" /tmp/h/*.log | head; tail -5 $L/ddtree.log
