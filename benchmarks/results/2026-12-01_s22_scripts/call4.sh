#!/usr/bin/env bash
# Session 22, call 4 (ab/ travels as untracked files). The walk (`greedy_walk`):
#   ab/main   HEAD (b5ae9c5: the follow step vectorised, the block loop double-buffered)
#   ab/ctr    the barrier's arrival counters kept between calls (int64, per device and P; each call begins at the
#             multiple of P below its first ticket), so no memset kernel runs before the walk (ptxas sm_90a: 188 ->
#             230 registers, no spills)
#   ab/ctrch  and every node's first-child chain made once at the start (a [LA, NN] table: a round's rows in one
#             reduction, not LA - 1 reductions in turn; 159 registers)
# Then, with the working tree (= ab/ctrch): the GPU walk tests, bench_ddtree, the CUDA engine test.
# Made on the CPU machine: rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash | tar -x -C ab/main;
# copies of the working tree at each step; rm -rf ab/*/sglang_dflash/assets/tiny-pair
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 200 python3 benchmarks/ab_trees.py walk main=ab/main ctr=ab/ctr ctrch=ab/ctrch --out $L > $L/ab_walk.log 2>&1; echo walk rc $?
timeout 100 python3 -m pytest -q tests/test_triton_tree_kernels.py tests/test_ddtree.py -k "walk or greedy" > $L/tests_walk.log 2>&1; echo tests rc $?
timeout 150 python3 benchmarks/bench_ddtree.py --requests 1,8 --budgets 64 --out $L > $L/ddtree.log 2>&1; echo ddtree rc $?
timeout 200 python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/engine_cuda.log 2>&1; echo engine rc $?
echo "== summary"
python3 -c "
import json
for c in json.load(open('$L/ab_trees_walk.json')):
    u = c['us']; print(f\"{c['case']:34s}\", '  '.join(f'{k}:{v:.1f}' for k, v in u.items() if 'LA4' in k or 'LA8' in k), ' '.join(set(c['check'].values())))"
tail -1 $L/tests_walk.log; tail -3 $L/ddtree.log; tail -1 $L/engine_cuda.log
