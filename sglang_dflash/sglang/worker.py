"""DFlashWorker / DDTreeWorker for SGLang's scheduler, at any tensor parallelism.

Inside stock SGLang 0.5.10.post1 on H200s (benchmarks/gpu/harness.py, CUDA graphs on, batch 1 and 8, the
trained tiny pair's deep accepts, 32 prompts) their greedy tokens are the target's argmax up to bf16 near
ties at TP=1 and TP=2, and sampled batches finish (benchmarks/RESULTS.md, sessions 5 and 6).
"""

from __future__ import annotations

from .algorithm import ALGORITHMS


def workers_enabled(server_args) -> bool:
    """True when the server runs DFLASH or DDTREE (our workers)."""
    return str(getattr(server_args, "speculative_algorithm", None) or "").upper() in ALGORITHMS


def worker_class(algorithm, server_args):
    from .dflash_worker import DDTreeWorker, DFlashWorker

    return DFlashWorker if algorithm.name == "DFLASH" else DDTreeWorker
