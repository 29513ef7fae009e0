#!/usr/bin/env bash
# Session 22, call 3 (carry: ab/ travels as untracked files). The walk (`greedy_walk`):
#   ab/main    HEAD (9773d10)
#   ab/vec     the follow step vectorised: every row of the round at once (one [LA, NN] reduction for the children,
#              a cumsum for the steps taken) instead of LA steps of four reductions each
#   ab/vecdb   and the pair-reading block loop double-buffered in registers (the next block's loads issued before
#              this block's reduction; ptxas sm_90a: 174 -> 188 registers, no spills; SASS: the 16 LDG.128 of the
#              next block interleaved with the in-thread max.bf16x2 of this one)
#   ab/vecdb2k the same with MAX_BLOCK 8192 ([8, 2048] blocks at 8 rows a round; 196 registers)
# Then, with the working tree (= ab/vecdb): the GPU walk tests (the pairs run only on the GPU) and bench_ddtree.
# Made on the CPU machine:
#   rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash | tar -x -C ab/main; copies of the working tree
#   at each step; rm -rf ab/*/sglang_dflash/assets/tiny-pair
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 240 python3 benchmarks/ab_trees.py walk main=ab/main vec=ab/vec vecdb=ab/vecdb vecdb2k=ab/vecdb2k --out $L > $L/ab_walk.log 2>&1; echo walk rc $?
timeout 100 python3 -m pytest -q tests/test_triton_tree_kernels.py tests/test_ddtree.py -k "walk or greedy" > $L/tests_walk.log 2>&1; echo tests rc $?
timeout 150 python3 benchmarks/bench_ddtree.py --requests 1,8 --budgets 64 --out $L > $L/ddtree.log 2>&1; echo ddtree rc $?
echo "== summary"
python3 -c "
import json
for c in json.load(open('$L/ab_trees_walk.json')):
    u = c['us']; print(f\"{c['case']:34s}\", '  '.join(f'{k}:{v:.1f}' for k, v in u.items() if 'LA4' in k or 'LA8' in k), ' '.join(set(c['check'].values())))"
tail -1 $L/tests_walk.log; tail -3 $L/ddtree.log
