#!/bin/bash
# Session 10, call 4: tree-GDN v2 final (K loop first, paired in blocks <= 32) in the bench with SGLang's peer and
# against HEAD; tree attention with the new merge (16-bit normalised partials, column tiles) against 0f7fa73.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl
export PYTHONPATH=$PWD
L=$OUT/logs; mkdir -p $L
echo "== tests"; timeout 90 python3 -m pytest -q -x tests/test_tree_attention.py tests/test_tree_gdn_kernel.py > $L/tests.log 2>&1; echo RC=$?; tail -1 $L/tests.log
echo "== gdn bench"; PYTHONPATH=$PWD:/tmp/site timeout 230 python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $L/gdn_bench.log 2>&1; tail -25 $L/gdn_bench.log
echo "== gdn A/B"; timeout 100 python3 abtmp/gdn_ab.py 2>&1 | tee $L/gdn_ab.log | grep -v Warn
echo "== attention A/B"; timeout 110 python3 abtmp/attn_ab.py 2>&1 | tee $L/attn_ab.log | grep -v "Warn\|warn_once\|^ \+0.0 "
echo "== attention bench"; timeout 50 python3 benchmarks/kernels/bench_tree_attention.py > $L/attn_bench.log 2>&1; grep R $L/attn_bench.log
cd $OUT && tar czf s10_call4.tar.gz logs && rm -rf logs
