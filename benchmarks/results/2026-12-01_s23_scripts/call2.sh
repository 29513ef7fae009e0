#!/usr/bin/env bash
# For session 23's second call (written in session 22, not run: no device time left; no carry, about 7 minutes).
# gdn_pdl.patch: programmatic dependent launch for the GDN layer's kernels (tree conv, GDN verify, both commits), as
# session 22 gave the build + accept kernels (RESULTS.md, "Session 22"). In the server a GDN layer runs the tree conv
# then the GDN verify, both ours: that boundary is where PDL can hide a launch (48 layers a step). CPU-checked: the
# GDN / conv kernel tests and the SM86 / PDL build tests pass with it (180 passed); `gdn_pdl_ab.py` ran as a CPU smoke.
# Session 22's attention result is the warning: PDL lost 3.5 us at R = 1 x 64 there (more than one wave of programs).
# Then attention_pdl_late.patch: the tree attention with PDL again, but its kernel lets the merge in only after its
# stores (`device.pdl_wait` at the start, `device.pdl_let_next_in` at the end), so that no merge program takes the
# place of the attention's second wave; timed by pdl_ab.py (its attention rows), with the attention's GPU tests.
set -u
L=$OUT
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s22_scripts
git apply $D/gdn_pdl.patch; echo patch rc $?
timeout 200 python3 $D/gdn_pdl_ab.py > $L/gdn_pdl_ab.log 2>&1; echo ab rc $?
timeout 200 python3 -m pytest -q tests/test_tree_gdn_kernel.py tests/test_tree_conv_kernel.py > $L/tests_gdn.log 2>&1; echo tests rc $?
git apply $D/attention_pdl_late.patch; echo patch rc $?
timeout 200 python3 $D/pdl_ab.py > $L/pdl_ab_attention_late.log 2>&1; echo ab rc $?
timeout 150 python3 -m pytest -q tests/test_tree_attention.py > $L/tests_attention.log 2>&1; echo tests rc $?
echo "== summary"; tail -7 $L/gdn_pdl_ab.log; tail -1 $L/tests_gdn.log; tail -11 $L/pdl_ab_attention_late.log; tail -1 $L/tests_attention.log
