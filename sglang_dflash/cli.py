"""The checks every command line shares: each refuses bad input before any work, with one line on stderr naming the
argument, the value and what is accepted, and exit code 2 (no usage dump, no traceback)."""

from __future__ import annotations

import sys
from pathlib import Path

from .kernels.tree_build import MAX_TRITON_BUDGET as MAX_BUDGET  # DDTREE draft nodes a step, root excluded


class Refusal(SystemExit):
    """Exit code 2 after one line on stderr."""

    def __init__(self, message: str):
        print(f"error: {message}", file=sys.stderr)
        super().__init__(2)


def check(ok: bool, message: str) -> None:
    if not ok:
        raise Refusal(message)


def check_budget(budget: int, flag: str = "--budget") -> None:
    check(1 <= budget <= MAX_BUDGET, f"{flag} {budget}: expected 1..{MAX_BUDGET} draft nodes per step (the root excluded)")


def check_positive(value: int, flag: str) -> None:
    check(value >= 1, f"{flag} {value}: expected >= 1")


def check_device(device: str) -> None:
    if device == "cuda":
        import torch

        check(torch.cuda.is_available(), "--device cuda: no CUDA GPU is visible here; use --device cpu")


def read_checkpoint_config(path: str | Path, flag: str, parse):
    """parse(config dict) of the checkpoint at path, or a refusal naming what is missing or wrong in it."""
    import json

    from .models.config import PairError, read_config

    check_checkpoint(path, flag)
    try:
        return parse(read_config(path))
    except (PairError, KeyError, TypeError, ValueError, json.JSONDecodeError) as e:
        raise Refusal(f"{flag} {path}: not a config this accepts ({type(e).__name__}: {e})") from None


def check_checkpoint(path: str | Path | None, flag: str) -> None:
    """A local checkpoint directory: it exists and holds a config.json."""
    if path is None:
        return
    p = Path(path)
    check(p.is_dir(), f"{flag} {path}: no such directory")
    check((p / "config.json").is_file(), f"{flag} {path}: not a checkpoint directory (no config.json)")
