"""Start-up hook for SGLang releases without a plugin loader (0.5.10.post1), run by the installed `sglang_dflash.pth`.

Python runs the .pth line at every interpreter start, and SGLang 0.5.10 starts its schedulers as fresh
interpreters, so this is how the plugin reaches each SGLang process there. It costs a path lookup when SGLang is
absent or has its own plugin loader (then the entry point does the work, `entry`), and a meta-path finder
otherwise: the finder waits for the modules the stock patches live in and, right after each executes, calls
`activate`. Nothing here imports torch or SGLang.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

WATCHED = (
    "sglang.srt.speculative.spec_info",
    "sglang.srt.server_args",
    "sglang.srt.managers.scheduler",
)


class _ActivateAfterExec(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        _activate(module.__name__)


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
                    spec.loader = _ActivateAfterExec(spec.loader)
                return spec
        return None


def _activate(module_name: str) -> None:
    from .activate import activate, refuse_if_asked

    activate(scheduler=module_name == "sglang.srt.managers.scheduler")  # not mid-way: it imports the others
    if module_name == "sglang.srt.server_args":
        refuse_if_asked(sys.argv)


def install() -> None:
    from ... import env

    if env.disabled() or any(isinstance(f, SGLangHookFinder) for f in sys.meta_path):
        return
    spec = importlib.util.find_spec("sglang")
    if spec is None or _has_plugin_loader(spec):
        return
    sys.meta_path.insert(0, SGLangHookFinder())
    for name in WATCHED:  # already imported (e.g. installed after SGLang started): now
        if name in sys.modules:
            _activate(name)


def _has_plugin_loader(spec) -> bool:
    from pathlib import Path

    return any((Path(p) / "srt" / "plugins" / "__init__.py").is_file() for p in spec.submodule_search_locations or ())
