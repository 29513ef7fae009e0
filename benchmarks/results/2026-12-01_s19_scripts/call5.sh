#!/usr/bin/env bash
# Session 19, call 5 (carry .whl; about 5 minutes): with `register_cap` for one block of up to 32 nodes, the official
# verify + commit table with SGLang's kernel in the same run (bench_tree_gdn), then gdn_regcap.py again.
set -u
L=$OUT
export PYTHONPATH=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl
PYTHONPATH=$PWD:/tmp/site timeout 220 python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $L/bench_tree_gdn.log 2>&1; echo bench rc $?
timeout 120 python3 benchmarks/results/2026-12-01_s19_scripts/gdn_regcap.py > $L/gdn_regcap.log 2>&1; echo regcap rc $?
echo "== summary"; tail -32 $L/bench_tree_gdn.log | cut -c1-180; cat $L/gdn_regcap.log
