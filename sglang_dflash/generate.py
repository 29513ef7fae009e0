"""python -m sglang_dflash.generate: the standalone engine's command line (AR / DFLASH / DDTREE).

With no arguments it runs on its embedded default. The engine and the tiny trained pair it
defaults to are not built yet (issue 4); until then this entry point checks the installation by
building and verifying one draft tree with the package's algorithms, and says so.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from . import __version__
from .ddtree import accept_greedy, build_ddtree


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m sglang_dflash.generate",
        description="Generate with a Qwen3.5/3.6 target alone (ar), with a DFlash drafter verified as a chain (dflash), "
        "or as a draft tree (ddtree). Greedy output is identical for all three.",
    )
    p.add_argument("--target", help="target checkpoint directory (Hugging Face Qwen3.5 format)")
    p.add_argument("--draft", help="DFlash drafter checkpoint directory (z-lab format)")
    p.add_argument("--algo", choices=["ar", "dflash", "ddtree"], default="ddtree", help="decoding algorithm (default: ddtree)")
    p.add_argument("--budget", type=int, default=64, help="DDTREE: draft nodes per step, root excluded (default: 64)")
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", help="prompt text (needs a tokenizer beside the target)")
    prompt.add_argument("--prompt-ids", help="prompt as comma-separated token ids, e.g. 1,2,3")
    p.add_argument("--max-new-tokens", type=int, default=64, help="tokens to generate (default: 64)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default), > 0 samples losslessly")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--json", action="store_true", help="print one JSON object: output_ids, accept_lens, tokens_per_s")
    args = p.parse_args(argv)
    if args.budget < 1:
        p.error(f"--budget must be >= 1, got {args.budget}")
    if args.max_new_tokens < 1:
        p.error(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
    if args.prompt_ids is not None:
        try:
            args.prompt_ids = [int(t) for t in args.prompt_ids.split(",") if t.strip()]
        except ValueError:
            p.error(f"--prompt-ids must be comma-separated integers, got {args.prompt_ids!r}")
    return args


def self_check(args: argparse.Namespace) -> dict:
    """Build one DDTree over random peaked marginals (Qwen3.6 vocabulary, 15 depths) and walk it."""
    gen = torch.Generator(device=args.device).manual_seed(0)
    logits = torch.randn(1, 15, 248_320, generator=gen, device=args.device) * 4
    start = time.perf_counter()
    tree = build_ddtree(logits, torch.zeros(1, dtype=torch.long, device=args.device), args.budget)
    target = torch.randn(1, tree.num_nodes, 248_320, generator=gen, device=args.device)
    acc = accept_greedy(tree, target)
    ms = (time.perf_counter() - start) * 1e3
    return {
        "nodes": tree.num_nodes,
        "max_depth": int(tree.depths.max()),
        "accept_len": int(acc.accept_len[0]),
        "ms": round(ms, 1),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check = self_check(args)
    status = {
        "version": __version__,
        "status": "engine not built yet (issue 4): no model was run; ddtree self-check passed",
        "ddtree_self_check": check,
        "device": args.device,
    }
    if args.json:
        print(json.dumps(status))
    else:
        print(f"sglang-dflash {__version__}: the standalone engine is not built yet (issue 4), so no model was run.")
        print(
            f"self-check on {args.device}: DDTree of {check['nodes']} nodes (depth {check['max_depth']}) over a "
            f"248,320-token vocabulary built and verified in {check['ms']} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
