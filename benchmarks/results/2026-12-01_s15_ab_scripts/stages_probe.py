"""For session 16's first GPU call (written in session 15, not run: no device time left). Triton's software
pipelining (num_stages) of every kernel in the step's hot paths, one kernel at a time: session 15 found the blocked
tree-GDN verify 10-14% faster unpipelined, and no other kernel's num_stages has been swept (tree attention: 2 and 3
only). Each pipeline is timed as launched (its wrappers' num_stages, Triton's default 3 where they pass none), then
with one kernel's num_stages forced to 1, 2 or 3 (`JITFunction.run` patched: the launch options only, so the
outputs should not change; the first output is compared). Also the blocked against the gather GDN verify between 65
and 100 nodes, where `uses_gather` has not been re-measured since the blocked kernel got faster, and the blocked
verify's V tile and warps again under the new key loop (its spills changed: ptxas sm_90 at 64 nodes, 4 warps, BV 32
104 B of stack, BV 64 616 B), and DDTREE node counts 2^k against 2^k + 1 (the root peeled off: 65 nodes took 18.4
us against 14.1 at 64 in call 6; SGLang's default is 33 nodes, the engine's 65), and the greedy walk's rows per round
(lookahead 2 / 4 / 8 / 16; 8 and 16 never timed).

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s15_ab_scripts/stages_probe.py
"""

import contextlib
import functools
import sys
import traceback
from pathlib import Path

import torch
from triton.runtime.jit import JITFunction

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/: bench_ddtree's helpers
from bench_ddtree import MID_DEPTH, L, V, deep_draft, deep_target  # noqa: E402

from benchmarks.kernels.bench_tree_attention import attention_inputs  # noqa: E402
from benchmarks.kernels.bench_tree_gdn import verify_inputs  # noqa: E402
from benchmarks.timing import graph_us  # noqa: E402
from sglang_dflash import ddtree  # noqa: E402
from sglang_dflash.ddtree import accept_greedy, build_ddtree  # noqa: E402
from sglang_dflash.kernels.tree_attention import tree_attention  # noqa: E402
from sglang_dflash.kernels.tree_build.naive import ancestors  # noqa: E402
from sglang_dflash.kernels.tree_gdn import gather_tables, solve_step_nodes  # noqa: E402
from sglang_dflash.kernels.tree_gdn.tree_gdn import aligned_ancestor_mask, tree_gdn_verify_triton, verify_blocks  # noqa: E402
from sglang_dflash.kernels.tree_gdn.tree_gdn_gather import ancestor_table, tree_gdn_verify_gather  # noqa: E402
from sglang_dflash.kernels.tree_walk import greedy_walk  # noqa: E402

_run = JITFunction.run


@contextlib.contextmanager
def launches(seen: list | None = None, force: tuple[str, int] | None = None):
    """Record the names of the kernels launched inside (seen), or force one kernel's num_stages (force)."""

    def run(self, *args, **kwargs):
        name = self.fn.__name__
        if seen is not None and name not in seen:
            seen.append(name)
        if force is not None and name == force[0]:
            kwargs["num_stages"] = force[1]
        return _run(self, *args, **kwargs)

    JITFunction.run = run
    try:
        yield
    finally:
        JITFunction.run = _run


def ddtree_pipeline(R: int, B: int, depth: int | None = MID_DEPTH):
    """Build + greedy accept whose walk accepts `depth` draft nodes (None: the deepest path, 15; 0: stops at the
    root), as bench_ddtree's."""
    gen = torch.Generator(device="cuda").manual_seed(R * 100 + B)
    draft = (torch.randn(R, L, V, generator=gen, device="cuda") * 4).to(torch.bfloat16)
    target = torch.randn(R, B + 1, V, generator=gen, device="cuda").to(torch.bfloat16)
    roots = torch.randint(0, V, (R,), generator=gen, device="cuda")
    if depth != 0:
        draft = deep_draft(draft, gen)
        target = deep_target(build_ddtree(draft, roots, B), target, depth)
    return lambda: accept_greedy(build_ddtree(draft, roots, B, validate=False), target).accepted_nodes


def attention_pipeline(R: int, N: int):
    args, _ = attention_inputs(R, N, torch.Generator(device="cuda").manual_seed(R * 100 + N))
    return lambda: tree_attention(*args)


def gather_pipeline(R: int, N: int):
    inputs, anc, depth = verify_inputs(R, N, "ddtree")
    tables = gather_tables(anc, 15)
    return lambda: tree_gdn_verify_gather(*inputs[:-1], tables)[0]


PIPELINES = {
    "build + accept R=8 B=64 (6 deep)": lambda: ddtree_pipeline(8, 64),
    "build + accept R=1 B=64 (6 deep)": lambda: ddtree_pipeline(1, 64),
    "attention R=1 N=64": lambda: attention_pipeline(1, 64),
    "attention R=1 N=16": lambda: attention_pipeline(1, 16),
    "attention R=8 N=64": lambda: attention_pipeline(8, 64),
    "gather verify R=1 N=257": lambda: gather_pipeline(1, 257),
    "gather verify R=8 N=129": lambda: gather_pipeline(8, 129),
}


def stages_sweep() -> None:
    for label, make in PIPELINES.items():
        fn = make()
        names: list[str] = []
        with launches(seen=names):
            ref = fn().float()
        base = graph_us(fn, reps=10)
        print(f"{label}: {base:.1f} us as launched; kernels {names}", flush=True)
        for name in names:
            times = []
            for stages in (1, 2, 3):
                try:
                    with launches(force=(name, stages)):
                        same = torch.equal(fn().float(), ref)
                        t = graph_us(fn, reps=10)
                    times.append(f"s{stages} {t:6.1f}{'' if same else ' (differs)'}")
                except Exception as e:  # noqa: BLE001 - a build that does not fit is a result too
                    times.append(f"s{stages} fail: {type(e).__name__}")
            print(f"  {label} | {name}: base {base:.1f} | " + "  ".join(times), flush=True)


def gather_threshold() -> None:
    print("blocked against gather GDN verify between 65 and 100 nodes (verify only, us):")
    for R, N in [(1, 80), (1, 97), (4, 97), (8, 80), (8, 97)]:
        inputs, anc, depth = verify_inputs(R, N, "ddtree")
        blocked = graph_us(lambda: tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth), reps=10)
        tables = ancestor_table(anc, 15, solve_step_nodes(R, N))  # what gather_tables would make from 100 nodes
        gather = graph_us(lambda: tree_gdn_verify_gather(*inputs[:-1], tables), reps=10)
        print(f"R={R} N={N} depth {depth}: blocked {blocked:.1f}  gather {gather:.1f}", flush=True)


def blocked_tiles() -> None:
    print("blocked GDN verify by V tile and warps with the key-loop rule (verify only, us):")
    for R, N in [(1, 64), (1, 65), (4, 65), (8, 64)]:
        inputs, anc, depth = verify_inputs(R, N, "ddtree")
        line = []
        for BV in (16, 32, 64):
            for warps in (2, 4, 8):
                try:
                    t = graph_us(lambda: tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth, BV=BV,
                                                                num_warps=warps), reps=10)  # fmt: skip
                    line.append(f"BV{BV}/w{warps} {t:.1f}")
                except Exception as e:  # noqa: BLE001
                    line.append(f"BV{BV}/w{warps} fail: {type(e).__name__}")
        default = graph_us(lambda: tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth), reps=10)
        print(f"R={R} N={N} depth {depth}: default {default:.1f} | " + "  ".join(line), flush=True)


def node_counts() -> None:
    print("DDTREE node counts 2^k against 2^k + 1 (budgets 2^k - 1 and 2^k), blocked verify and attention, us:")
    for N in (16, 17, 32, 33, 64, 65):
        inputs, anc, depth = verify_inputs(1, N, "ddtree")
        line = []
        for plan, nb in {"H200 plan": None, "SM86 plan (16-node blocks)": 16}.items():
            mask = aligned_ancestor_mask(ancestors(inputs[-1], depth), first=verify_blocks(N, anc.device, nb)[0])
            t = graph_us(lambda: tree_gdn_verify_triton(*inputs, ancestor_mask=mask, max_depth=depth, block_nodes=nb),
                         reps=10)  # fmt: skip
            line.append(f"{plan} {t:.1f}")
        line.append(f"attention {graph_us(attention_pipeline(1, N), reps=10):.1f}")
        print(f"N={N} depth {depth}: " + "  ".join(line), flush=True)


def lookahead() -> None:
    """The greedy walk's rows per round (`LOOKAHEAD` = 4 since session 14, which measured 2 and 4 only)."""
    print("build + greedy accept by the walk's rows per round, us (stops at the root / 6 deep / 15 deep):")
    for R, B in [(8, 64), (8, 16), (2, 64)]:
        line = []
        for la in (2, 4, 8, 16):
            ddtree.greedy_walk = functools.partial(greedy_walk, lookahead=la)
            try:
                ts = [graph_us(ddtree_pipeline(R, B, depth)) for depth in (0, MID_DEPTH, None)]
                line.append(f"LA{la} " + " / ".join(f"{t:.1f}" for t in ts))
            finally:
                ddtree.greedy_walk = greedy_walk
        print(f"R={R} B={B}: " + "  ".join(line), flush=True)


for section in (gather_threshold, node_counts, blocked_tiles, lookahead, stages_sweep):  # the longest last
    print(f"\n== {section.__name__}", flush=True)
    try:
        section()
    except Exception:  # noqa: BLE001 - the other sections still run
        traceback.print_exc()
