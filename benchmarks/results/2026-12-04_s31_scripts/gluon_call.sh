#!/usr/bin/env bash
# Session 31, calls 2 and 3 (no carry): the Gluon prototype with PATCHES (A/B against the package's kernel, R = 1 x 64
# and 8 x 64), then Nsight Compute of BUILDS at R = 1 x 64 (one launch each: stall reasons, opcodes, top SASS lines).
#   call 2: bash gluon_call.sh "gluon_qasync.patch" "package|64 0 0|32 1 0"
#   call 3: bash gluon_call.sh "gluon_qasync.patch gluon_store.patch" "64 0 1|32 1 1"
# A build is "package" or "BN DEFER_PV Q_ASYNC". The prototype is session 30's gluon/ folder with PATCHES applied, in
# /tmp/g31/gluon (on the device the patched files sat in this folder instead).
set -u
S=$PWD/benchmarks/results/2026-12-04_s31_scripts
rm -rf /tmp/g31 && mkdir /tmp/g31 && cp -r benchmarks/results/2026-12-04_s30_scripts/gluon /tmp/g31/ && cp $S/gluon_once.py /tmp/g31/gluon/
for p in $1; do (cd /tmp/g31 && patch -s -p0 < $S/$p) || exit 1; done
export PYTHONPATH=$PWD:/tmp/g31/gluon
D=/tmp/g31/gluon
timeout 200 python3 $D/gluon_ab.py --short > $OUT/ab.log 2>&1; echo ab rc $?
IFS='|' read -ra builds <<< "$2"
for v in "${builds[@]}"; do
  n=$(echo $v | tr ' ' _); k='regex:^_tree_attention_kernel'; [ "$v" = package ] || k='regex:_gluon'
  timeout 100 ncu --set full --import-source yes -k $k --launch-skip 2 -c 1 -o /tmp/$n python3 $D/gluon_once.py $v > /tmp/ncu_$n.txt 2>&1; echo ncu $n rc $?
  ncu --import /tmp/$n.ncu-rep --page source --print-source sass --csv > /tmp/$n.csv 2>/dev/null
  ncu --import /tmp/$n.ncu-rep > /tmp/details_$n.txt 2>/dev/null
  { echo "== $v"; grep -E "Duration|Registers Per|Spilling Requests |Executed Ipc A|Issue Slots Busy|L2 Cache Throughput|DRAM Throughput|Compute \(SM\) Thr|Memory Throughput" /tmp/details_$n.txt;
    python3 benchmarks/results/2026-12-01_s17_scripts/ncu_sass_summary.py /tmp/$n.csv;
    python3 benchmarks/results/2026-12-01_s19_scripts/ncu_top_lines.py /tmp/$n.csv 30; } > $OUT/ncu_$n.txt 2>&1
  cp /tmp/details_$n.txt $OUT/details_$n.txt
done
grep -v -i warn $OUT/ab.log | grep -v "^ *[0-9.]* *x[0-9]" | tail -12
for f in $OUT/ncu_*.txt; do head -16 $f | cut -c1-160; done
