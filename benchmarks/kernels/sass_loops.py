"""SASS instruction counts of the hot kernels, per loop, on a machine without a GPU.

    python benchmarks/kernels/sass_loops.py attention|gdn [--sm 90|86] [--nodes 64] [--requests 1] [--dump FILE]

The kernel as its wrapper launches it on an H200 (sm_90a) or an A6000 (sm_86), at Qwen3.6-27B's TP=2 shapes (the
attention over a 4096-token prefix; the GDN verify with the ancestor mask's rows padded, as the engine passes it),
compiled with the ptxas of Triton's wheel and disassembled with its cuobjdump. Prints ptxas's register and spill
line, the instruction count, and each loop (a backward branch) with its size and most frequent opcodes. Where a
kernel is throughput-bound its time follows these counts (benchmarks/RESULTS.md: the attention's key
loop 964 -> 764 instructions, R = 8 x 64 133 -> 111 us; the GDN verify's level step 302 -> 133); where it is
latency-bound they do not.
"""

from __future__ import annotations

import argparse
import collections
import os
import re

from ptxas_tree_attention import launch as attention_launch
from ptxas_tree_gdn import build, launches


def instructions(sass: str) -> list[tuple[int, str]]:
    """(address, instruction) of cuobjdump's listing."""
    return [(int(m[1], 16), m[2]) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]


def loops(listing: list[tuple[int, str]]) -> list[tuple[int, int, list[str]]]:
    """(first, last address, body) of each loop: the instructions from a backward branch's target to the branch."""
    found = []
    for address, text in listing:
        m = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)\s*)?(0x[0-9a-f]+)", text)
        if m and int(m[1], 16) < address:
            first = int(m[1], 16)
            found.append((first, address, [t for a, t in listing if first <= a <= address]))
    return found


def opcode(text: str) -> str:
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kernel", choices=("attention", "gdn"))
    p.add_argument("--sm", type=int, choices=(86, 90), default=90)
    p.add_argument("--nodes", type=int, default=64)
    p.add_argument("--requests", type=int, default=1, help="R (the GDN verify's V tile depends on it)")
    p.add_argument("--dump", help="write the whole SASS listing here")
    args = p.parse_args()
    if args.kernel == "attention":
        kernel, a, kw = attention_launch(args.sm, args.nodes)
    else:
        _, kernel, a, kw = launches(args.sm, [args.nodes], args.requests)[-1]  # the mask padded, as the engine passes it
    _, lines, sass = build(kernel, a, kw, args.sm, sass=True)
    listing = instructions(sass)
    if args.dump:
        with open(args.dump, "w") as f:
            f.write("\n".join(text for _, text in listing) + "\n")
    constexprs = {k: v for k, v in kw.items() if k.isupper() or k.startswith("num_")}
    print(f"{kernel.__name__} sm_{args.sm} {constexprs}")
    print("; ".join(line.split(":", 1)[-1].strip() for line in lines if "registers" in line or "spill" in line))
    print(f"{len(listing)} instructions")
    for first, last, body in loops(listing):
        top = collections.Counter(opcode(t) for t in body).most_common(10)
        print(f"loop {first:#x}-{last:#x}: {len(body)} instructions: " + ", ".join(f"{o} {n}" for o, n in top))


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET") == "1":
        raise SystemExit("run without TRITON_INTERPRET: the kernels must be compiled, not interpreted")
    main()
