"""DFlashWorker / DDTreeWorker for SGLang's scheduler (issue 5, in progress).

The draft/verify workers are not written yet: a server started with DFLASH or DDTREE stops at
scheduler start-up with this message, before it serves anything.
"""

from __future__ import annotations


def worker_class(algorithm, server_args):
    raise NotImplementedError(
        f"sglang-dflash {algorithm.name}: the SGLang worker is not implemented yet in this version "
        "(server arguments and registration are); use python -m sglang_dflash.generate for the standalone engine"
    )
