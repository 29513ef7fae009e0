#!/usr/bin/env bash
# For session 21's first call (written in session 20, not run: no device time left). About 8 minutes, carry ab.
# walk_packed_index.patch: the pair-reading walk's index pass also reads the block as int32 words and compares both
# halves as floats (-0 == +0), instead of a bf16 load converted element by element. ptxas (Triton 3.8, R = 8 x 65,
# 8 rows a round): sm_90a 2,776 -> 2,600 instructions and 128 registers with 52 B of spills -> 174 without; sm_86
# 237 -> 168 registers. The interpreter does not run the pairs: the GPU walk tests are its tests.
# First, on the CPU machine:
#   D=benchmarks/results/2026-12-01_s20_scripts; rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash \
#     | tar -x -C ab/main && rm -rf ab/main/sglang_dflash/assets/tiny-pair && cp -r ab/main ab/packed \
#     && patch -s -p1 -d ab/packed < $D/walk_packed_index.patch && cp -r ab/packed ab/packed16 \
#     && sed -i 's/^MAX_WARPS = 8$/MAX_WARPS = 16/' ab/packed16/sglang_dflash/kernels/tree_walk/path_argmax.py
# ab/packed16: the same with 16 warps a program (the pairs hold fewer registers; ptxas: 128, 72 B of spills on
# sm_90a; session 13 found 16 warps slower with the old loop).
set -u
L=$OUT
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s20_scripts
timeout 200 python3 benchmarks/ab_trees.py walk main=ab/main packed=ab/packed packed16=ab/packed16 --out $L > $L/ab_walk.log 2>&1; echo walk rc $?
git apply $D/walk_packed_index.patch; echo patch rc $?
timeout 100 python3 -m pytest -q tests/test_triton_tree_kernels.py tests/test_ddtree.py -k "walk or greedy" > $L/tests_walk.log 2>&1; echo tests rc $?
timeout 150 python3 benchmarks/bench_ddtree.py --requests 8 --budgets 64 --out $L > $L/ddtree.log 2>&1; echo ddtree rc $?
timeout 150 python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/engine_cuda.log 2>&1; echo engine rc $?  # not run since ed19ee5
echo "== summary"
python3 -c "
import json
for c in json.load(open('$L/ab_trees_walk.json')):
    u = c['us']; print(f\"{c['case']:34s}\", '  '.join(f'{k}:{v:.1f}' for k, v in u.items() if 'LA4' in k or 'LA8' in k), ' '.join(set(c['check'].values())))"
tail -1 $L/tests_walk.log; tail -2 $L/ddtree.log; tail -1 $L/engine_cuda.log
