"""The width controller (`budget.WidthController`) against fixed DDTREE budgets and plain decoding, on the shipped
tiny pair (CPU is enough), under synthetic step-cost tables: a step of R requests verifying N nodes each costs
1 + c * R * N time units, for a few slopes c (steep: speculation never pays; flat: the widest tree does).

    PYTHONPATH=$PWD python3 benchmarks/bench_budget.py [--new-tokens 48] [--slopes 0.3,0.02,0.002]

Each run emits the target's own greedy tokens (checked); what differs is how many steps of which width it takes.
The figure is MODELED: the run's tokens over the sum of its steps' table costs, in tokens per time unit; the
greedy acceptance is real (the shipped pair's), the costs are not a GPU's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sglang_dflash.budget import BudgetControl, VerifyCost  # noqa: E402
from sglang_dflash.engine import GenerationResult, generate  # noqa: E402
from sglang_dflash.engine.load import load_pair, tiny_pair  # noqa: E402

PROMPTS = [[1, 2, 3, 4, 5, 6, 7, 8], [100, 200, 300, 400], [5, 6, 7], [9, 10, 11, 12, 13], [50, 60]]
TIERS = (1, 4, 8, 16, 41)
FIXED = (3, 7, 15, 40)


def modeled_rate(res: GenerationResult, cost: VerifyCost, nodes: int | None = None) -> float:
    """Tokens per time unit: the decode steps' emitted tokens (each request's first token is its prefill's) over
    their costs, each at its active requests x its width (`nodes`, else the width the step verified)."""
    seconds = 0.0
    for i in range(max(len(a) for a in res.accept_lens)):
        active = sum(len(a) > i for a in res.accept_lens)
        seconds += cost.of(active * (nodes or res.verify_nodes[i]))
    return sum(len(o) - 1 for o in res.output_ids) / seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--slopes", default="0.3,0.02,0.002", help="cost per verified token of a step, comma-separated")
    args = ap.parse_args(argv)
    target, drafter = load_pair(*tiny_pair())
    reference = generate(target, PROMPTS, args.new_tokens, "ar")
    fixed = {b: generate(target, PROMPTS, args.new_tokens, "ddtree", drafter, budget=b) for b in FIXED}
    sizes = sorted({r * n for n in TIERS for r in range(1, len(PROMPTS) + 1)})
    print(f"Modeled tokens per time unit, {len(PROMPTS)} prompts x {args.new_tokens} greedy tokens, tiers {TIERS}")
    print()
    print("| cost per verified token | controller | widths used | " + " | ".join(f"DDTREE {b}" for b in FIXED) + " | plain |")
    print("|---|---|---|" + "---|" * len(FIXED) + "---|")
    for slope in map(float, args.slopes.split(",")):
        cost = VerifyCost(tuple(sizes), tuple(1.0 + slope * s for s in sizes))
        res = generate(target, PROMPTS, args.new_tokens, "ddtree", drafter, budget_control=BudgetControl(cost, TIERS))
        if res.output_ids != reference.output_ids or any(f.output_ids != reference.output_ids for f in fixed.values()):
            raise SystemExit("a run's tokens differ from plain greedy decoding's")
        used = ", ".join(f"{n}: {res.verify_nodes.count(n)}" for n in TIERS if n in res.verify_nodes)
        cells = [f"{modeled_rate(f, cost, b + 1):.2f}" for b, f in fixed.items()]
        plain = modeled_rate(reference, cost, 1)
        print(f"| {slope} | {modeled_rate(res, cost):.2f} | {used} | " + " | ".join(cells) + f" | {plain:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
