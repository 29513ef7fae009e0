#!/usr/bin/env bash
# Session 25, call 2: the tree conv benchmark with SGLang's tree-mode conv as its peer (call 1's run of it hit its
# 90 s limit after two cases), and the GDN benchmark on the shared peer loader (`sglang_peers.py`).
# Carry: .whl/sglang-0.5.10.post1-py3-none-any.whl, .whl/fla_core-0.6.0-py3-none-any.whl.
set -u
export PYTHONPATH=$PWD:/tmp/site
W=.whl/sglang-0.5.10.post1-py3-none-any.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl > /dev/null 2>&1
timeout 200 python3 benchmarks/kernels/bench_tree_conv.py $W > $OUT/bench_tree_conv.log 2>&1; echo conv rc $?
timeout 330 python3 benchmarks/kernels/bench_tree_gdn.py $W > $OUT/bench_tree_gdn.log 2>&1; echo gdn rc $?
echo "---- bench_tree_conv"; cut -c1-400 $OUT/bench_tree_conv.log
echo "---- bench_tree_gdn"; tail -n 30 $OUT/bench_tree_gdn.log | cut -c1-220
