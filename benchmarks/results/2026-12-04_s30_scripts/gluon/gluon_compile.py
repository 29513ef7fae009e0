"""Compile `gluon_attention.py`'s kernel for sm_90a with no GPU (Triton 3.6.0, as on the device; torch not needed):
ptxas's registers / spills and the SASS's wgmma and barrier counts.
    python gluon_compile.py [S] [BN] [DEFER_PV]   # from this folder; defaults: 22 splits (R = 1 x 64 over 4096), 64
    keys a tile, P.V waited at once (0)"""

import collections
import re
import subprocess
import sys
import tempfile

import triton
from gluon_attention import _gluon_tree_attention_kernel
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource

S = int(sys.argv[1]) if len(sys.argv) > 1 else 22
BN = int(sys.argv[2]) if len(sys.argv) > 2 else 64
DEFER = bool(int(sys.argv[3])) if len(sys.argv) > 3 else False
sig = {"q": "*bf16", "k_cache": "*bf16", "v_cache": "*bf16", "prefix_lens": "*i64", "k_tree": "*bf16", "v_tree": "*bf16",
       "anc": "*i64", "o_out": "*bf16", "m_out": "*fp32", "l_out": "*fp32", "N": "i32", "NW": "i32", "T": "i32",
       "qk_scale": "fp32"}  # fmt: skip
const = dict(HQ=12, HKV=2, DH=256, S=S, BM=128, BN=BN, WARPS=8, DEFER_PV=DEFER)
sig.update({k: "constexpr" for k in const})
# pointers 16-byte aligned, as a launch specialises torch tensors' (and N, T multiples of 16 are not assumed)
attrs = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values()) if t.startswith("*")}
src = GluonASTSource(_gluon_tree_attention_kernel, sig, constexprs=const, attrs=attrs)
k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
with tempfile.NamedTemporaryFile(suffix=".ptx", mode="w") as f:
    f.write(k.asm["ptx"])
    f.flush()
    ptxas = subprocess.run([triton.knobs.nvidia.ptxas.path, "-v", "--gpu-name", "sm_90a", f.name, "-o", "/dev/null"],
                           capture_output=True, text=True)  # fmt: skip
print(" ".join(line.split("info    : ")[-1] for line in ptxas.stderr.splitlines() if "registers" in line or "spill" in line))
print(f"shared {k.metadata.shared} B")
with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
    f.write(k.asm["cubin"])
    f.flush()
    sass = subprocess.run([triton.knobs.nvidia.cuobjdump.path, "--dump-sass", f.name], capture_output=True, text=True).stdout
ops = collections.Counter(
    m[1].split(".")[0] for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass)
)
print(
    "instructions",
    sum(ops.values()),
    {o: ops[o] for o in ("HGMMA", "WARPGROUP", "LDGSTS", "BAR", "MUFU", "LDL", "STL") if o in ops},
)
