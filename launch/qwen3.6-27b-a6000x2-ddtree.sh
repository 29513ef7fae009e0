#!/usr/bin/env bash
# DDTREE: the best 32 prefixes of the same drafter pass, verified as one tree (33 tokens with the root).
set -euo pipefail
exec python -m sglang_dflash.launch --preset a6000x2-qwen3.6-27b "$@"
