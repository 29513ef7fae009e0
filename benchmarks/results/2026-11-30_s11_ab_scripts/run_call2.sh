#!/usr/bin/env bash
# session 11, GPU call 2: root peel A/B (no spills), GPU kernel tests, bench_tree_gdn (SGLang + fla peers), bench_ddtree
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl > $OUT/pip.log 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/gpu.txt 2>&1
echo "== ab gdn"; timeout 170 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py gdn main=ab/main root=ab/root2 --out $OUT > $OUT/ab_gdn.log 2>&1; echo rc $?
echo "== tests"; timeout 120 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_tree_gdn_kernel.py > $OUT/tests_gdn.log 2>&1; echo rc $?
echo "== bench_tree_gdn"; timeout 200 env PYTHONPATH=$PWD:/tmp/site python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $OUT/bench_tree_gdn.log 2>&1; echo rc $?
cd $OUT && tar czf logs.tgz *.log *.json gpu.txt 2>/dev/null
echo "== summary"; cat $OUT/gpu.txt; tail -15 $OUT/ab_gdn.log; tail -3 $OUT/tests_gdn.log
