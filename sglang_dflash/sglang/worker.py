"""DFlashWorker / DDTreeWorker for SGLang's scheduler.

At TP=1 the workers serve by default: inside stock SGLang 0.5.10.post1 on an H200 (benchmarks/gpu/harness.py,
CUDA graphs on, batch 1 and 8, the trained tiny pair's deep accepts included) their greedy tokens are the
target's argmax up to bf16 near ties, and sampled batches finish. Tensor parallelism has not run on GPUs
yet, so at TP > 1 a server stops at scheduler start-up with a message saying so, unless
SGLANG_DFLASH_EXPERIMENTAL_WORKER=1.
"""

from __future__ import annotations

import os

from .algorithm import ALGORITHMS

ENV_SWITCH = "SGLANG_DFLASH_EXPERIMENTAL_WORKER"


def workers_enabled(server_args) -> bool:
    """True when a DFLASH/DDTREE server gets our workers: at TP=1, or at any TP with ENV_SWITCH=1."""
    if str(getattr(server_args, "speculative_algorithm", None) or "").upper() not in ALGORITHMS:
        return False
    return (getattr(server_args, "tp_size", 1) or 1) == 1 or os.environ.get(ENV_SWITCH) == "1"


def worker_class(algorithm, server_args):
    if workers_enabled(server_args):
        from .dflash_worker import DDTreeWorker, DFlashWorker

        return DFlashWorker if algorithm.name == "DFLASH" else DDTreeWorker
    raise NotImplementedError(
        f"sglang-dflash {algorithm.name}: the workers have been checked on GPUs at --tp 1 only; --tp "
        f"{server_args.tp_size} (vocab-parallel acceptance, broadcast sampling decisions) has not run on GPUs yet. "
        f"Use --tp 1, or set {ENV_SWITCH}=1 to run it anyway."
    )
