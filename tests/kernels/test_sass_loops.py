"""benchmarks/kernels/sass_loops.py: its listing parser and loop finder on a made-up cuobjdump listing, and the
real build of the tree attention for sm_90a (in a child process without TRITON_INTERPRET, which conftest.py turns on
here: compiled Triton, as on a GPU)."""

import os
import subprocess
import sys

from paths import ROOT

KERNELS = ROOT / "benchmarks" / "kernels"
sys.path.insert(0, str(KERNELS))
import sass_loops  # noqa: E402

LISTING = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;                  /* 0x00000a00ff017b82 */
        /*0010*/                   S2R R0, SR_TID.X ;                      /* 0x0000000000007919 */
        /*0020*/                   FMUL R2, R0, R0 ;                       /* 0x0000000000027220 */
        /*0030*/              @!P0 FMUL R2, R2, 0.5 ;                      /* 0x3f00000002028820 */
        /*0040*/                   ISETP.NE.AND P0, PT, R2, RZ, PT ;       /* 0x000000ff0200720c */
        /*0050*/               @P0 BRA `(.L_x_1) 0x20 ;                    /* 0xfffffffc00000947 */
        /*0060*/                   BRA 0x70 ;                              /* 0x0000000000007947 */
        /*0070*/                   EXIT ;                                  /* 0x000000000000794d */
"""


def test_finds_the_loop_of_a_backward_branch():
    listing = sass_loops.instructions(LISTING)
    assert [a for a, _ in listing] == list(range(0, 0x80, 0x10))
    ((first, last, body),) = sass_loops.loops(listing)  # the forward branch is not a loop
    assert (first, last) == (0x20, 0x50)
    assert [sass_loops.opcode(t) for t in body] == ["FMUL", "FMUL", "ISETP", "BRA"]


def test_counts_the_attention_kernel_for_sm90(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    dump = tmp_path / "attention.sass"
    out = subprocess.run([sys.executable, "sass_loops.py", "attention", "--nodes", "16", "--dump", str(dump)],
                         cwd=KERNELS, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("_tree_attention_kernel sm_90") and "registers" in lines[1]
    loop = [line for line in lines if line.startswith("loop ")]
    assert len(loop) == 1 and int(loop[0].split(": ")[1].split()[0]) > 300  # the key loop
    assert "HGMMA" in dump.read_text()  # its dots as wgmma
