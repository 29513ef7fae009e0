#!/usr/bin/env bash
# Session 18, call 3: the GDN verify's variants against HEAD, same run (trees: ab/main = HEAD; exp2 = gdn_exp2.patch;
# e2only = only its exp2 decay; bf16 = exp2 + the key loop's dots in bf16 (q.k, k.k on the raw tiles, q.S0 and k.S0
# with S0 split in three bf16 parts); bf16b = exp2 + only q.k, k.k in bf16), then the GDN GPU tests with bf16's kernel.
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 300 python3 benchmarks/ab_trees.py gdn main=ab/main exp2=ab/exp2 e2only=ab/e2only bf16=ab/bf16 bf16b=ab/bf16b --out $L > $L/ab_gdn3.log 2>&1; echo rc $?
cp ab/bf16/sglang_dflash/kernels/tree_gdn/tree_gdn.py sglang_dflash/kernels/tree_gdn/tree_gdn.py
timeout 150 python3 -m pytest -q tests/test_tree_gdn_kernel.py -k "triton_matches or wide_tiles or key_loop or stacked or in_place" > $L/tests_gdn_bf16.log 2>&1; echo rc $?
echo "== summary"; tail -11 $L/ab_gdn3.log | cut -c1-250; tail -3 $L/tests_gdn_bf16.log
