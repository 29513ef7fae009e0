"""Every Triton kernel builds for SM86 (RTX A6000: no wgmma/TMA, 99 KB of shared memory per block),
ahead of time on a machine without a GPU, at the launch configurations our wrappers pick for the
production shapes (Qwen3.6-27B at TP=2, DDTree budgets 16/64/256 over L = 15 draft depths,
DFLASH's 16-node chain, and the Qwen3.6 drafter's block attention with and without its window),
as the wrappers choose them on a device with SM86's shared memory
(`kernels.device.shared_memory_per_block` patched: tree GDN in 16-node blocks, tree attention in
32-row tiles without pipelining there).

The wrappers run on CPU tensors with Triton's launch intercepted, so each kernel is built with the
arguments, constexprs and num_warps its wrapper chose; the package is imported afresh for that with
Triton's interpreter off, as on a GPU. The builds run in a child process: conftest.py turns the
interpreter on when there is no GPU, which also makes Triton's own library functions (tl.sum,
tl.topk, ...) interpreted ones that cannot be compiled. Triton's own ptxas runs at --opt-level 0:
it still assembles every instruction for sm_86, faster, and the shared memory is Triton's
allocation, fixed before ptxas runs. Register spills are ptxas's at its default -O3 for sm_86, on
the same PTX (`ptxas -v`): none, but where SPILL_ALLOWANCE says why.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from unittest import mock

import pytest
import torch
import triton
from launch_specs import fresh_package_without_interpreter, intercepted_launches, kernel_spec
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

SM86 = GPUTarget("cuda", 86, 32)
SM90 = GPUTarget("cuda", 90, 32)
SM86_SHARED_BYTES = 101376  # 99 KB per block (cudaDevAttrMaxSharedMemoryPerBlockOptin)
SM90_ONLY_PTX = ("wgmma", "cp.async.bulk", "setmaxnreg", "stmatrix", "griddepcontrol")
VOCAB, DEPTHS, BUDGETS = 248320, 15, (16, 64, 256)
NODES = (16,) + tuple(b + 1 for b in BUDGETS)  # a DFLASH chain, then DDTree trees
HV, H, K = 24, 8, 128  # GDN: V heads, QK heads, head dim (= V head dim)
HQ, HKV, DH, PREFIX = 12, 2, 256, 4096  # full attention: query heads, KV heads, head dim, cached tokens
CONV_D, CONV_W = 10240 // 2, 4
DRAFT_HQ, DRAFT_HKV, DRAFT_DH, DRAFT_WINDOW = 16, 4, 128, 2048  # Qwen3.6-27B-DFlash per GPU at TP=2, block 16
# Spill stores (bytes a thread, ptxas -O3, sm_86) allowed by build: the tree GDN verify's coefficient kernel at its
# occupancy register cap (`tree_gdn.register_cap`, 168: one more program an SM, faster on an H200 than uncapped without
# spills) and the drafter's row top-k over 8,192-entry tiles (`draft_topk.TILE`) at budget 64.
SPILL_ALLOWANCE = {"coeffs-N16": 8, "coeffs-N17": 8, "row_topk-B64": 8}


def production_calls(kernels):
    """(label, wrapper call) for every production shape; the heaviest builds come last (built first)."""
    e, bf16, long = torch.empty, torch.bfloat16, torch.long
    slots, accepted = e(1, dtype=long), e(1, DEPTHS + 1, dtype=long)
    gdn, conv, vocab = kernels.tree_gdn.tree_gdn, kernels.tree_conv.tree_conv, kernels.vocab

    def walk(N):
        kernels.tree_walk.tree_walk(*(e(1, N, dtype=long) for _ in range(4)), DEPTHS)

    def greedy_walk(R, N):  # accept_greedy: the argmax of the accepted path's rows, then the walk
        kernels.tree_walk.greedy_walk(e(R, N, dtype=long), e(R, N, dtype=long), e(R, N, VOCAB, dtype=bf16), DEPTHS)

    def conv_step(N):
        x, state = e(1, N, CONV_D, dtype=bf16), e(2, CONV_D, CONV_W - 1, dtype=bf16)
        chain = (torch.arange(N) - 1)[None]  # real parents: the wrapper builds the window table from them
        conv.tree_causal_conv1d_triton(x, state, e(CONV_D, CONV_W, dtype=bf16), None, slots, chain)
        conv.tree_conv_commit_triton(state, slots, x, accepted)
        layers = kernels.layer_table.LayerTable.of([x] * 48)  # the server's commit of every GDN layer, by address
        conv.tree_conv_commit_triton(e(48, 2, CONV_D, CONV_W - 1, dtype=bf16), slots, layers, accepted)

    def attention(N):
        q, kv_cache, kv_tree = e(1, N, HQ, DH, dtype=bf16), e(1, PREFIX, HKV, DH, dtype=bf16), e(1, N, HKV, DH, dtype=bf16)
        lens, anc = e(1, dtype=long), e(1, N, N, dtype=torch.bool)  # int64 lengths, as SGLang's seq_lens
        kernels.tree_attention.tree_attention(q, kv_cache, kv_cache, lens, kv_tree, kv_tree, anc)

    def drafter_attention(window):
        """The drafter's block of 16 over its context K/V token pool, read through slots and a page table (SGLang's
        int32 req_to_token; sliding-window layers)."""
        q, kv_pool = e(1, 16, DRAFT_HQ, DRAFT_DH, dtype=bf16), e(2 * PREFIX + 1, DRAFT_HKV, DRAFT_DH, dtype=bf16)
        kv_block, mask, lens = e(1, 16, DRAFT_HKV, DRAFT_DH, dtype=bf16), e(1, 16, 16, dtype=torch.bool), e(1, dtype=long)
        table = e(2, PREFIX, dtype=torch.int32)
        kernels.tree_attention.tree_attention(q, kv_pool, kv_pool, lens, kv_block, kv_block, mask, slots=slots,
                                              window=window, positions=e(1, 16, dtype=long), table=table)  # fmt: skip

    def gdn_step(N, R=1):  # R = 8 x 16 nodes: the verify capped at 168 registers (`register_cap`)
        q, v, g = e(R, N, H, K, dtype=bf16), e(R, N, HV, K, dtype=bf16), e(R, N, HV, dtype=bf16)
        anc = gdn.aligned_ancestor_mask(e(R, N, N, dtype=torch.bool))  # as the engine and the server pass it
        slots = e(R, dtype=long)
        _, ctx = gdn.tree_gdn_verify_triton(
            q, q, v, g, g, e(HV), e(HV), e(R + 1, HV, K, K), slots, e(R, N, dtype=long), ancestor_mask=anc, max_depth=DEPTHS
        )
        gdn.tree_gdn_commit_triton(e(R + 1, HV, K, K), slots, ctx, e(R, DEPTHS + 1, dtype=long))
        gdn.tree_gdn_commit_triton(e(48, R + 1, HV, K, K), slots, gdn.context_tables([ctx] * 48), e(R, DEPTHS + 1, dtype=long))

    def gdn_gather(N, R=1):  # the ancestor-gather verify over DDTree's 15 depths, and its tables (steps as the server's)
        q, v, g = e(R, N, H, K, dtype=bf16), e(R, N, HV, K, dtype=bf16), e(R, N, HV, dtype=bf16)
        gather = kernels.tree_gdn.tree_gdn_gather
        tables = gather.ancestor_table(e(R, N, N, dtype=torch.bool), DEPTHS, kernels.tree_gdn.solve_step_nodes(R, N))
        gather.tree_gdn_verify_gather(q, q, v, g, g, e(HV), e(HV), e(R + 1, HV, K, K), e(R, dtype=long), tables)

    def commit(N):  # a spec-v2 step's commit over SGLang's int32 req_to_token
        table = e(2, PREFIX, dtype=torch.int32)
        kernels.accept_commit.commit_accepted_kernel(table, slots, slots, e(1, N, dtype=long), accepted, slots, slots)

    def custom_mask(N):  # the tree verify's mask for SGLang's backends
        kernels.tree_attention.sglang_custom_mask_kernel(e(1, N, N, dtype=torch.bool), torch.tensor([PREFIX]), PREFIX)

    def build_tree(B):
        kernels.tree_build.tree_build(e(1, DEPTHS, B), e(1, DEPTHS, B, dtype=long), e(1, dtype=long), B)

    def build_conditional_tree(B, K):  # DFlash2's selector (16 candidates) and DSpark's Markov head (K = B)
        first, step = e(1, K), e(1, DEPTHS - 1, K, K)
        kernels.tree_build.conditional_tree_build(first, step, e(1, DEPTHS, K, dtype=long), e(1, dtype=long), B)

    calls = [(f"N{N}", partial(f, N)) for f in (walk, conv_step) for N in NODES]
    calls += [("N65", lambda: vocab.argmax(e(1, 65, VOCAB, dtype=bf16)))]
    calls += [(f"N{N}", partial(greedy_walk, 1, N)) for N in NODES] + [("R8-N65", partial(greedy_walk, 8, 65))]
    calls += [(f"B{B}", lambda B=B: vocab.draft_log_probs(e(1, DEPTHS, VOCAB, dtype=bf16), B)) for B in BUDGETS]
    calls += [(f"N{N}", partial(f, N)) for f in (attention, gdn_step, gdn_gather, custom_mask, commit) for N in NODES]
    calls += [("R8-N129", partial(gdn_gather, 129, 8))]  # the first launch by groups of V-heads
    calls += [("R8-N16", partial(gdn_step, 16, 8))]  # DFLASH's chains at batch 8: the verify's register cap
    calls += [("draft-window", partial(drafter_attention, DRAFT_WINDOW)), ("draft-full", partial(drafter_attention, None))]
    calls += [(f"B{B}-K{K}", partial(build_conditional_tree, B, K)) for B in (16, 64) for K in sorted({16, B})]
    return calls + [(f"B{B}", partial(build_tree, B)) for B in BUDGETS]


def record_launches(pdl: bool = False):
    """{test id: (kernel, spec)} for every distinct build; ids are kernel-shape[-2 for a second build]. pdl: as on a
    GPU where `device.pdl` holds (SM90), not on an A6000."""
    with (
        fresh_package_without_interpreter() as kernels,
        intercepted_launches() as seen,
        mock.patch.object(kernels.device, "shared_memory_per_block", lambda device: SM86_SHARED_BYTES),
        mock.patch.object(kernels.device, "pdl", lambda device: pdl),
    ):  # the wrappers choose as on an A6000
        for name in ("accept_commit", "tree_build", "tree_walk", "vocab", "layer_table", "tree_gdn.tree_gdn_gather"):
            importlib.import_module(f"sglang_dflash.kernels.{name}")
        for label, call in production_calls(kernels):
            start = len(seen)
            call()
            seen[start:] = [(label, *launch) for launch in seen[start:]]
    launches = {}
    for label, kernel, args, kwargs in seen:
        spec = kernel_spec(kernel, args, kwargs)
        if any(k is kernel and s == spec for k, s in launches.values()):
            continue  # the same build as a smaller shape's
        base = f"{kernel.__name__.strip('_').removesuffix('_kernel')}-{label}"
        launches[next(t for t in (base, *(f"{base}-{i}" for i in range(2, 100))) if t not in launches)] = (kernel, spec)
    return launches


LAUNCHES = record_launches()
# The kernels launched with programmatic dependent launch where it is on (one build each, for sm_90).
PDL_LAUNCHES = {}
for _id, (_kernel, _spec) in record_launches(pdl=True).items():
    if _spec["options"].get("launch_pdl") and not any(k is _kernel for k, _ in PDL_LAUNCHES.values()):
        PDL_LAUNCHES[_id] = (_kernel, _spec)


def build(test_id):
    pdl = test_id.startswith("pdl:")
    kernel, spec = PDL_LAUNCHES[test_id[4:]] if pdl else LAUNCHES[test_id]
    source = ASTSource(kernel, spec["signature"], spec["constexprs"], spec["attrs"])
    try:
        compiled = triton.compile(
            source, target=SM90 if pdl else SM86, options=spec["options"] | {"ptx_options": "--opt-level 0"}
        )
    except Exception as e:  # reported by the test of this id
        return test_id, dict(error=f"{type(e).__name__}: {e}")
    ptx = compiled.asm["ptx"]
    if pdl:
        return test_id, dict(
            launch_pdl=compiled.metadata.launch_pdl,
            ops=[op for op in ("griddepcontrol.wait", "griddepcontrol.launch_dependents") if op in ptx],
        )
    return test_id, dict(
        spill_stores=spill_stores(ptx),
        shared=compiled.metadata.shared,
        ptx_target=next(line.split()[1] for line in ptx.splitlines() if line.startswith(".target")),
        cubin_sm=compiled.asm["cubin"][48],  # the low byte of the ELF header's e_flags: the SM it runs on
        sm90_only=[op for op in SM90_ONLY_PTX if op in ptx],
    )


def spill_stores(ptx: str) -> int:
    """Bytes a thread that ptxas at its default optimisation (-O3) spills assembling `ptx` (one kernel) for sm_86."""
    from triton.backends.nvidia.compiler import get_ptxas

    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(ptx)
        run = subprocess.run([get_ptxas(86).path, "-v", "-arch=sm_86", str(source), "-o", str(source.with_suffix(".cubin"))],
                             capture_output=True, text=True, check=True)  # fmt: skip
    (stores,) = re.findall(r"(\d+) bytes spill stores", run.stdout + run.stderr)
    return int(stores)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Builds everything in one child process, without the interpreter (see the module docstring)."""
    out = tmp_path_factory.mktemp("sm86") / "builds.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])  # launch_specs
    child = subprocess.run([sys.executable, __file__, str(out)], env=env, capture_output=True, text=True, timeout=900)
    assert child.returncode == 0, child.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("test_id", LAUNCHES)
def test_builds_for_sm86(builds, test_id):
    result = builds[test_id]
    assert "error" not in result, result.get("error")
    assert (result["ptx_target"], result["cubin_sm"]) == ("sm_86", 86)
    assert result["sm90_only"] == [], f"sm_90-only PTX instructions: {result['sm90_only']}"
    shared = result["shared"]
    assert shared <= SM86_SHARED_BYTES, f"needs {shared} bytes of shared memory, SM86 has {SM86_SHARED_BYTES} per block"
    allowed = SPILL_ALLOWANCE.get(test_id, 0)
    assert result["spill_stores"] <= allowed, f"spills {result['spill_stores']} bytes a thread at -O3, {allowed} allowed"


def test_spill_allowance_names_builds():
    assert set(SPILL_ALLOWANCE) <= set(LAUNCHES)


def test_pdl_only_where_supported(monkeypatch):
    """Programmatic dependent launch: on SM90+ CUDA devices unless SGLANG_DFLASH_PDL=0 turned it off; never on an
    A6000 (SM86: no griddepcontrol), on CPU tensors or under the interpreter."""
    from sglang_dflash.kernels import device as gpu

    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(gpu, "INTERPRET", False)
    monkeypatch.setattr(gpu, "PDL", True)
    for capability, expected in (((9, 0), True), ((10, 0), True), ((8, 6), False)):
        monkeypatch.setattr(gpu, "_cuda_capability", lambda index, c=capability: c)
        assert gpu.pdl(cuda) is expected, capability
    assert gpu.pdl(torch.device("cpu")) is False
    monkeypatch.setattr(gpu, "PDL", False)
    assert gpu.pdl(cuda) is False
    monkeypatch.setattr(gpu, "PDL", True)
    monkeypatch.setattr(gpu, "INTERPRET", True)
    assert gpu.pdl(cuda) is False


def test_pdl_launches_wait_at_start(builds):
    """Where PDL is on, the build + accept kernels launch with it (`launch_pdl`), each with its PDL constexpr set, so
    that it waits for the previous kernel before touching memory (`device.pdl_start`): its sm_90 build holds the
    wait, and lets the next kernel in."""
    assert {k.__name__ for k, _ in PDL_LAUNCHES.values()} >= {
        "_chunk_stats_kernel", "_row_topk_kernel", "_tree_build_kernel", "_walk_kernel", "_tree_walk_kernel",
        "_chunk_argmax_kernel", "_row_argmax_kernel",
    }  # fmt: skip
    for test_id, (kernel, spec) in PDL_LAUNCHES.items():
        assert spec["constexprs"].get("PDL") is True, f"{kernel.__name__} launches with PDL but its PDL constexpr is off"
        result = builds["pdl:" + test_id]
        assert "error" not in result, result.get("error")
        assert result["launch_pdl"] is True
        assert result["ops"] == ["griddepcontrol.wait", "griddepcontrol.launch_dependents"], (kernel.__name__, result)
    for test_id, (kernel, spec) in LAUNCHES.items():  # as on an A6000: no PDL anywhere
        assert not spec["options"].get("launch_pdl") and not spec["constexprs"].get("PDL"), test_id


if __name__ == "__main__":  # the child process of `builds`
    assert not triton.knobs.runtime.interpret
    with ProcessPoolExecutor(min(8, os.cpu_count() or 1)) as pool:  # at most 8 builds at once, for memory
        results = dict(pool.map(build, [*reversed(LAUNCHES), *("pdl:" + t for t in PDL_LAUNCHES)]))
    with open(sys.argv[1], "w") as f:
        json.dump(results, f, indent=1)
