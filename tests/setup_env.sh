#!/usr/bin/env bash
# Installs what the tests need into the current Python environment; works on a CPU-only machine.
#
# sglang 0.5.10.post1 pins torch 2.9.1 with CUDA (a ~12 GB install) and its compiled sgl_kernel
# cannot load without a GPU driver anyway, so it is installed without its pins (--no-deps), beside
# the dependencies it imports (sglang-cpu-requirements.txt, versions seen working together). Tests
# that import sglang runtime modules put an import-only sgl_kernel stand-in on sys.path and say so.
# torch 2.14.1 + torchvision 0.29.1: sglang's server arguments import torchvision, and that pair loads.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install "torch==2.14.1" "torchvision==0.29.1"
python -m pip install --no-deps "sglang==0.5.10.post1"
python -m pip install -r tests/sglang-cpu-requirements.txt
python -m pip install -e ".[test]"
