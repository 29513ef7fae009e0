"""Same-run A/B of the Triton kernels of several source trees (branches, commits) on one GPU.

    git archive main sglang_dflash | tar -x -C /tmp/ab/main            # on the CPU machine (needs mkdir -p)
    git archive my-branch sglang_dflash | tar -x -C /tmp/ab/new        # put them under the repo, untracked, to carry
    PYTHONPATH=$PWD python3 benchmarks/ab_trees.py gdn main=ab/main new=ab/new [--out DIR]

Each tree's `sglang_dflash` is imported in turn into this one process (the package's modules swapped in
sys.modules), so every tree's kernel runs in the same run on the same inputs. Each case checks the outputs against
the first tree's (max relative difference; the walk: equal to the torch reference) and times each tree's call in a
CUDA graph (benchmarks/timing.py). The first timing of a process ran 4-5% fast on an H200 (benchmarks/RESULTS.md),
so the first row favours the first tree by that much. What:
  gdn        tree_gdn_verify_triton at Qwen3.6-27B TP=2 shapes (HV 24, H 8, K = V = 128, bf16), DDTree-shaped,
             deeper (`deep`) and chain trees, N around the block sizes (16/17, 33, 64/65, 129), R = 1 and 8; and
             tree_gdn_verify_gather (DDTree-shaped, depth bound 15) at R = 1 x 129 and 256, R = 8 x 80
  walk       greedy_walk at R = 8 and 1, B = 64, vocabulary 248,320: random target logits (the walk stops at the
             root), `mid` and `deep` (the draft's first-child chain to depth 6 / 15) and `sibling` (second children wherever
             there are two); lookahead 1, 2, 4 and 8 where a tree's greedy_walk has it
  build      the vocabulary pass (kernels.vocab.draft_log_probs) and the tree build (kernels.tree_build) at R = 1
             and 8, B = 16 and 64, L = 15, vocabulary 248,320, bf16 draft logits; outputs equal to the first tree's
  attention  tree_attention over a 4096-token prefix (12 / 2 heads, head dim 256, bf16), N = 16 and 64, R = 1 and 8
--smoke: tiny shapes on the CPU under TRITON_INTERPRET=1, no timing (a check of the tool, not a measurement).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import types
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.bench_ddtree import MID_DEPTH, deep_draft, deep_target  # noqa: E402
from benchmarks.kernels import bench_tree_gdn  # noqa: E402
from benchmarks.kernels.bench_tree_gdn import DDTREE_DEPTH, verify_inputs  # noqa: E402


def load_tree(path: str) -> types.SimpleNamespace:
    """The kernels of the `sglang_dflash` under path (its modules, and any loaded before, dropped first)."""
    for name in [m for m in sys.modules if m == "sglang_dflash" or m.startswith("sglang_dflash.")]:
        del sys.modules[name]
    sys.path.insert(0, os.path.abspath(path))
    try:
        from sglang_dflash.ddtree import build_ddtree, walk_tree_ref
        from sglang_dflash.kernels import tree_attention as attention
        from sglang_dflash.kernels import vocab
        from sglang_dflash.kernels.tree_build import tree_build
        from sglang_dflash.kernels.tree_gdn import gather_tables
        from sglang_dflash.kernels.tree_gdn import tree_gdn as gdn
        from sglang_dflash.kernels.tree_gdn.tree_gdn_gather import tree_gdn_verify_gather
        from sglang_dflash.kernels.tree_walk import greedy_walk
    finally:
        sys.path.pop(0)
    return types.SimpleNamespace(gdn=gdn, greedy_walk=greedy_walk, attention=attention, build_ddtree=build_ddtree,
                                 walk_tree_ref=walk_tree_ref, vocab=vocab, tree_build=tree_build,
                                 gather_tables=gather_tables, tree_gdn_verify_gather=tree_gdn_verify_gather)  # fmt: skip


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))


def gdn_heads(smoke: bool) -> tuple[tuple[int, int, int, int], str]:
    """((HV, H, K, V), device) of the GDN cases: Qwen3.6-27B's TP=2 shapes on the GPU, tiny ones for --smoke."""
    g = bench_tree_gdn
    return ((2, 1, 16, 16), "cpu") if smoke else ((g.HV, g.H, g.K, g.V), "cuda")


def gdn_cases(smoke: bool):
    """(label, args, kwargs) of tree_gdn_verify_triton (`bench_tree_gdn.verify_inputs`)."""
    heads, dev = gdn_heads(smoke)
    shapes = [(1, 5, "ddtree"), (1, 17, "chain")] if smoke else [
        (1, 16, "chain"), (1, 17, "ddtree"), (1, 33, "ddtree"), (1, 40, "ddtree"), (1, 63, "ddtree"), (1, 64, "ddtree"),
        (1, 65, "ddtree"), (1, 65, "deep"), (1, 129, "ddtree"), (8, 17, "ddtree"), (8, 63, "ddtree"), (8, 64, "ddtree"),
        (8, 65, "ddtree"), (8, 65, "deep"),
    ]  # fmt: skip
    for R, N, kind in shapes:
        args, mask, depth = verify_inputs(R, N, kind, dev, heads)
        yield f"R={R} N={N} {kind} (depth {depth})", args, dict(ancestor_mask=mask, max_depth=depth)


def sibling_target(tree, target: torch.Tensor) -> torch.Tensor:
    """target whose argmax leads from the root through the second child of every node that has two (else the
    first), down to a leaf: a walk that leaves the draft's continuation at every depth it can."""
    forced = target.clone()
    for r in range(tree.parents.shape[0]):
        parents, cur = tree.parents[r].tolist(), 0
        while kids := [i for i, p in enumerate(parents) if p == cur]:
            nxt = kids[1] if len(kids) > 1 else kids[0]
            forced[r, cur, tree.token_ids[r, nxt]] = 100.0
            cur = nxt
    return forced


def run(what: str, trees: dict[str, types.SimpleNamespace], dev: str, smoke: bool) -> list[dict]:
    from benchmarks.timing import graph_us

    time_us = (lambda f: 0.0) if smoke else (lambda f: graph_us(f, reps=10))
    first = next(iter(trees.values()))
    rows = []

    def case(label: str, calls: dict, check):
        row = {"case": label, "us": {}, "check": {}}
        for name, f in calls.items():
            row["check"][name] = check(f())
            row["us"][name] = time_us(f)
        rows.append(row)
        print(f"{label:34s} " + "  ".join(f"{n} {row['us'][n]:7.1f} ({row['check'][n]})" for n in calls), flush=True)

    if what == "gdn":
        for label, args, kw in gdn_cases(smoke):
            ref, _ = first.gdn.tree_gdn_verify_triton(*args, **kw)
            calls = {n: (lambda t=t: t.gdn.tree_gdn_verify_triton(*args, **kw)) for n, t in trees.items()}
            case(label, calls, lambda out: f"d {rel(out[0], ref):.0e}")
        # the ancestor-gather kernel (`uses_gather`; its tables are made on the GPU only)
        for R, N in [] if smoke else [(1, 129), (1, 256), (8, 80)]:
            args, mask, _ = verify_inputs(R, N, "ddtree", dev, gdn_heads(smoke)[0])
            tables = first.gather_tables(mask, DDTREE_DEPTH)
            ref, _ = first.tree_gdn_verify_gather(*args[:-1], tables=tables)
            calls = {n: (lambda t=t: t.tree_gdn_verify_gather(*args[:-1], tables=tables)) for n, t in trees.items()}
            case(f"R={R} N={N} ddtree, gather", calls, lambda out: f"d {rel(out[0], ref):.0e}")
    elif what == "walk":
        V, L = (300, 4) if smoke else (248_320, 15)
        for R, B in [(2, 8)] if smoke else [(8, 64), (1, 64)]:
            gen = torch.Generator(device=dev).manual_seed(R + B)
            draft = (torch.randn(R, L, V, generator=gen, device=dev) * 4).to(torch.bfloat16)
            target = torch.randn(R, B + 1, V, generator=gen, device=dev).to(torch.bfloat16)
            tree = first.build_ddtree(deep_draft(draft, gen), torch.zeros(R, dtype=torch.long, device=dev), B)
            kinds = (("random", target), ("mid", deep_target(tree, target, MID_DEPTH)), ("deep", deep_target(tree, target)),
                     ("sibling", sibling_target(tree, target)))  # fmt: skip
            for kind, t in kinds:
                ref = first.walk_tree_ref(tree.token_ids, tree.parents, tree.depths, tree.ancestor_mask, t.argmax(-1),
                                          tree.max_depth)  # fmt: skip
                calls = {}
                for n, tr in trees.items():
                    has = "lookahead" in inspect.signature(tr.greedy_walk).parameters
                    for la in (1, 2, 4, 8) if has else (None,):
                        kw = {} if la is None else {"lookahead": la}
                        calls[n if la is None else f"{n}/LA{la}"] = lambda tr=tr, kw=kw, t=t: tr.greedy_walk(
                            tree.token_ids, tree.parents, t, tree.max_depth, **kw
                        )
                same = lambda out: "ok" if all(torch.equal(a, b) for a, b in zip(out, ref)) else "MISMATCH"  # noqa: E731
                case(f"R={R} B={B} {kind} (accepts {ref[0].float().mean():.1f})", calls, same)
    elif what == "build":
        V, L = (300, 4) if smoke else (248_320, 15)

        def vocab_check(ref):  # ids must be equal; logp may differ in the last bits (the logsumexp's summation order)
            return lambda out: (
                f"ids {'ok' if torch.equal(out[1], ref[1]) else 'MISMATCH'} logp d {(out[0] - ref[0]).abs().max():.0e}"
            )

        def tree_check(ref):  # the fields both trees return
            return lambda out: "ok" if all(torch.equal(out[f], ref[f]) for f in out.keys() & ref.keys()) else "MISMATCH"

        for R, B in [(2, 8)] if smoke else [(8, 64), (8, 16), (1, 64), (1, 16)]:
            gen = torch.Generator(device=dev).manual_seed(R + B)
            draft = (torch.randn(R, L, V, generator=gen, device=dev) * 4).to(torch.bfloat16)
            roots = torch.zeros(R, dtype=torch.long, device=dev)
            logp, ids = first.vocab.draft_log_probs(draft, B)
            calls = {n: (lambda t=t: t.vocab.draft_log_probs(draft, B)) for n, t in trees.items()}
            case(f"R={R} B={B} vocabulary pass", calls, vocab_check((logp, ids)))
            ref = first.tree_build(logp, ids, roots, B)
            calls = {n: (lambda t=t: t.tree_build(logp, ids, roots, B)) for n, t in trees.items()}
            case(f"R={R} B={B} tree build", calls, tree_check(ref))
    elif what == "attention":
        HQ, HKV, DH, PREFIX = (4, 2, 16, 40) if smoke else (12, 2, 256, 4096)
        # (R, N, cache capacity in prefixes): a cache longer than the prefix, as the engine's static cache or a
        # server's pool table, splits by its capacity
        for R, N, cap in [(1, 9, 1), (1, 9, 3)] if smoke else [(1, 16, 1), (1, 64, 1), (8, 64, 1), (1, 64, 2), (1, 64, 8)]:
            gen = torch.Generator(device=dev).manual_seed(R * 100 + N)
            rnd = lambda *s: torch.randn(*s, generator=gen, device=dev).bfloat16()  # noqa: E731
            base = (rnd(R, N, HQ, DH), rnd(R, cap * PREFIX, HKV, DH), rnd(R, cap * PREFIX, HKV, DH),
                    torch.full((R,), PREFIX, device=dev), rnd(R, N, HKV, DH), rnd(R, N, HKV, DH))  # fmt: skip
            marginals = torch.randn(R, 15, 64, generator=gen, device=dev) * 2.5
            anc = first.build_ddtree(marginals, torch.zeros(R, dtype=torch.long, device=dev), N - 1).ancestor_mask
            calls = {}
            for n, t in trees.items():  # the mask as each tree's engine passes it: packed once where it can be
                packed = hasattr(t.attention, "ancestor_bits")
                mask = t.attention.ancestor_bits(anc) if packed else anc
                calls[n] = lambda t=t, mask=mask: t.attention.tree_attention(*base, mask)
            ref = next(iter(calls.values()))()
            case(f"R={R} N={N}" + (f" cache {cap}x" if cap > 1 else ""), calls, lambda out: f"d {rel(out, ref):.0e}")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("gdn", "walk", "build", "attention"))
    p.add_argument("trees", nargs="+", help="NAME=PATH: a folder holding an `sglang_dflash` package (the first is the reference)")
    p.add_argument("--out", help="directory for ab_trees_<what>.json")
    p.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (TRITON_INTERPRET=1), no timing")
    args = p.parse_args()
    if args.smoke and os.environ.get("TRITON_INTERPRET") != "1":
        p.error("--smoke runs the kernels under the interpreter: set TRITON_INTERPRET=1")
    pairs = [t.split("=", 1) for t in args.trees]
    if any(len(pair) != 2 or not os.path.isdir(os.path.join(pair[1], "sglang_dflash")) for pair in pairs):
        p.error(f"each tree is NAME=PATH with PATH/sglang_dflash a package, got {args.trees}")
    trees = {name: load_tree(path) for name, path in pairs}
    for name, t in trees.items():
        print(f"{name}: {Path(t.gdn.__file__).parents[2]}", flush=True)
    dev = "cpu" if args.smoke else "cuda"
    if not args.smoke:
        print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    rows = run(args.what, trees, dev, args.smoke)
    if args.out:
        Path(args.out, f"ab_trees_{args.what}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
