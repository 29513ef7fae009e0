"""Turning the plugin on in one SGLang process: check the installed release's table (`versions`), then apply it.

`activate()` is called by the entry point, which SGLang calls first thing in every process it starts. Before touching
anything it checks that every target it is about to patch exists with the parameters it expects (the scheduler's is
checked where SGLang imports it); on the first mismatch it patches nothing, logs one warning line naming the SGLang
version and the attribute, and the plugin stays off for the process: SGLang
runs stock. An unsupported SGLang version turns it off the same way, silently (nothing of SGLang's is touched).
Asking for one of our algorithms while the plugin is off stops the start-up with one line saying why
(`refuse_if_asked`, `patches.from_string`).

The hooks go through SGLang's `HookRegistry` (AROUND), each target once per process.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import sys

from ... import env
from .. import names
from ..algorithm import is_ours
from . import patches
from .versions import SCHEDULER, SUPPORTED, Patch, Release, release

logger = logging.getLogger("sglang_dflash")


class Mismatch(RuntimeError):
    """An SGLang internal the table names is missing or has another shape."""


class _State:
    release: Release | None = None
    off: str | None = None  # why the plugin is off in this process (None: on, or not decided yet)
    applied: set[str] = set()  # targets patched in this process
    runtime: bool = False


state = _State()


def installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sglang")
    except PackageNotFoundError:
        return None


def turn_off(reason: str) -> None:
    if state.off is None:
        state.off = reason
        patches.disable(reason)
        logger.warning("sglang-dflash is off, SGLang runs stock: %s", reason)


# ----------------------------------------------------------------------------- checks


def _owner_and_raw(patch: Patch):
    """(the object holding the patched attribute, the attribute as stored there) or Mismatch."""
    try:
        obj = importlib.import_module(patch.module)
    except ImportError as e:
        raise Mismatch(f"module {patch.module} does not import ({e})") from e
    *owners, attr = patch.path
    for name in owners:
        if not hasattr(obj, name):
            raise Mismatch(f"{patch.module} has no {'.'.join(owners)}")
        obj = getattr(obj, name)
    try:
        raw = inspect.getattr_static(obj, attr)
    except AttributeError:
        raise Mismatch(f"{patch.target.replace(':', '.')} does not exist") from None
    return obj, raw


def _function(raw):
    return raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw


def check(patch: Patch) -> None:
    """The target exists and takes patch.params in that order (other parameters may stand between)."""
    _, raw = _owner_and_raw(patch)
    fn = inspect.unwrap(_function(raw))
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        raise Mismatch(f"{patch.dotted} is not a function") from None
    rest = iter(params)
    if not all(any(p == q for q in rest) for p in patch.params):
        raise Mismatch(f"{patch.dotted} takes ({', '.join(params)}), expected ({', '.join(patch.params)}, ...)")


def check_field(field) -> None:
    module, cls_name = field.owner.split(":")
    cls = getattr(importlib.import_module(module), cls_name, None)
    if cls is None:
        raise Mismatch(f"{module} has no {cls_name}")
    if dataclasses.is_dataclass(cls):
        found = field.name in {f.name for f in dataclasses.fields(cls)}
    else:  # an attribute its __init__ sets
        found = hasattr(cls, field.name) or field.name in getattr(getattr(cls.__init__, "__code__", None), "co_names", ())
    if not found:
        raise Mismatch(f"{module}.{cls_name} has no field {field.name}")


# ----------------------------------------------------------------------------- applying


def _hook(patch: Patch):
    return scheduler_init if patch.hook == "scheduler_init" else getattr(patches, patch.hook)


def hooked(fn) -> bool:
    """Whether fn (a function, or a class- or static method) goes through one of our hooks."""
    fn = getattr(fn, "__func__", fn)
    plugin = __name__.rsplit(".", 1)[0]
    return any(str(getattr(c.cell_contents, "__module__", "")).startswith(plugin) for c in getattr(fn, "__closure__", None) or ())


def apply(todo: list[Patch]) -> None:
    """Check every patch of `todo`, then apply them all (nothing on a mismatch: the plugin turns off)."""
    todo = [p for p in todo if p.target not in state.applied]
    if not todo or state.off:
        return
    try:
        for patch in todo:
            check(patch)
    except Mismatch as e:
        turn_off(f"SGLang {installed_version()}: {e}")
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    for patch in todo:
        HookRegistry.register(patch.dotted, _hook(patch), HookType.AROUND)
        state.applied.add(patch.target)
    HookRegistry.apply_hooks()
    # the registry skips a target another plugin had it patch already, and logs a target it failed on: both leave
    # SGLang's function without our hook
    missed = [p.dotted for p in todo if not hooked(_owner_and_raw(p)[1])]
    if missed:
        turn_off(f"SGLang {installed_version()}: {missed[0]} did not take our hook (another plugin patched it first?)")


def _choose_release() -> Release | None:
    """The installed release's table, once per process (None, and the plugin off, where it is not supported)."""
    if state.release is None and state.off is None:
        version = installed_version()
        table = release(version) if version else None
        if table is None:
            state.off = f"SGLang {version} is not supported (supported: {', '.join(SUPPORTED)})"
            return None
        state.release = table
        patches.configure(table.overlap_spec_v2)
    return None if state.off else state.release


def our_name(name) -> str | None:
    """Our canonical name for a --speculative-algorithm value under the installed release (None: SGLang's name, or
    the plugin is off, `state.off` saying why)."""
    return patches.ours(name) if _choose_release() else None


def activate(scheduler: bool | None = None) -> None:
    """The stock patches of the installed release: those of the light modules (spec_info, server_args: imported
    here, checked together) and the scheduler's where `scheduler` (None: where SGLang has imported that module, as
    in a scheduler process)."""
    if env.disabled() or not _choose_release():
        return
    if scheduler is None:
        scheduler = SCHEDULER in sys.modules
    apply([p for p in state.release.stock if p.module != SCHEDULER or scheduler])
    if state.release.registry and not state.off:
        register()


def register() -> None:
    """Our names in SGLang's registry of speculative algorithms (0.5.23), once per process: the spec-v2 worker,
    the server-argument validation, our `CustomSpecAlgo`. `DFLASH` is SGLang's there and cannot be taken."""
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from sglang.srt.speculative.spec_registry import get_spec

    from ..algorithm import registered_spec_class, worker_factory

    if env.OVERRIDE_DFLASH.on():
        logger.warning("%s has no effect on SGLang %s, where DFLASH is SGLang's own name: ask for DFLASH_CHAIN.",
                       env.OVERRIDE_DFLASH.name, installed_version())  # fmt: skip
    spec_class = registered_spec_class()
    for name in names.ALGORITHMS:
        if name in SpeculativeAlgorithm.__members__:  # an SGLang with our patch series: ours are built in
            logger.info("sglang-dflash: SGLang %s has %s built in; the plugin leaves it", installed_version(), name)
        elif get_spec(name) is None:
            register_name = SpeculativeAlgorithm.register(
                name, supports_overlap=True, validate_server_args=patches.validate_server_args, spec_class=spec_class
            )
            register_name(worker_factory)


def activate_runtime(server_args) -> None:
    """In a scheduler process that serves our algorithm, before its model runner exists: the runtime patches and
    the verify input's fields, checked first; a mismatch stops the start-up with one line (the user asked for ours)."""
    if state.runtime:
        return
    table = _choose_release()
    if table is None:
        raise RuntimeError(f"sglang-dflash cannot serve {server_args.speculative_algorithm}: {state.off}")
    try:
        for field in table.field_owners:
            check_field(field)
        for patch in table.runtime:
            check(patch)
    except Mismatch as e:
        raise RuntimeError(f"sglang-dflash cannot serve {server_args.speculative_algorithm} on SGLang {installed_version()}: "
                           f"{e} (supported: {', '.join(SUPPORTED)})") from None  # fmt: skip
    apply(list(table.runtime))
    if state.off:
        raise RuntimeError(f"sglang-dflash cannot serve {server_args.speculative_algorithm}: {state.off}")
    state.runtime = True


def scheduler_init(original, self, server_args, *args, **kwargs):
    """Scheduler.__init__: the runtime patches where this scheduler serves our algorithm (and the stock decode
    profile where SGLANG_DFLASH_PROFILE asks for it), before SGLang builds the model runner."""
    if is_ours(server_args):
        activate_runtime(server_args)
    elif env.PROFILE.get():
        from .versions import PROFILE

        apply([PROFILE])
    return original(self, server_args, *args, **kwargs)


def refuse_if_asked(argv: list[str]) -> None:
    """A command line asking for one of our algorithms: while the plugin is off it stops here with one line saying
    why (exit code 2); else its server-argument refusals will be one line too (`patches.command_line`)."""
    asked = None
    for i, arg in enumerate(argv):
        if arg == "--speculative-algorithm" and i + 1 < len(argv):
            asked = argv[i + 1]
        elif arg.startswith("--speculative-algorithm="):
            asked = arg.split("=", 1)[1]
    if not (isinstance(asked, str) and asked.upper() in names.ALGORITHMS):
        return
    if state.off:
        from ...cli import Refusal

        raise Refusal(f"--speculative-algorithm {asked} needs sglang-dflash, which is off: {state.off}")
    patches.command_line()


def cli_choices() -> list[str]:
    """The --speculative-algorithm values launch_server accepts here, ours included: its option's choices, or where the
    option is free text (0.5.23: a registry), SpeculativeAlgorithm's members and the names registered, as its
    `from_string` resolves them."""
    import argparse

    activate()
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(add_help=False)
    ServerArgs.add_cli_args(parser)
    action = next(a for a in parser._actions if "--speculative-algorithm" in a.option_strings)
    if action.choices is not None:
        return list(action.choices)
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    candidates = [a.name for a in SpeculativeAlgorithm if a.name != "NONE"] + ["NEXTN", *names.ALGORITHMS]
    return [n for n in dict.fromkeys(candidates) if _resolves(SpeculativeAlgorithm, n)]


def _resolves(algorithms, name: str) -> bool:
    try:
        algorithms.from_string(name)
    except ValueError:
        return False
    return True
