"""Load a target / drafter pair (validated before any weight is read) and the target's tokenizer."""

from __future__ import annotations

from pathlib import Path

import torch

from ..models import DraftConfig, PairError, Qwen3_5Target, TargetConfig, check_pair, read_config
from ..models.dflash_draft import DFlashDrafter

TINY_PAIR = Path(__file__).resolve().parent.parent / "assets" / "tiny-pair"


def load_pair(target_dir: str | Path, draft_dir: str | Path | None, device: str = "cpu", dtype: torch.dtype = torch.float32):
    """(target, drafter or None). The target taps the drafter's target_layer_ids."""
    target_cfg = TargetConfig.from_dict(read_config(target_dir))
    drafter = None
    if draft_dir is not None:
        check_pair(target_cfg, DraftConfig.from_dict(read_config(draft_dir)))
        drafter = DFlashDrafter.from_pretrained(draft_dir, device=device, dtype=dtype)
    taps = drafter.config.target_layer_ids if drafter is not None else ()
    return Qwen3_5Target.from_pretrained(target_dir, tap_layers=taps, device=device, dtype=dtype), drafter


def load_tokenizer(target_dir: str | Path):
    """The tokenizer saved beside the target, or None if there is none."""
    if not any((Path(target_dir) / f).exists() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json")):
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(target_dir))


def tiny_pair() -> tuple[Path, Path]:
    """The trained tiny pair shipped in the package (the CLIs' embedded default)."""
    target, draft = TINY_PAIR / "target", TINY_PAIR / "draft"
    if not (target / "config.json").is_file() or not (draft / "config.json").is_file():
        raise PairError(f"the shipped tiny pair is missing from {TINY_PAIR}; reinstall the package or pass --target/--draft")
    return target, draft
