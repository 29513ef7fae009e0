#!/usr/bin/env bash
# DFLASH_CHAIN: z-lab's DFlash drafter drafts 16 tokens in one pass; the target verifies them as a chain, through
# sglang-dflash's worker (SGLang 0.5.11's own DFLASH is `--speculative-algorithm DFLASH`).
set -euo pipefail
exec python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp 2 \
  --speculative-algorithm DFLASH_CHAIN --speculative-draft-model-path z-lab/Qwen3.6-27B-DFlash \
  --mem-fraction-static 0.85 --max-running-requests 32 \
  --attention-backend triton "$@"
