#!/usr/bin/env bash
# tests/setup_env.sh [RELEASE]: installs what the tests need into the current Python environment, with SGLang RELEASE
# (0.5.11, the default, or 0.5.23: the supported releases); works on a CPU-only machine.
#
# SGLang pins torch with CUDA (a ~12 GB install) and its compiled sgl_kernel cannot load without a GPU driver anyway,
# so it is installed without its pins (--no-deps), beside the dependencies it imports (sglang-cpu-requirements.txt,
# versions seen working together with both releases). Tests that import SGLang's runtime modules put an import-only
# sgl_kernel stand-in on sys.path and say so. torch 2.14.1 + torchvision 0.29.1: SGLang's server arguments import
# torchvision, and that pair loads. `kernels` (pulled in by some installs) breaks importing transformers: removed.
set -euo pipefail
release="${1:-0.5.11}"
case "$release" in 0.5.11|0.5.23) ;; *) echo "setup_env.sh: SGLang $release is not supported (0.5.11, 0.5.23)" >&2; exit 2;; esac
cd "$(dirname "$0")/.."
python -m pip install "torch==2.14.1" "torchvision==0.29.1"
python -m pip install --no-deps "sglang==$release"
python -m pip install -r tests/sglang-cpu-requirements.txt
overlay="tests/sglang-cpu-requirements-$release.txt"  # the release's own pins where the common ones are too old
if [ -f "$overlay" ]; then python -m pip install -r "$overlay"; fi
python -m pip install -e ".[test]"
python -m pip uninstall -y -q kernels 2>/dev/null || true
