#!/usr/bin/env bash
# Session 19, call 2 (next_call2.sh of session 18 without its engine test, which call 1 ran on these kernels). About 6
# minutes; carry .whl (the SGLang and fla wheels: bench_tree_gdn's peers). HEAD's kernels (gdn_fast_gates.patch merged):
#  1. bench_tree_gdn: the official verify + commit table with SGLang's kernel in the same run (last: session 15);
#  2. gdn_keyloop.py: the blocked verify by BK and stages (this folder's docstring says why);
#  3. Nsight Compute on the GDN verify at R = 1 x 64 and R = 8 x 64, summarised (ncu_sass_summary.py).
set -u
L=$OUT
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s18_scripts
S=benchmarks/results/2026-12-01_s17_scripts
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl
PYTHONPATH=$PWD:/tmp/site timeout 200 python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $L/bench_tree_gdn.log 2>&1; echo bench rc $?
timeout 150 python3 $D/gdn_keyloop.py > $L/gdn_keyloop.log 2>&1; echo keyloop rc $?
for rn in "1 64" "8 64"; do
  set -- $rn
  timeout 60 ncu --set full --import-source yes -k regex:_tree_gdn_fused_kernel --launch-skip 2 -c 1 -o /tmp/gdn$1 python3 $D/gdn_keyloop.py once $1 $2 > /dev/null 2>&1; echo ncu rc $?
  ncu --import /tmp/gdn$1.ncu-rep --page source --print-source sass --csv > /tmp/gdn$1.csv 2>/dev/null
  { ncu --import /tmp/gdn$1.ncu-rep | grep -E "Duration|Registers Per|Spilling Requests |Achieved Occupancy|Waves Per"; python3 $S/ncu_sass_summary.py /tmp/gdn$1.csv; } > $L/ncu_gdn_R$1.txt 2>&1
done
echo "== summary"; tail -32 $L/bench_tree_gdn.log | cut -c1-180; cat $L/gdn_keyloop.log; head -8 $L/ncu_gdn_R1.txt $L/ncu_gdn_R8.txt
