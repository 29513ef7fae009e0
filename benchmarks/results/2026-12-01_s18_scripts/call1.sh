#!/usr/bin/env bash
# Session 18, call 1: the CUDA engine test (greedy DFLASH/DDTREE against transformers, not run since c8d8f8f), then
# session 17's two prepared patches against HEAD in the same run (gdn_exp2.patch, attention_unnormalised.patch).
# Trees: ab/main = git archive HEAD sglang_dflash (without assets/tiny-pair); ab/exp2, ab/unnorm = it + the patch.
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 180 python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/engine_cuda.log 2>&1; echo engine rc $?
timeout 200 python3 benchmarks/ab_trees.py gdn main=ab/main exp2=ab/exp2 --out $L > $L/ab_gdn.log 2>&1; echo gdn rc $?
timeout 150 python3 benchmarks/ab_trees.py attention main=ab/main unnorm=ab/unnorm --out $L > $L/ab_attention.log 2>&1; echo attn rc $?
echo "== summary"; tail -1 $L/engine_cuda.log; tail -14 $L/ab_gdn.log | cut -c1-200; tail -8 $L/ab_attention.log | cut -c1-200
