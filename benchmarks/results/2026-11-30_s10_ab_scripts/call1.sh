#!/bin/bash
# Session 10, call 1: tree-GDN stage ablation, ncu probe, tree attention rework vs 0f7fa73.
export PYTHONPATH=$PWD
L=$OUT/logs; mkdir -p $L
nvidia-smi -L; uname -r; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
echo "== gdn ablation"; timeout 200 python3 abtmp/gdn_ablate.py 2>&1 | tee $L/gdn_ablate.log | grep -v Warning
echo "== ncu"; (timeout 150 ncu --clock-control none -k regex:_tree_gdn_fused_kernel -c 1 --set full --import-source yes -o $L/gdn64 python3 abtmp/gdn_one.py 1 64 ddtree > $L/ncu_run.log 2>&1; echo ncu_rc=$?; tail -3 $L/ncu_run.log
  if [ -f $L/gdn64.ncu-rep ]; then ncu -i $L/gdn64.ncu-rep --page details > $L/gdn64_details.txt 2>&1; ncu -i $L/gdn64.ncu-rep --page source --csv --print-source cuda,sass > $L/gdn64_source.csv 2>&1; ls -la $L; fi)
echo "== attention new"; timeout 100 python3 benchmarks/kernels/bench_tree_attention.py 2>&1 | tee $L/attn_new.log | tail -4
echo "== attention old"; PYTHONPATH=abtmp/old:$PWD timeout 100 python3 benchmarks/kernels/bench_tree_attention.py 2>&1 | tee $L/attn_old.log | tail -4
echo "== attention sweep"; timeout 120 python3 benchmarks/kernels/bench_tree_attention.py --sweep 2>&1 | tee $L/attn_sweep.log | tail -12
cd $OUT && tar czf s10_call1.tar.gz logs && rm -rf logs
