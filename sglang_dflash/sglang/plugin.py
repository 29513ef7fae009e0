"""Entry point for SGLang versions with a plugin loader (group `sglang.srt.plugins`, upstream #21388).

It installs the same lazy patches as the .pth bootstrap (idempotent, so both may run). Where
SGLang has a built-in DFLASH, the name stays SGLang's: the patch only adds names SGLang does not
define. The workers are written against SGLang 0.5.10/0.5.11 internals, so on other versions a
DFLASH/DDTREE start-up stops with a message naming the supported versions.
"""

from __future__ import annotations

from .bootstrap import install


def load() -> None:
    install()
