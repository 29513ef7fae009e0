#!/usr/bin/env bash
# For session 16's first GPU call (written in session 15, not run: its device time ran out). `stages_probe.py`: the
# blocked against the gather GDN verify below 100 nodes, DDTREE node counts 2^k against 2^k + 1, the blocked verify's
# tiles, the greedy walk's rows per round, then num_stages of every hot-path kernel one at a time; then the tree-GDN
# kernel tests that session 15's call 6 did not reach (its 120 s timeout). About 6-8 minutes, no carry:
#   run(command="bash benchmarks/results/2026-12-01_s15_ab_scripts/run_next_session.sh")
set -u
L=$OUT
timeout 480 env PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s15_ab_scripts/stages_probe.py > $L/stages_probe.log 2>&1; echo rc $?
timeout 80 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_tree_gdn_kernel.py -k ancestor_table > $L/tests.log 2>&1; echo rc $?
echo "== summary"; tail -1 $L/tests.log; cut -c1-240 $L/stages_probe.log
