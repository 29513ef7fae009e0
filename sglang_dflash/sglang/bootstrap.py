"""Startup hook: patch SGLang 0.5.10/0.5.11 from inside every process it spawns (no plugin loader there).

The installed `sglang_dflash.pth` calls `install()` at interpreter start. It costs a path lookup
when SGLang is absent and a meta-path finder otherwise; the finder waits for SGLang's
`spec_info`, `server_args` and model `registry` modules and, right after each executes, hands it
to `hooks.patch_module`. Nothing here imports torch or SGLang.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

WATCHED = (
    "sglang.srt.speculative.spec_info",
    "sglang.srt.server_args",
    "sglang.srt.models.registry",
    "sglang.srt.model_executor.model_runner",
    "sglang.srt.layers.attention.hybrid_linear_attn_backend",
    "sglang.srt.layers.attention.linear.gdn_backend",
    "sglang.srt.mem_cache.memory_pool",
    "sglang.srt.managers.scheduler",
    "sglang.srt.managers.tp_worker",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin",
)
DISABLE_ENV = "SGLANG_DFLASH_DISABLE"  # set to 1 to leave SGLang untouched


class _PatchAfterExec(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        from . import hooks

        hooks.patch_module(module)


class SGLangHookFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for the watched names it asks the finders after it and wraps the loader."""

    def find_spec(self, name, path=None, target=None):
        if name not in WATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchAfterExec(spec.loader)
                return spec
        return None


def install() -> None:
    if os.environ.get(DISABLE_ENV) == "1" or any(isinstance(f, SGLangHookFinder) for f in sys.meta_path):
        return
    if importlib.util.find_spec("sglang") is None:
        return
    sys.meta_path.insert(0, SGLangHookFinder())
    from . import hooks

    for name in WATCHED:  # already imported (e.g. installed after SGLang started): patch now
        if name in sys.modules:
            hooks.patch_module(sys.modules[name])
