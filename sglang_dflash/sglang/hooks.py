"""The patches `bootstrap` applies to SGLang's modules, class attributes only (module-level
`from x import f` bindings would go stale). Each is idempotent and changes nothing for other
algorithm names, except that `--speculative-algorithm` lists DFLASH and DDTREE among its choices."""

from __future__ import annotations

import functools
import logging

from .algorithm import ALGORITHMS, DraftTreeAlgorithm

_MARK = "_sglang_dflash_patched"


def patch_module(module) -> None:
    patch = {
        "sglang.srt.speculative.spec_info": patch_spec_info,
        "sglang.srt.server_args": patch_server_args,
        "sglang.srt.models.registry": register_draft_model,
        "sglang.srt.model_executor.model_runner": patch_model_runner,
    }.get(module.__name__)
    if patch is not None:
        patch(module)


def patch_model_runner(module) -> None:
    """The target's hidden-state capture, installed just before its CUDA graphs are captured
    (`hidden_capture.patch_model_runner`; only for the experimental DFLASH worker's runs)."""
    from .hidden_capture import patch_model_runner as patch

    patch(module)


def register_draft_model(module) -> None:
    """`DFlashDraftModel` in SGLang's model registry, unless SGLang has its own. A failure is logged, never
    raised: the registry serves every model, and only a DFLASH/DDTREE start-up needs this one."""
    if "DFlashDraftModel" in module.ModelRegistry.models:
        return
    try:
        from .draft_model import DFlashDraftModel
    except Exception as e:  # noqa: BLE001
        logging.getLogger(__name__).warning("sglang-dflash: DFlashDraftModel not registered: %s", e)
        return
    module.ModelRegistry.models["DFlashDraftModel"] = DFlashDraftModel


def patch_spec_info(module) -> None:
    cls = module.SpeculativeAlgorithm
    if getattr(cls, _MARK, False):
        return
    original = cls.from_string.__func__

    @functools.wraps(original)
    def from_string(klass, name):
        if isinstance(name, str) and name.upper() in ALGORITHMS and name.upper() not in klass.__members__:
            return DraftTreeAlgorithm(name.upper())
        return original(klass, name)

    cls.from_string = classmethod(from_string)
    setattr(cls, _MARK, True)


def patch_server_args(module) -> None:
    cls = module.ServerArgs
    if getattr(cls, _MARK, False):
        return
    add_cli_args = cls.add_cli_args
    handle = cls._handle_speculative_decoding

    @functools.wraps(add_cli_args)
    def add_cli_args_with_ours(parser):
        add_cli_args(parser)
        for action in parser._actions:
            if "--speculative-algorithm" in action.option_strings and action.choices is not None:
                action.choices = list(action.choices) + [a for a in ALGORITHMS if a not in action.choices]
                action.help = (action.help or "Speculative algorithm.") + (
                    " DFLASH: a DFlash block drafter verified as a chain; DDTREE: its best "
                    "--speculative-num-draft-tokens - 1 prefixes verified as one tree (both from sglang-dflash)."
                )

    @functools.wraps(handle)
    def handle_with_ours(self):
        from .server_args import is_ours, resolve_speculative_args

        if is_ours(self.speculative_algorithm):
            resolve_speculative_args(self)
        return handle(self)

    cls.add_cli_args = staticmethod(add_cli_args_with_ours)
    cls._handle_speculative_decoding = handle_with_ours
    setattr(cls, _MARK, True)
