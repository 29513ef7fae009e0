"""python -m sglang_dflash.generate: the standalone engine's command line (AR / DFLASH / DDTREE).

Without --target / --draft it runs the tiny trained pair shipped in the package. Greedy output
is identical for all three algorithms (the target's own); with --temperature > 0 it is
distributed as the target's own sampling.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from .cli import Refusal, check, check_budget, check_checkpoint, check_device, check_positive
from .engine import ALGOS, generate, load_pair, load_tokenizer, tiny_pair
from .models import PairError
from .proposal import SCORINGS

DEFAULT_PROMPT = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m sglang_dflash.generate",
        description="Generate with a Qwen3.5/3.6 target alone (ar), with a DFlash drafter verified as a chain (dflash), "
        "or as a draft tree (ddtree). Without --target/--draft: the tiny pair shipped in the package.",
    )
    p.add_argument("--target", help="target checkpoint directory (Hugging Face Qwen3.5/3.6 format)")
    p.add_argument("--draft", help="drafter checkpoint directory (z-lab DFlash, DFlash2 or DSpark); for dflash and ddtree")
    p.add_argument("--scoring", choices=SCORINGS, default="conditional",
                   help="ddtree, DFlash2 or DSpark drafter: trees by its conditional head (default) or marginals")  # fmt: skip
    p.add_argument("--algo", choices=ALGOS, default="ddtree", help="decoding algorithm (default: ddtree)")
    p.add_argument(
        "--budget",
        type=int,
        default=31,
        help="DDTREE: draft nodes per step, root excluded (default: 31; 2^k - 1 verify whole blocks of the GDN kernels)",
    )
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", help="prompt text (needs a tokenizer beside the target; default: a Python def)")
    prompt.add_argument("--prompt-ids", help="prompt as comma-separated token ids, e.g. 1,2,3")
    p.add_argument("--max-new-tokens", type=int, default=128, help="tokens to generate (default: 128)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); > 0 samples losslessly")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (default: 1, off)")
    p.add_argument("--top-k", type=int, default=-1, help="sample among the k most likely tokens (default: -1, off)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default: 0)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--json", action="store_true", help="print one JSON object: output_ids, accept_lens, tokens_per_s")
    args = p.parse_args(argv)
    check_budget(args.budget)
    check_positive(args.max_new_tokens, "--max-new-tokens")
    check(args.temperature >= 0, f"--temperature {args.temperature}: expected >= 0")
    check(0 < args.top_p <= 1, f"--top-p {args.top_p}: expected in (0, 1]")
    check(args.prompt is None or args.prompt.strip() != "", "--prompt '': empty; give some text, or --prompt-ids")
    if args.prompt_ids is not None:
        try:
            args.prompt_ids = [int(t) for t in args.prompt_ids.split(",") if t.strip()]
        except ValueError:
            raise Refusal(f"--prompt-ids {args.prompt_ids!r}: expected comma-separated integers") from None
        check(bool(args.prompt_ids), "--prompt-ids '': empty; expected comma-separated token ids, e.g. 1,2,3")
    check(args.draft is None or args.target is not None, "--draft without --target: give both, or neither (the shipped pair)")
    check(args.algo == "ar" or args.target is None or args.draft is not None, f"--algo {args.algo}: needs --draft")
    check_checkpoint(args.target, "--target")
    check_checkpoint(args.draft, "--draft")
    check_device(args.device)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        target_dir, draft_dir = (args.target, args.draft) if args.target else tiny_pair()
        target, drafter = load_pair(target_dir, draft_dir, args.device, getattr(torch, args.dtype))
    except (PairError, FileNotFoundError, KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    tokenizer = load_tokenizer(target_dir)
    if args.prompt_ids is not None:
        prompt_ids = args.prompt_ids
    elif tokenizer is None:
        print(f"error: no tokenizer in {target_dir}: pass --prompt-ids", file=sys.stderr)
        return 2
    else:
        prompt_ids = tokenizer.encode(args.prompt if args.prompt is not None else DEFAULT_PROMPT)
    bad = [t for t in prompt_ids if not 0 <= t < target.config.vocab_size]
    if bad:
        print(f"error: prompt token ids {bad[:5]} outside the vocabulary of {target.config.vocab_size}", file=sys.stderr)
        return 2
    res = generate(
        target,
        [prompt_ids],
        args.max_new_tokens,
        args.algo,
        drafter,
        budget=args.budget,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        eos_token_ids=target.config.eos_token_ids,
        seed=args.seed,
        progress=not args.json,
        scoring=args.scoring,
    )
    if args.json:
        print(json.dumps({"output_ids": res.output_ids[0], "accept_lens": res.accept_lens[0], "tokens_per_s": res.tokens_per_s}))
        return 0
    if tokenizer is not None:
        print(tokenizer.decode(prompt_ids) + tokenizer.decode(res.output_ids[0]))
    else:
        print(res.output_ids[0])
    print(
        f"--- {args.algo}: {res.num_tokens} tokens in {res.decode_s:.2f} s ({res.tokens_per_s:.1f} tokens/s), "
        f"{len(res.accept_lens[0])} target passes, {res.mean_accept_len:.2f} tokens per pass",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
