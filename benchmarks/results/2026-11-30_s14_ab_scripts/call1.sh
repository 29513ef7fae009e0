#!/usr/bin/env bash
# For session 14's first GPU call (written at the end of session 13, not run). On the CPU machine first, from the
# repository root (the A/B trees travel as untracked files; the device has no git):
#   P=benchmarks/results/2026-11-30_s13_ab_scripts; rm -rf ab && for t in main til gdc; do mkdir -p ab/$t \
#     && git archive HEAD sglang_dflash | tar -x -C ab/$t && rm -rf ab/$t/sglang_dflash/assets; done \
#     && git apply --directory=ab/til --include='ab/til/sglang_dflash/*' $P/tree_attention_tree_in_last.patch \
#     && git apply --directory=ab/gdc --include='ab/gdc/sglang_dflash/*' $P/gather_depth_chunks.patch
# then run(command="bash benchmarks/results/2026-11-30_s13_ab_scripts/run_next_session.sh", carry=[".whl"]) (about
# 10 minutes, over one call's 600 s: run it as two calls, with the argument `ab` (tests and A/Bs), then `bench`).
# 1. GPU tests of what session 13 landed after its last timing (the gather kernel's heads_per_program, step_nodes)
#    and of the attention patch's paths; 2. the tree-attention patch (tree keys in the last prefix slice where their
#    own programs would start a second wave) against HEAD; 3. the gather solve's step sweep, and the gather verify with
#    node chunks in depth order, each chunk using half the table's slots where its paths fit (gather_depth_chunks.patch)
#    against HEAD; 4. bench_tree_gdn (the R = 1 gather path re-timed, R = 8 x 129 added).
set -u
L=$OUT
PART=${1:-ab}
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl > $L/pip.log 2>&1
if [ "$PART" = ab ]; then
echo "== gpu tests"
timeout 150 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_tree_gdn_kernel.py tests/test_tree_attention.py > $L/tests.log 2>&1; echo rc $?
timeout 150 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/tests_engine.log 2>&1; echo rc $?
echo "== attention A/B"
timeout 150 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py attention main=ab/main til=ab/til --out $L > $L/ab_attention.log 2>&1; echo rc $?
echo "== gather solve sweep"
timeout 120 env PYTHONPATH=$PWD python3 benchmarks/results/2026-11-30_s13_ab_scripts/gather_solve_sweep.py > $L/gather_solve_sweep.log 2>&1; echo rc $?
timeout 100 env PYTHONPATH=$PWD python3 benchmarks/results/2026-11-30_s13_ab_scripts/gather_ab.py main=ab/main gdc=ab/gdc > $L/gather_ab.log 2>&1; echo rc $?
fi
if [ "$PART" = bench ]; then
echo "== bench_tree_gdn"
timeout 260 env PYTHONPATH=$PWD:/tmp/site python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $L/bench_tree_gdn.log 2>&1; echo rc $?
fi
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"
if [ "$PART" = ab ]; then tail -1 $L/tests.log; tail -1 $L/tests_engine.log; grep -h "^R=" $L/ab_attention.log $L/gather_solve_sweep.log $L/gather_ab.log; fi
if [ "$PART" = bench ]; then sed -n '/two verify kernels/,/chains against/p' $L/bench_tree_gdn.log; fi
