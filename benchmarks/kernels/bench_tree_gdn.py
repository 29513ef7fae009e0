"""Tree-GDN verify + commit per layer against SGLang 0.5.10.post1's own GDN verify kernel, same run.

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl
    PYTHONPATH=$PWD:/tmp/site python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl

Qwen3.6-27B at TP=2 per GPU: HV = 24 V-heads, H = 8 QK heads, K = V = 128, fp32 state pool,
bf16 q/k/v/a/b. R requests x N draft nodes; trees shaped as DDTree builds them (depth <= 15; `deep`: from
more peaked marginals), chains (DFlash; depth N - 1), or uniform random (parent of i uniform in [0, i)); the
kernel's level loop runs to the deepest node. Peer: `fused_sigmoid_gating_delta_rule_update` in EAGLE-tree
mode (one fp32 state per node cached, parents reloaded), loaded straight from the wheel's source file.
Each timed with benchmarks/timing.py: 10 calls in one CUDA graph, median replay / 10. Ours = verify
(`tree_gdn_verify`: the kernel `gather_tables` picks for a depth bound of 15, DDTree's with a 16-token drafter block,
or N - 1 for chains; the ancestor mask with rows padded to 16 bytes and the gather tables made once outside the
timed call, as the engine and the server make them once per step for every layer; both kernels also timed alone
where the gather one can run) + commit of a one-node path (its
cost barely moves with the path), the latter per layer of the one launch that commits all 48 GDN
layers of a step, as the engine does (a single-layer commit printed beside it).
Floor: the R fp32 states read (verify) and read + written (commit) plus q, k, v, o, u at 4.2 TB/s.
The first case timed in a process ran 4-5% fast on an H200 (benchmarks/RESULTS.md: the 16-node
chain's verify 6.41 against 6.69-6.71 us timed later), so each chain's verify is timed again after every case
(`verify_later`) and its total from that timing printed beside the first.
Chains also against the dedicated chain kernels of flash-linear-attention (the fla_core wheel above): its fused
recurrent and chunked gated delta rule over the same tokens, from the same states.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

import torch
import triton

from benchmarks.kernels.sglang_peers import gdn_tree_verify
from benchmarks.timing import failure, graph_us, print_kernel_times
from sglang_dflash.ddtree import build_ddtree
from sglang_dflash.kernels.tree_build import ancestors
from sglang_dflash.kernels.tree_gdn import (
    gather_tables,
    solve_step_nodes,
    stack_contexts,
    tree_gdn_verify,
    tree_gdn_verify_ref,
)
from sglang_dflash.kernels.tree_gdn.tree_gdn import aligned_ancestor_mask, tree_gdn_commit_triton, tree_gdn_verify_triton
from sglang_dflash.kernels.tree_gdn.tree_gdn_gather import ancestor_table, tree_gdn_verify_gather

HV, H, K, V = 24, 8, 128, 128
LAYERS = 48  # GDN layers of Qwen3.6-27B
DDTREE_DEPTH = 15  # the depth bound the engine and the server pass for trees: the drafter's block size (16) - 1


def tree_parents(R: int, N: int, kind: str, gen: torch.Generator, dev: str) -> torch.Tensor:
    """DDTree-shaped (top N - 1 prefixes of random peaked 15-depth marginals; `deep`: more peaked, as a confident
    drafter's, depth 8-11 at N = 64), a chain, or uniform random."""
    if kind in ("ddtree", "deep"):
        logits = torch.randn(R, 15, 64, generator=gen, device=dev) * (2.5 if kind == "ddtree" else 6.0)
        return build_ddtree(logits, torch.zeros(R, dtype=torch.long, device=dev), N - 1).parents
    if kind == "chain":
        return (torch.arange(N, device=dev) - 1).expand(R, N).contiguous()
    parents = torch.full((R, N), -1, device=dev, dtype=torch.long)
    for i in range(1, N):
        parents[:, i] = torch.randint(0, i, (R,), generator=gen, device=dev)
    return parents


def verify_inputs(R: int, N: int, kind: str, dev: str = "cuda", heads: tuple[int, int, int, int] = (HV, H, K, V)):
    """((q, k, v, a, b, A_log, dt_bias, pool, slots, parents), the ancestor mask with padded rows as the engine makes
    it once per step, the tree's depth): random bf16 inputs of R trees of N nodes (`tree_parents`), heads (HV, H, K, V),
    seeded by R and N."""
    hv, h, kd, vd = heads
    gen = torch.Generator(device=dev).manual_seed(R * 1000 + N)
    rnd = lambda *s: torch.randn(*s, generator=gen, device=dev)  # noqa: E731
    q, k = rnd(R, N, h, kd).bfloat16(), rnd(R, N, h, kd).bfloat16()
    v, a, b = rnd(R, N, hv, vd).bfloat16(), rnd(R, N, hv).bfloat16(), rnd(R, N, hv).bfloat16()
    A_log, dt_bias = torch.rand(hv, device=dev, generator=gen) * 2 - 3, rnd(hv)
    pool = rnd(R + 1, hv, vd, kd) * 0.1
    slots = torch.arange(R, device=dev, dtype=torch.int32)
    parents = tree_parents(R, N, kind, gen, dev)
    max_depth = int(ancestors(parents, N - 1).sum(-1).max()) - 1
    anc = aligned_ancestor_mask(ancestors(parents, max_depth))
    return (q, k, v, a, b, A_log, dt_bias, pool, slots, parents), anc, max_depth


def case(R: int, N: int, kind: str, sgl, dev: str = "cuda") -> tuple[dict, object]:
    """The row of one case, and its timed verify call (`measure` times a chain's again last)."""
    T = R * N
    inputs, anc, max_depth = verify_inputs(R, N, kind, dev)
    q, k, v, a, b, A_log, dt_bias, pool, slots, parents = inputs
    accepted = torch.full((R, 16), -1, device=dev, dtype=torch.long)
    accepted[:, 0] = 0

    bound = max_depth if kind == "chain" else max(max_depth, DDTREE_DEPTH)
    tables = gather_tables(anc, bound)
    row = {"R": R, "N": N, "kind": kind, "depth": max_depth, "kernel": "blocked" if tables is None else "gather"}
    verify = lambda: tree_gdn_verify(*inputs, tables=tables, ancestor_mask=anc, max_depth=bound)  # noqa: E731
    o, ctx = verify()
    ref, _ = tree_gdn_verify_ref(q, k, v, a, b, A_log, dt_bias, pool.double(), slots, parents, dtype=torch.float64)
    row["rel_err_vs_fp64"] = ((o.double() - ref).norm() / ref.norm()).item()
    row["ours_verify"] = graph_us(verify, reps=10)
    if tables is not None:  # once per step, for every layer
        row["tables_per_step"] = graph_us(lambda: gather_tables(anc, bound), reps=10)
    if bound <= DDTREE_DEPTH:  # both kernels alone, whichever gather_tables picks
        row["blocked_verify"] = graph_us(lambda: tree_gdn_verify_triton(*inputs, ancestor_mask=anc), reps=10)
        every = ancestor_table(anc, bound, solve_step_nodes(R, N))
        og, _ = tree_gdn_verify_gather(*inputs[:-1], every)
        row["gather_rel_err_vs_fp64"] = ((og.double() - ref).norm() / ref.norm()).item()
        row["gather_verify"] = graph_us(lambda: tree_gdn_verify_gather(*inputs[:-1], every), reps=10)
    pool_copy = pool.clone()
    row["ours_commit"] = graph_us(lambda: tree_gdn_commit_triton(pool_copy, slots, ctx, accepted), reps=10)
    # The engine commits all 48 GDN layers of a step in one launch: its time per layer.
    pools, ctxs = pool[None].repeat(LAYERS, 1, 1, 1, 1), stack_contexts([ctx] * LAYERS)
    row["ours_commit_batched"] = graph_us(lambda: tree_gdn_commit_triton(pools, slots, ctxs, accepted), reps=2) / LAYERS
    row["ours_total"] = row["ours_verify"] + row["ours_commit_batched"]
    # Floor: the R fp32 states read by the verify and read + written by the commit, plus q, k, v
    # read and o (bf16), u (fp32) written, at the 4.2 TB/s copy ceiling.
    state_bytes = R * HV * V * K * 4
    io_bytes = (q.numel() + k.numel() + v.numel() + v.numel()) * 2 + v.numel() * 4 * 2
    row["floor_us"] = (3 * state_bytes + io_bytes) / 4.2e12 * 1e6
    row["ours_TBps"] = (3 * state_bytes + io_bytes) / row["ours_total"] / 1e6

    inter = torch.empty(R + 1, N, HV, V, K, device=dev, dtype=torch.float32)
    cu = torch.arange(0, T + 1, N, device=dev, dtype=torch.int32)
    common = dict(
        A_log=A_log,
        a=a.view(T, HV),
        dt_bias=dt_bias,
        softplus_beta=1.0,
        softplus_threshold=20.0,
        q=q.view(1, T, H, K),
        k=k.view(1, T, H, K),
        v=v.view(1, T, HV, V),
        b=b.view(T, HV),
        initial_state_source=pool,
        initial_state_indices=slots,
        use_qk_l2norm_in_kernel=True,
        cu_seqlens=cu,
    )
    par32 = parents.clamp_min(0).to(torch.int32)
    row["sgl_tree"] = graph_us(
        lambda: sgl(
            **common,
            disable_state_update=True,
            intermediate_states_buffer=inter,
            intermediate_state_indices=slots,
            cache_steps=N,
            retrieve_parent_token=par32,
        ),
        reps=10,
    )
    row["extra_mem_MiB_ours"] = (ctx.u.numel() * 4 + ctx.G.numel() * 4) / 2**20 / R
    row["extra_mem_MiB_sgl"] = N * HV * V * K * 4 / 2**20
    if kind == "chain":
        row.update(chain_peers(q, k, v, a, b, A_log, dt_bias, pool, slots, o))
    return row, verify


def chain_peers(q, k, v, a, b, A_log, dt_bias, pool, slots, ours) -> dict:
    """A chain's dedicated kernels in the same run (issue 3: the chain must be as fast as one): flash-linear-attention's
    fused recurrent and chunked gated delta rule over the N tokens, from the pooled states (gathered before the timed
    call), gates and L2 norms in the kernel, no state written; each with its relative difference to our outputs (a
    check that it computes the same thing). A kernel that fails to run is reported, not fatal."""
    out = {}
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
    except ImportError as e:
        return {"fla_error": f"{type(e).__name__}: {e}"}
    init = pool[slots.long()].contiguous()  # [R, HV, V, K]: the pool's V-first layout
    common = dict(initial_state=init, output_final_state=False, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                  A_log=A_log, dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True, state_v_first=True)  # fmt: skip
    for name, fn in (("fla_recurrent", fused_recurrent_gated_delta_rule), ("fla_chunk", chunk_gated_delta_rule)):
        try:
            o = fn(q, k, v, g=a, beta=b, **common)[0]
            out[f"{name}_rel_diff"] = ((o.float() - ours.float()).norm() / ours.float().norm()).item()
            out[name] = graph_us(lambda fn=fn: fn(q, k, v, g=a, beta=b, **common), reps=10)
        except Exception as e:  # noqa: BLE001 - a peer that does not run here is a result too
            out[f"{name}_error"] = failure(e, 200)
    return out


def sweep(dev: str = "cuda") -> None:
    """fp32-input accuracy by dot precision at R = 1, N = 64 (DDTree-shaped); verify time of N = 64 (DDTree-shaped) and
    N = 16 (a chain) by warps and V tile, and of N = 65 and 128 (two blocks) by warps."""
    gen = torch.Generator(device=dev).manual_seed(5)
    q, k = (torch.randn(1, 64, H, K, generator=gen, device=dev).bfloat16() for _ in range(2))
    v = torch.randn(1, 64, HV, V, generator=gen, device=dev).bfloat16()
    a, b = (torch.randn(1, 64, HV, generator=gen, device=dev).bfloat16() for _ in range(2))
    A_log, dt_bias = torch.rand(HV, device=dev) * 2 - 3, torch.randn(HV, device=dev)
    pool = torch.randn(2, HV, V, K, device=dev) * 0.1
    slots = torch.zeros(1, device=dev, dtype=torch.int32)
    parents = tree_parents(1, 64, "ddtree", gen, dev)
    depth = int(ancestors(parents, 63).sum(-1).max()) - 1
    anc = aligned_ancestor_mask(ancestors(parents, depth))
    inputs = (q, k, v, a, b, A_log, dt_bias, pool, slots, parents)
    x32 = [t.float() if t.dtype == torch.bfloat16 else t for t in inputs]
    ref, _ = tree_gdn_verify_ref(*x32[:7], pool.double(), slots, parents, dtype=torch.float64)
    step = lambda: tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth)  # noqa: E731
    print_kernel_times(step, reps=20, top=6, title="per-kernel CUDA time of one verify at N = 64 (us):")
    for precision in ("ieee", "tf32x3", "tf32"):
        o, _ = tree_gdn_verify_triton(*x32, ancestor_mask=anc, max_depth=depth, precision=precision)
        print(
            f"fp32 inputs, precision={precision}: relative error vs float64 {((o.double() - ref).norm() / ref.norm()).item():.2e}"
        )
    chain = (torch.arange(16, device=dev) - 1)[None]
    chain_inputs = tuple(t[:, :16].contiguous() if t.dim() > 1 and t.shape[1] == 64 else t for t in inputs[:9]) + (chain,)
    for name, args, anc_, depth_ in (
        ("N=64 DDTree", inputs, anc, depth),
        ("N=16 chain", chain_inputs, aligned_ancestor_mask(ancestors(chain, 15)), 15),
    ):
        for warps, BV in ((4, 32), (8, 32), (4, 16), (8, 16), (8, 64)):
            run = lambda: tree_gdn_verify_triton(*args, ancestor_mask=anc_, max_depth=depth_, BV=BV, num_warps=warps)  # noqa: E731
            print(f"sweep {name} depth {depth_}: warps={warps} BV={BV:3d}: {graph_us(run, reps=10):8.1f} us", flush=True)
    for N in (65, 128):  # past one block, ptxas spills 1.1 KB per thread at 4 warps, 0.2 KB at 8 (ptxas_tree_gdn.py)
        q, k = (torch.randn(1, N, H, K, generator=gen, device=dev).bfloat16() for _ in range(2))
        v = torch.randn(1, N, HV, V, generator=gen, device=dev).bfloat16()
        a, b = (torch.randn(1, N, HV, generator=gen, device=dev).bfloat16() for _ in range(2))
        parents = tree_parents(1, N, "ddtree", gen, dev)
        depth = int(ancestors(parents, N - 1).sum(-1).max()) - 1
        mask = aligned_ancestor_mask(ancestors(parents, depth))
        for warps in (4, 8):
            run = lambda: tree_gdn_verify_triton(  # noqa: E731
                q, k, v, a, b, A_log, dt_bias, pool, slots, parents, ancestor_mask=mask, max_depth=depth, num_warps=warps
            )
            print(f"sweep N={N} DDTree depth {depth}, padded mask: warps={warps}: {graph_us(run, reps=10):8.1f} us", flush=True)


CASES = [
    (1, 16, "chain"),
    (1, 16, "ddtree"),
    (1, 33, "ddtree"),
    (1, 63, "ddtree"),
    (1, 64, "ddtree"),
    (1, 64, "deep"),
    (1, 65, "ddtree"),  # DDTREE 64 inside SGLang: one node past the fused block, the blocked path
    (1, 64, "random"),
    (1, 64, "chain"),
    (1, 128, "ddtree"),
    (1, 129, "ddtree"),  # DDTREE 128
    (1, 256, "ddtree"),
    (1, 257, "ddtree"),  # DDTREE 256
    (2, 65, "ddtree"),
    (8, 16, "ddtree"),
    (4, 64, "ddtree"),
    (4, 65, "ddtree"),
    (8, 64, "ddtree"),
    (8, 64, "deep"),
    (8, 129, "ddtree"),  # the gather kernel's first launch by groups of V-heads (heads_per_program)
    (8, 16, "chain"),
]


def measure(sgl, rows: list[dict]) -> None:
    """Each of CASES into rows (one JSON line printed as each ends), then each chain's verify timed again."""
    chains = []
    for R, N, kind in CASES:
        row, verify = case(R, N, kind, sgl)
        rows.append(row)
        if kind == "chain":
            chains.append((row, verify))
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    for row, verify in chains:
        row["verify_later"] = graph_us(verify, reps=10)
        row["total_later"] = row["verify_later"] + row["ours_commit_batched"]


def report(rows: list[dict]) -> None:
    """rows to $OUT/tree_gdn_bench.json (if OUT is set) and the tables."""
    if os.environ.get("OUT"):
        json.dump(rows, open(os.path.join(os.environ["OUT"], "tree_gdn_bench.json"), "w"), indent=1)
    print(
        "\n R    N kind   depth kernel  | ours verify commit (x48 batched) total | floor TB/s | sglang tree | rel err"
        " | extra MiB/req ours, sglang  [us/layer]"
    )
    for r in rows:
        ours = f"{r['ours_verify']:11.1f} {r['ours_commit']:6.1f} ({r['ours_commit_batched']:5.2f}) {r['ours_total']:5.1f}"
        mem = f"{r['extra_mem_MiB_ours']:.2f}, {r['extra_mem_MiB_sgl']:.1f}"
        shape = f"{r['R']:2d} {r['N']:4d} {r['kind']:6s} {r['depth']:5d} {r['kernel']:7s}"
        bw = f"{r['floor_us']:5.1f} {r['ours_TBps']:4.2f}"
        print(f"{shape} | {ours} | {bw} | {r['sgl_tree']:11.1f} | {r['rel_err_vs_fp64']:.1e} | {mem}")
    print(f"\nthe two verify kernels alone (depth bound {DDTREE_DEPTH}), verify only, us; ours: gather_tables' pick:")
    for r in (r for r in rows if "gather_verify" in r):
        tables = f", its tables {r['tables_per_step']:.1f} per step" if "tables_per_step" in r else ""
        print(f"R={r['R']} N={r['N']} {r['kind']} depth {r['depth']}: gather {r['gather_verify']:.1f} "
              f"(rel err {r['gather_rel_err_vs_fp64']:.1e}) | blocked {r['blocked_verify']:.1f} "
              f"| ours: {r['kernel']}{tables}")  # fmt: skip
    print("\nchains against dedicated chain kernels (verify only, us; relative difference to ours):")
    for r in (r for r in rows if r["kind"] == "chain"):
        peers = "  ".join(
            f"{n} {r[n]:.1f} ({r[n + '_rel_diff']:.0e})" if n in r else f"{n}: {r.get(n + '_error', r.get('fla_error'))}"
            for n in ("fla_recurrent", "fla_chunk")
        )
        later = f" (timed again last: {r['verify_later']:.1f}, total {r['total_later']:.1f})" if "verify_later" in r else ""
        print(f"R={r['R']} N={r['N']}: ours {r['ours_verify']:.1f}{later}  {peers}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", nargs="?", help="SGLang 0.5.10.post1's wheel: its GDN verify kernel is the peer")
    parser.add_argument("--sweep", action="store_true", help="trees past one block at 4 and 8 warps instead (no peer)")
    args = parser.parse_args()
    if args.sweep:
        sweep()
        return
    if not args.wheel:
        parser.error("the SGLang wheel is needed for the peer (or --sweep)")
    sgl = gdn_tree_verify(args.wheel)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    # a run stopped by `timeout` (SIGTERM) still writes what it measured and its tables
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rows = []
    try:
        measure(sgl, rows)
    finally:
        report(rows)


if __name__ == "__main__":
    main()
