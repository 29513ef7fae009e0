"""Registers and spills of the tree-GDN verify builds, from ptxas -v, on a machine without a GPU.

    python benchmarks/kernels/ptxas_tree_gdn.py [--sm 90|86] [--nodes 33,64,65,128]

For each tree size, the kernel as `tree_gdn_verify_triton` launches it on an H200 (sm_90a, blocks of 64 nodes) or
an A6000 (sm_86, blocks of 16), at Qwen3.6-27B's TP=2 shapes, with the ancestor mask's rows N bytes apart and
padded to 16 (`aligned_ancestor_mask`): Triton specialises on whether those strides are multiples of 16.
Compiled with Triton's own ptxas (tests/kernels/test_sm86_compile.py's launch recording); prints one line per build.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from launch_specs import intercepted_launches, kernel_spec  # noqa: E402 (the tests' launch recording)

from sglang_dflash.kernels import device as gpu  # noqa: E402
from sglang_dflash.kernels.tree_gdn import tree_gdn as tg  # noqa: E402

HV, H, K = 24, 8, 128


@contextlib.contextmanager
def recorded_launches(sm: int):
    """A list that collects (kernel, args, kwargs) of every Triton launch inside the block, instead of launching;
    the wrappers choose their configurations as on an H200 (sm 90) or an A6000 (sm 86)."""
    smem = mock.patch.object(gpu, "shared_memory_per_block", lambda device: (227 if sm == 90 else 99) * 1024)
    with intercepted_launches() as seen, smem:
        yield seen


def launches(sm: int, nodes: list[int], requests: int = 1, **config):
    """(label, kernel, args, kwargs) of the verify launches of `requests` trees, as the wrapper makes them on that
    GPU: for each tree size, with the mask's rows N bytes apart, then padded (`aligned_ancestor_mask`)."""
    e, bf16, R = torch.empty, torch.bfloat16, requests
    with recorded_launches(sm) as seen:
        for N in nodes:
            for padded in (False, True):
                q, v, g = e(R, N, H, K, dtype=bf16), e(R, N, HV, K, dtype=bf16), e(R, N, HV, dtype=bf16)
                mask = torch.zeros(R, N, N, dtype=torch.bool)
                mask = tg.aligned_ancestor_mask(mask) if padded else mask
                slots, parents = e(R, dtype=torch.long), e(R, N, dtype=torch.long)
                tg.tree_gdn_verify_triton(
                    q, q, v, g, g, e(HV), e(HV), e(R + 1, HV, K, K), slots, parents, ancestor_mask=mask, **config
                )
                seen[-1] = (f"N={N} mask rows {'padded' if padded else N}",) + seen[-1]
    return seen


def build(kernel, args: tuple, kwargs: dict, sm: int, sass: bool = False) -> tuple[object, list[str], str]:
    """(Triton's compiled kernel, ptxas -v's lines, the SASS if asked: cuobjdump of the cubin) of one recorded launch,
    built for sm_90a or sm_86 with the ptxas, cuobjdump shipped in Triton's wheel."""
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    spec = kernel_spec(kernel, args, kwargs)
    built = triton.compile(ASTSource(kernel, spec["signature"], spec["constexprs"], spec["attrs"]),
                           target=GPUTarget("cuda", sm, 64 if sm == 90 else 32), options=spec["options"])  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        path.write_text(built.asm["ptx"])
        arch = "sm_90a" if sm == 90 else "sm_86"
        out = subprocess.run([f"{tools}/ptxas", "-v", "--gpu-name", arch, str(path), "-o", str(cubin)],
                             capture_output=True, text=True)  # fmt: skip
        text = subprocess.run([f"{tools}/cuobjdump", "-sass", str(cubin)], capture_output=True, text=True).stdout if sass else ""
    return built, out.stderr.splitlines(), text


def ptxas_report(kernel, args: tuple, kwargs: dict, sm: int) -> tuple[int, str, str]:
    """(shared bytes, ptxas's register / spill lines, its performance warnings) of one recorded launch, built for
    sm_90a or sm_86 with Triton's own ptxas."""
    built, lines, _ = build(kernel, args, kwargs, sm)
    info = "; ".join(line.split(":", 1)[-1].strip() for line in lines if "registers" in line or "spill" in line)
    warnings = "; ".join(line.split(":", 1)[-1].strip() for line in lines if "Performance Loss" in line)
    return built.metadata.shared, info, warnings


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sm", type=int, choices=(86, 90), default=90)
    p.add_argument("--nodes", type=lambda s: [int(x) for x in s.split(",")], default=[33, 64, 65, 128])
    p.add_argument("--warps", type=int, default=None, help="num_warps (default: the wrapper's)")
    p.add_argument("--bv", type=int, default=32, help="V columns per program (default 32)")
    args = p.parse_args()
    for label, kernel, a, kw in launches(args.sm, args.nodes, num_warps=args.warps, BV=args.bv):
        shared, info, _ = ptxas_report(kernel, a, kw, args.sm)
        print(f"sm_{args.sm} {kw['num_warps']} warps BV={args.bv} {label}: shared {shared} B; {info}", flush=True)


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET") == "1":
        raise SystemExit("run without TRITON_INTERPRET: the kernels must be compiled, not interpreted")
    main()
