#!/usr/bin/env bash
# Session 16, call 4: the tree build with its beams in registers (ab/beam, the working tree's package) against HEAD
# (ab/main), same run; build + accept totals with each; then the GPU tests of what changed (tree build, the gather
# threshold) and the CUDA engine test. ab/ built on the CPU machine:
#   rm -rf ab && mkdir -p ab/main ab/beam && git archive HEAD sglang_dflash | tar -x -C ab/main && cp -r sglang_dflash ab/beam/
set -u
L=$OUT
timeout 150 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py build main=ab/main beam=ab/beam --out $L > $L/ab_build.log 2>&1; echo rc $?
for t in beam main; do
  mkdir -p $L/$t
  req=$([ $t = beam ] && echo 1,8 || echo 8)
  timeout 120 env PYTHONPATH=$PWD/ab/$t:$PWD python3 benchmarks/bench_ddtree.py --out $L/$t --requests $req --budgets 16,64 > $L/ddtree_$t.log 2>&1; echo rc $?
done
timeout 100 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_triton_tree_kernels.py tests/test_tree_gdn_kernel.py -k "tree_build or chooses or uses_gather" > $L/tests.log 2>&1; echo rc $?
timeout 170 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/tests_engine.log 2>&1; echo rc $?
echo "== summary"; tail -1 $L/tests.log; tail -1 $L/tests_engine.log; cut -c1-200 $L/ab_build.log | tail -12
for t in beam main; do echo "== $t"; tail -8 $L/ddtree_$t.log | cut -c1-220; done
