"""Tree-GDN verify: HEAD's kernel (abtmp/tree_gdn_base.py) against the working tree's, paired and unpaired, same run."""
import importlib.util, os, sys
import torch
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.dirname(__file__))
from gdn_ablate import inputs as _inputs, base as new
from benchmarks.kernels.bench_tree_gdn import tree_parents, HV, H, K, V
from sglang_dflash.ddtree import build_ddtree
from sglang_dflash.kernels.tree_build import ancestors
import gdn_ablate

spec = importlib.util.spec_from_file_location("sglang_dflash.kernels.tree_gdn.base_head", os.path.join(os.path.dirname(__file__), "tree_gdn_base.py"))
old = importlib.util.module_from_spec(spec); old.__package__ = "sglang_dflash.kernels.tree_gdn"; sys.modules[spec.name] = old
spec.loader.exec_module(old)


def parents_deep(R, N, gen, dev):
    return build_ddtree(torch.randn(R, 15, 64, generator=gen, device=dev) * 6, torch.zeros(R, dtype=torch.long, device=dev), N - 1).parents


def main():
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    from benchmarks.timing import graph_us
    cases = [(1, 16, "chain"), (1, 16, "ddtree"), (1, 64, "ddtree"), (1, 64, "deep"), (8, 64, "ddtree"),
             (8, 64, "deep"), (1, 256, "deep"), (8, 16, "chain")]
    if dev == "cpu":
        cases = [(1, 20, "deep")]
    for R, N, kind in cases:
        if kind == "deep":
            orig = gdn_ablate.tree_parents
            gdn_ablate.tree_parents = lambda R, N, k, gen, dev: parents_deep(R, N, gen, dev)
            args, kw, depth = _inputs(R, N, "ddtree", dev)
            gdn_ablate.tree_parents = orig
        else:
            args, kw, depth = _inputs(R, N, kind, dev)
        ref, _ = old.tree_gdn_verify_triton(*args, **kw)
        line = f"R={R:2d} N={N:3d} {kind:6s} depth {depth:2d}:"
        for name, f in [("head", lambda: old.tree_gdn_verify_triton(*args, **kw)),
                        ("default", lambda: new.tree_gdn_verify_triton(*args, **kw)),
                        ("paired", lambda: new.tree_gdn_verify_triton(*args, **kw, paired=True)),
                        ("unpaired", lambda: new.tree_gdn_verify_triton(*args, **kw, paired=False))]:
            o, _ = f()
            err = float(((o.float() - ref.float()).norm() / ref.float().norm()))
            t = graph_us(f, reps=10) if dev == "cuda" else 0.0
            line += f" {name} {t:6.1f} (d {err:.0e})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
