"""The `sglang.srt.plugins` entry point (pyproject.toml), which SGLang 0.5.11 and 0.5.23 load.

SGLang calls `load` first thing in every process it starts (launch_server and `sglang serve` before parsing the
command line, the offline Engine, each scheduler process), so no import hook is needed there. A command line that
asks for one of our algorithms while the plugin is off (an unsupported release, or a table mismatch) stops here
with one line naming why; every other command runs stock.
"""

from __future__ import annotations

import sys

from ... import env


def load() -> None:
    if env.disabled():  # SGLANG_DFLASH_DISABLE=1: nothing of the plugin is even imported
        return
    from .activate import activate, refuse_if_asked

    activate()
    refuse_if_asked(sys.argv)
