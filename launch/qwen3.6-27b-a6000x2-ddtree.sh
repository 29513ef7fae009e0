#!/usr/bin/env bash
# DDTREE: the best 31 prefixes of the same drafter pass, verified as one tree (32 tokens with the root: two whole
# 16-node blocks of the tree GDN verify on the A6000).
set -euo pipefail
exec python -m sglang_dflash.launch --preset a6000x2-qwen3.6-27b "$@"
