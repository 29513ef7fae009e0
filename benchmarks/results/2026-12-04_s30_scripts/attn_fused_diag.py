"""Session 30 call 3: where the fused merge (call 2: 1.5-4.5 us slower than a second launch) loses its time.
Variants of the working tree's kernel file, written next to it as modules and imported:
  fused      as it is (barrier spun on atomic adds, then each program merges MR rows);
  bar_only   the barrier, no merge (output not written: timing only);
  ldspin     the barrier spun on volatile loads, one acquire add after;
  ld_only    that barrier, no merge;
  separate   FUSED forced off (the second launch).
Graph-timed, alternated three times, medians. PYTHONPATH=$PWD python3 attn_fused_diag.py"""

import importlib
import pathlib

import torch

import benchmarks.kernels.bench_tree_attention as bta
from benchmarks.timing import alternating_us, graph_us

DIR = pathlib.Path("sglang_dflash/kernels/tree_attention")
SRC = (DIR / "tree_attention.py").read_text()
LDSPIN = """
@triton.jit
def _ld_barrier(counter, P, rnd, origin):
    tl.debug_barrier()
    ticket = tl.atomic_add(counter, 1, sem="release")
    origin = ticket - ticket % P
    seen = ticket + 1
    while seen - origin < P:
        seen = tl.load(counter, volatile=True)
    tl.atomic_add(counter, 0, sem="acquire")
    tl.debug_barrier()
    return origin

"""
EDITS = {
    "fused": [],
    "bar_only": [("        if split * MR < BM:", "        if split * MR < 0:")],
    "ldspin": [
        ("gpu.group_barrier(counters", "_ld_barrier(counters"),
        ("@triton.jit\ndef _split_weight", LDSPIN + "@triton.jit\ndef _split_weight"),
    ],
    "ld_only": [
        ("gpu.group_barrier(counters", "_ld_barrier(counters"),
        ("@triton.jit\ndef _split_weight", LDSPIN + "@triton.jit\ndef _split_weight"),
        ("        if split * MR < BM:", "        if split * MR < 0:"),
    ],
    "separate": [("    fused = not gpu.INTERPRET and", "    fused = False and")],
}
fns = {}
for name, edits in EDITS.items():
    text = SRC
    for a, b in edits:
        assert a in text, (name, a)
        text = text.replace(a, b)
    (DIR / f"_v_{name}.py").write_text(text)
    fns[name] = importlib.import_module(f"sglang_dflash.kernels.tree_attention._v_{name}").tree_attention


def inputs(heads, R, N, prefix):
    return bta.attention_inputs_at(heads, R, N, prefix)[0]


try:
    a = inputs((12, 2, 256), 1, 64, 4096)
    graph_us(lambda: fns["fused"](*a), reps=10)  # discarded: first timing in a process
    ref = fns["separate"](*a)
    for name in ("fused", "ldspin"):
        print(name, "equal to separate:", torch.equal(fns[name](*a), ref), flush=True)
    print("us: " + " / ".join(fns))
    for heads, R, N, prefix in (((12, 2, 256), 1, 64, 4096), ((12, 2, 256), 1, 64, 600), ((12, 2, 256), 1, 65, 4096),
                                ((12, 2, 256), 8, 64, 150), ((16, 4, 128), 1, 16, 4096)):  # fmt: skip
        a = inputs(heads, R, N, prefix)
        t = alternating_us({name: (lambda f=f: f(*a)) for name, f in fns.items()})
        print(f"| {heads} | {R} x {N} | {prefix} | " + " | ".join(f"{v:.2f}" for v in t.values()) + " |", flush=True)
finally:
    for name in EDITS:
        (DIR / f"_v_{name}.py").unlink()
