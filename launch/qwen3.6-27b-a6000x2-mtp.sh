#!/usr/bin/env bash
# Baseline: SGLang's multi-token-prediction (MTP / NEXTN) speculation with Qwen3.6-27B's own MTP head.
# SGLang 0.5.11's flags (0.5.23 names the mamba strategy --mamba-radix-cache-strategy).
set -euo pipefail
exec python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp 2 \
  --speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
  --mamba-scheduler-strategy extra_buffer --mem-fraction-static 0.85 "$@"
