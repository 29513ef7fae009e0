#!/usr/bin/env bash
# For a GPU session (written in session 15, not run): the blocked tree-GDN verify with q.k and k.k as 16-bit
# tensor-core dots (`gdn_half_dots.patch`) against HEAD, same run, then the GDN kernel tests with the patch.
# First, on the CPU machine (ab/ is untracked, so it travels with the call):
#   rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash | tar -x -C ab/main && cp -r ab/main ab/half \
#     && patch -p1 -d ab/half < benchmarks/results/2026-12-01_s15_ab_scripts/gdn_half_dots.patch
# then: run(command="bash benchmarks/results/2026-12-01_s15_ab_scripts/ab_half_dots.sh")   (about 4 minutes)
set -u
L=$OUT
timeout 300 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py gdn main=ab/main half=ab/half --out $L > $L/ab.log 2>&1; echo rc $?
cp ab/half/sglang_dflash/kernels/tree_gdn/tree_gdn.py sglang_dflash/kernels/tree_gdn/tree_gdn.py  # this copy only
timeout 200 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_tree_gdn_kernel.py -k "not gather and not ancestor_table" > $L/tests.log 2>&1; echo rc $?
echo "== summary"; tail -1 $L/tests.log; tail -30 $L/ab.log | cut -c1-200
