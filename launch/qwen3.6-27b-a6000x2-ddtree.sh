#!/usr/bin/env bash
# DDTREE: the best 15 prefixes of the same drafter pass, verified as one tree (16 tokens with the root: one whole
# 16-node block of the tree GDN verify on the A6000; why 16 and not 32: the preset's comment in sglang_dflash/launch.py).
set -euo pipefail
exec python -m sglang_dflash.launch --preset a6000x2-qwen3.6-27b "$@"
