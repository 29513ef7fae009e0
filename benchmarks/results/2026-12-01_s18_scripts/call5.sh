#!/usr/bin/env bash
# Session 18, call 5: the final GDN kernel's GPU tests (16-bit key-loop dots gated to blocks of 64, exp2 decay; the
# gather verify unchanged). Its SASS equals call 4's wt at 64 nodes and gdn_exp2's at 16 (sass_loops.py).
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 170 python3 -m pytest -q tests/test_tree_gdn_kernel.py -k "triton_matches or wide_tiles or key_loop or stacked or in_place or 16bit or gather" > $L/tests_gdn.log 2>&1; echo rc $?
echo "== summary"; tail -2 $L/tests_gdn.log
