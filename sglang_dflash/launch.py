"""python -m sglang_dflash.launch: SGLang's own launch_server with the plugin active and presets.

    python -m sglang_dflash.launch --preset a6000x2-qwen3.6-27b [any launch_server arguments]

A preset supplies launch_server arguments; arguments given after it override the preset's.
The resolved command is printed, then launch_server runs in a fresh interpreter (where SGLang loads the
plugin through its entry point). --dry-run prints the command only.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import sys
from pathlib import Path

PRESETS = {
    # Qwen3.6-27B on two RTX A6000 (48 GB, SM86): 27 GB of bf16 weights per GPU at TP=2, the 1.7B drafter
    # beside it; DDTREE with 16 verify tokens (budget 15): one whole 16-node block of the tree GDN verify on SM86
    # (`verify_blocks`; 2^k tokens beat 2^k + 1, whose root runs alone first). 16, not 32: past ~140 verified tokens a
    # step an A6000's verify is compute-bound, so 32 at 32 requests is projected below stock decode and 16 never
    # below 1.75x, within 1% of 32 at one request (benchmarks/RESULTS.md, "2x RTX A6000 ... By load").
    # Override with --speculative-algorithm DFLASH_CHAIN, ...
    "a6000x2-qwen3.6-27b": [
        "--model-path", "Qwen/Qwen3.6-27B",
        "--tp", "2",
        "--speculative-algorithm", "DDTREE",
        "--speculative-draft-model-path", "z-lab/Qwen3.6-27B-DFlash",
        "--speculative-num-draft-tokens", "16",
        "--mem-fraction-static", "0.85",
        "--max-running-requests", "32",
        # no graph sizes and no mamba strategy: the plugin cuts SGLang's default sizes to those whose verify graphs fit
        # ~4 GiB and the radix cache takes extra_buffer (README), on both releases, whose flags differ (0.5.23 has
        # --cuda-graph-max-bs-decode, --mamba-radix-cache-strategy)
        "--attention-backend", "triton",
    ],
}  # fmt: skip


def resolve(preset: str | None, extra: list[str]) -> list[str]:
    """launch_server argv: the preset's arguments, then the user's (argparse keeps the last of a repeated flag)."""
    if preset is not None and preset not in PRESETS:
        raise SystemExit(f"unknown preset {preset!r}; presets: {', '.join(PRESETS)}")
    return [*(PRESETS[preset] if preset else []), *extra]


def check_speculative(argv: list[str]) -> None:
    """The speculative arguments of a launch_server command line, refused before SGLang starts (one line, exit 2): an
    algorithm SGLang does not list; for ours, a local drafter path that is not a checkpoint, or a verify size out of
    range for the drafter's block. Hub ids (org/name) are left to SGLang."""
    from .cli import MAX_BUDGET, Refusal, check, read_checkpoint_config

    p = argparse.ArgumentParser(add_help=False)
    for flag in ("--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-draft-tokens"):
        p.add_argument(flag)
    args, _ = p.parse_known_args(argv)
    if args.speculative_algorithm is None:
        return
    from .sglang.plugin.activate import cli_choices, our_name, refuse_if_asked
    from .sglang.server_args import verify_nodes

    asked = args.speculative_algorithm
    name = our_name(asked)
    refuse_if_asked(argv)  # ours, where the plugin is off (an unsupported SGLang): the server's own one-line refusal
    if name is None:
        choices = cli_choices()
        check(asked in choices or asked.upper() in choices, f"--speculative-algorithm {asked}: expected one of "
              f"{', '.join(choices)}")  # fmt: skip
        return
    draft = args.speculative_draft_model_path
    check(draft is not None, f"--speculative-algorithm {name}: needs --speculative-draft-model-path (a DFlash drafter)")
    local = Path(draft).expanduser()
    block = None  # a hub drafter's block is SGLang's to check at start-up
    if local.exists() or draft.startswith((".", "/", "~")) or draft.count("/") != 1:
        from .models.config import DraftConfig

        block = read_checkpoint_config(local, "--speculative-draft-model-path", DraftConfig.from_dict).num_depths + 1
    nodes = args.speculative_num_draft_tokens
    try:
        verify_nodes(name, None if nodes is None else int(nodes), block or MAX_BUDGET + 1)
    except ValueError as e:
        raise Refusal(f"--speculative-num-draft-tokens {nodes}: {e}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sglang_dflash.launch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--preset", choices=sorted(PRESETS), help="launch_server arguments for a known setup")
    p.add_argument("--dry-run", action="store_true", help="print the resolved command and exit")
    args, extra = p.parse_known_args(argv)
    server_argv = resolve(args.preset, extra)
    check_speculative(server_argv)
    command = [sys.executable, "-m", "sglang.launch_server", *server_argv]
    print("resolved: " + shlex.join(command), flush=True)
    if args.dry_run:
        return 0
    if importlib.util.find_spec("sglang") is None:
        print("error: SGLang is not installed: pip install 'sglang-dflash[sglang]'", file=sys.stderr)
        return 2
    os.execv(sys.executable, command)


if __name__ == "__main__":
    raise SystemExit(main())
