#!/usr/bin/env bash
# Session 31, call 5 (carry [".whl"]): attention_bound_probe.py (other kernels at the tree attention's shape, unmasked).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/gpu/flashinfer_python-*.whl \
  .whl/gpu/apache_tvm_ffi-*.whl > $OUT/pip.log 2>&1; echo pip rc $?
export PYTHONPATH=$PWD:/tmp/site
PYTHONUNBUFFERED=1 timeout 420 python3 benchmarks/results/2026-12-04_s31_scripts/attention_bound_probe.py > $OUT/call5_probe.log 2>&1
echo probe rc $?
grep -v -i "warn" $OUT/call5_probe.log | tail -n 30 | cut -c1-220
