#!/usr/bin/env bash
# Session 24, call 3: issue 3's benchmarks in one run on the current code (2377d60), each with its peer in the same
# process. Carry: .whl/sglang-0.5.10.post1-py3-none-any.whl and .whl/fla_core-0.6.0-py3-none-any.whl (bench_tree_gdn's
# peers: SGLang's tree-mode GDN kernel, fla's chain kernels). About 5 minutes.
set -u
export PYTHONPATH=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl > /dev/null 2>&1
PYTHONPATH=$PWD:/tmp/site timeout 260 python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $OUT/bench_tree_gdn.log 2>&1; echo gdn rc $?
timeout 80 python3 benchmarks/kernels/bench_tree_conv.py > $OUT/bench_tree_conv.log 2>&1; echo conv rc $?
timeout 120 python3 benchmarks/kernels/bench_tree_attention.py > $OUT/bench_tree_attention.log 2>&1; echo attention rc $?
for f in bench_tree_gdn bench_tree_conv bench_tree_attention; do echo "---- $f"; tail -n 22 $OUT/$f.log | cut -c1-220; done
