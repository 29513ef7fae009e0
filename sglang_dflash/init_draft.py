"""python -m sglang_dflash.init_draft: a randomly initialised DFlash drafter for a target, in the z-lab format.

The drafter copies the target's hidden size, vocabulary, attention heads and MLP width, taps
`--layers` target layers spread as z-lab spreads them (layer 1 to N - 3), and is written as
config.json + model.safetensors: a start for training, or a stand-in for tests.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

from .cli import check, check_positive, read_checkpoint_config
from .models.config import DraftConfig, PairError, TargetConfig, check_pair, default_target_layer_ids, read_config
from .models.dflash_draft import DFlashDrafter
from .models.layers import save_checkpoint

ARCHITECTURES = {"dflash": "DFlashDraftModel", "dflash2": "DFlash2DraftModel", "dspark": "DSparkDraftModel"}


def draft_config_dict(
    target: TargetConfig, num_layers: int, block_size: int, mask_token_id: int, taps: int = 5, sliding_window: int | None = None,
    format: str = "dflash", heads: dict | None = None,
) -> dict:  # fmt: skip
    """config.json for a drafter of `target` in `format` (z-lab DFlash, DFlash2 or DSpark); with sliding_window, all
    layers but the last slide (Qwen3.6's pattern). heads: dflash_config entries of the format's extra modules
    (conv_kernel_size and conv_group_size, selector_rank and selector_top_k; markov_rank and markov_head_type)."""
    types = ["sliding_attention"] * (num_layers - 1) + ["full_attention"] if sliding_window else ["full_attention"] * num_layers
    return {
        "architectures": [ARCHITECTURES[format]],
        "model_type": "qwen3",
        "hidden_size": target.hidden_size,
        "intermediate_size": target.intermediate_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": target.num_attention_heads,
        "num_key_value_heads": target.num_key_value_heads,
        "head_dim": target.head_dim,
        "vocab_size": target.vocab_size,
        "rms_norm_eps": target.rms_norm_eps,
        "rope_theta": target.rope_theta,
        "attention_bias": False,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "layer_types": types,
        "sliding_window": sliding_window,
        "use_sliding_window": sliding_window is not None,  # else transformers' Qwen3Config drops the window
        "block_size": block_size,
        "num_target_layers": target.num_hidden_layers,
        "dflash_config": {
            "target_layer_ids": default_target_layer_ids(target.num_hidden_layers, taps),
            "mask_token_id": mask_token_id,
            "block_size": block_size,
            **(heads or {}),
        },
    }


@torch.no_grad()
def init_draft(
    target_dir: str | Path,
    out_dir: str | Path,
    num_layers: int = 5,
    block_size: int = 16,
    seed: int = 0,
    mask_token_id: int | None = None,
    taps: int = 5,
    sliding_window: int | None = None,
    dtype: torch.dtype | None = None,
    format: str = "dflash",
    heads: dict | None = None,
) -> DFlashDrafter:
    """Write a random drafter for the target at target_dir into out_dir (weights in `dtype`, default float32);
    returns it. Only the target's config.json is read. format, heads: as `draft_config_dict`."""
    target = TargetConfig.from_dict(read_config(target_dir))
    mask = target.vocab_size - 1 if mask_token_id is None else mask_token_id
    cfg = draft_config_dict(target, num_layers, block_size, mask, taps, sliding_window, format, heads)
    draft = DraftConfig.from_dict(cfg)
    check_pair(target, draft)
    torch.manual_seed(seed)
    model = DFlashDrafter(draft)
    for name, p in model.named_parameters():
        if p.dim() == 2:  # linears: transformers' normal(0, 0.02) would start the drafter blind to its inputs
            p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    save_checkpoint(model, out, dtype=dtype)
    return model


def format_heads(args) -> dict:
    """dflash_config entries of --format's modules from --conv, --selector, --markov (refused in one line if bad)."""

    def pair(flag: str, value: str, second=int) -> tuple:
        message = f"{flag} {value}: expected two values separated by a comma"
        parts = value.split(",")
        check(len(parts) == 2, message)
        try:
            return int(parts[0]), second(parts[1])
        except ValueError:
            check(False, message)

    heads = {}
    if args.conv:
        heads["conv_kernel_size"], heads["conv_group_size"] = pair("--conv", args.conv)
    if args.format == "dflash2":
        heads["selector_rank"], heads["selector_top_k"] = pair("--selector", args.selector)
    if args.format == "dspark":
        heads["markov_rank"], heads["markov_head_type"] = pair("--markov", args.markov, str)
    return heads


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m sglang_dflash.init_draft", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--target", required=True, help="target checkpoint directory (Hugging Face Qwen3.5/3.6 format)")
    p.add_argument("--out", required=True, help="directory to write config.json + model.safetensors into")
    p.add_argument("--layers", type=int, default=5, help="drafter decoder layers (default: 5, as z-lab's)")
    p.add_argument("--block-size", type=int, default=16, help="tokens per drafted block, anchor included (default: 16)")
    p.add_argument("--taps", type=int, default=5, help="target layers whose hidden states condition the drafter (default: 5)")
    p.add_argument(
        "--sliding-window",
        type=int,
        default=None,
        help="make all layers but the last sliding-window layers of this width (z-lab's Qwen3.6 pattern)",
    )
    p.add_argument("--mask-token-id", type=int, default=None, help="block filler token (default: the last vocabulary id)")
    p.add_argument("--format", choices=sorted(ARCHITECTURES), default="dflash",
                   help="z-lab DFlash (default), DFlash2 (a candidate selector) or DSpark (a Markov head)")  # fmt: skip
    p.add_argument("--conv", default=None, metavar="KERNEL,GROUP",
                   help="grouped dynamic convolutions around each sublayer (DFlash2's; e.g. 4,16)")  # fmt: skip
    p.add_argument("--selector", default="32,8", metavar="RANK,TOP_K", help="dflash2: the selector's rank and candidates")
    p.add_argument("--markov", default="32,vanilla", metavar="RANK,KIND", help="dspark: the Markov head (vanilla, gated, rnn)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true", help="write into a non-empty --out (its config.json and weights are replaced)")
    p.add_argument(
        "--dtype", choices=("float32", "bfloat16"), default="float32", help="weights on disk (bfloat16 halves a large drafter)"
    )
    args = p.parse_args(argv)
    check_positive(args.layers, "--layers")
    heads = format_heads(args)
    check(args.block_size >= 2, f"--block-size {args.block_size}: expected >= 2 (the anchor and at least one draft)")
    layers = read_checkpoint_config(args.target, "--target", TargetConfig.from_dict).num_hidden_layers
    check(1 <= args.taps <= layers, f"--taps {args.taps}: expected 1..{layers} (distinct layers of the {layers}-layer target)")
    out = Path(args.out)
    check(args.force or not (out.exists() and any(out.iterdir())), f"--out {args.out}: not empty; --force to write into it")
    try:
        model = init_draft(args.target, args.out, args.layers, args.block_size, args.seed, args.mask_token_id, args.taps,
                           args.sliding_window, getattr(torch, args.dtype), args.format, heads)  # fmt: skip
    except PairError as e:
        check(False, f"--format {args.format}: {e}")
    n = sum(p.numel() for p in model.parameters())
    print(
        f"wrote a random {args.layers}-layer {ARCHITECTURES[args.format]} ({n / 1e6:.2f} M parameters, block {args.block_size}, "
        f"taps {list(model.config.target_layer_ids)}) to {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
