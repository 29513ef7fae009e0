#!/usr/bin/env bash
# Session 22, call 1 (no carry): PDL on / off A/B, then the GPU tests of the kernels that now launch with PDL, and the
# CUDA engine test (graphs with PDL edges).
set -u
L=$OUT
export PYTHONPATH=$PWD
python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)"
timeout 100 python3 -c "
import torch; from sglang_dflash.kernels import vocab
x = torch.randn(3, 50000, device='cuda'); assert torch.equal(vocab.argmax(x), x.argmax(-1)); print('pdl probe ok')
" > $L/probe.log 2>&1 || { echo probe failed; tail -20 $L/probe.log; exit 1; }
timeout 200 python3 benchmarks/results/2026-12-01_s22_scripts/pdl_ab.py > $L/pdl_ab.log 2>&1; echo pdl_ab rc $?
timeout 200 python3 -m pytest -q tests/test_triton_tree_kernels.py tests/test_tree_attention.py tests/test_ddtree.py -k 'not brute' > $L/tests_pdl.log 2>&1; echo tests rc $?
timeout 200 python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/engine_cuda.log 2>&1; echo engine rc $?
echo "== summary"; tail -14 $L/pdl_ab.log; tail -1 $L/tests_pdl.log; tail -1 $L/engine_cuda.log
