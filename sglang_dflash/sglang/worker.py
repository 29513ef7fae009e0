"""DFlashWorker / DDTreeWorker for SGLang's scheduler (issue 5, in progress).

By default the workers are not available: a server started with DFLASH or DDTREE stops at
scheduler start-up with this message, before it serves anything. With
SGLANG_DFLASH_EXPERIMENTAL_WORKER=1, DFLASH and DDTREE get the first, experimental workers
(`dflash_worker.DFlashWorker` / `DDTreeWorker`: greedy and sampled, greedy TP=1 run on a GPU in the harness).
"""

from __future__ import annotations

import os

ENV_SWITCH = "SGLANG_DFLASH_EXPERIMENTAL_WORKER"


def worker_class(algorithm, server_args):
    experimental = os.environ.get(ENV_SWITCH) == "1"
    if experimental:
        from .dflash_worker import DDTreeWorker, DFlashWorker

        return DFlashWorker if algorithm.name == "DFLASH" else DDTreeWorker
    detail = f"experimental DFLASH and DDTREE workers exist behind {ENV_SWITCH}=1"
    raise NotImplementedError(
        f"sglang-dflash {algorithm.name}: the SGLang worker is not implemented yet in this version "
        f"(server arguments and registration are; {detail}); use python -m sglang_dflash.generate for the standalone engine"
    )
