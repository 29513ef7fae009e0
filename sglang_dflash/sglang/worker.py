"""DFlashWorker / DDTreeWorker for SGLang's scheduler (issue 5, in progress).

By default the workers are not available: a server started with DFLASH or DDTREE stops at
scheduler start-up with this message, before it serves anything. With
SGLANG_DFLASH_EXPERIMENTAL_WORKER=1, DFLASH gets the first, experimental chain worker
(`dflash_worker.DFlashWorker`: greedy only, not yet run on a GPU); DDTREE still stops.
"""

from __future__ import annotations

import os

ENV_SWITCH = "SGLANG_DFLASH_EXPERIMENTAL_WORKER"


def worker_class(algorithm, server_args):
    experimental = os.environ.get(ENV_SWITCH) == "1"
    if experimental and algorithm.name == "DFLASH":
        from .dflash_worker import DFlashWorker

        return DFlashWorker
    if experimental:
        detail = f"{ENV_SWITCH}=1 enables an experimental worker for DFLASH only; {algorithm.name} has none yet"
    else:
        detail = f"an experimental, untested DFLASH worker exists behind {ENV_SWITCH}=1"
    raise NotImplementedError(
        f"sglang-dflash {algorithm.name}: the SGLang worker is not implemented yet in this version "
        f"(server arguments and registration are; {detail}); use python -m sglang_dflash.generate for the standalone engine"
    )
