#!/usr/bin/env bash
# For session 13's first GPU call (written at the end of session 12, not run): time what session 12 landed untimed.
# From the repository root, with .whl/ carried (sglang and fla-core wheels: see the closing note of session 11):
#   run(command="bash benchmarks/results/2026-11-30_s12_ab_scripts/run_next_session.sh", carry=[".whl"])
set -u
L=$OUT
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl > $L/pip.log 2>&1
echo "== gpu tests (the gather verify's first compiled run)"
timeout 150 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_tree_gdn_kernel.py tests/test_triton_tree_kernels.py > $L/tests.log 2>&1; echo rc $?
echo "== bench_tree_gdn (prints the ancestor-gather lines)"
timeout 240 env PYTHONPATH=$PWD:/tmp/site python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $L/bench_tree_gdn.log 2>&1; echo rc $?
echo "== bench_ddtree (chunk statistics without the guard; PATH_WALK_ROWS 128 at R = 8, B = 16)"
timeout 120 env PYTHONPATH=$PWD python3 benchmarks/bench_ddtree.py --out $L --requests 1,8 --budgets 16,64 > $L/ddtree.log 2>&1; echo rc $?
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; tail -3 $L/tests.log; grep -A12 "ancestor-gather" $L/bench_tree_gdn.log; tail -7 $L/ddtree.log
