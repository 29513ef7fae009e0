"""Time variants of the tree-GDN verify kernel that leave one stage out (text substitutions), to place its time."""
import importlib.util, os, sys, tempfile
import torch
sys.path.insert(0, os.getcwd())
from benchmarks.kernels.bench_tree_gdn import tree_parents, HV, H, K, V
import sglang_dflash.kernels.tree_gdn.tree_gdn as base
from sglang_dflash.kernels.tree_build import ancestors

SRC = open(base.__file__).read()
VARIANTS = {
    "main": [],
    "nosolve": [("for level in range(1, tl.max(depth, axis=0) + 1):", "for level in range(1, 1):")],
    "noout": [("out += tl.dot(decay * QK, U, input_precision=PRECISION)", "out += U")],
    "noS0": [("S0c = tl.load(state + kc[:, None], mask=slot >= 0, other=0.0)", "S0c = tl.zeros([BK, BV], tl.float32) + 0.5")],
    "noKSQS": [("                KS += _dot_tf32_exact_a(kf, S0c)\n                QS += _dot_tf32_exact_a(qf, S0c)\n", "")],
    "noKKQK": [("                KK += tl.dot(kf, tl.trans(kf), input_precision=\"tf32\")\n                QK += tl.dot(qf, tl.trans(kf), input_precision=\"tf32\")\n", "")],
    "nostoreu": [("        tl.store(u_out + otile, U, mask=ok[:, None])\n", "")],
    "noA": [("A = tl.where(i[:, None] == i[None, :], 0.0, beta[:, None] * decay * KK)", "A = KK")],
}


def load(name, subs):
    src = SRC
    for old, new in subs:
        assert src.count(old) == 1, (name, old)
        src = src.replace(old, new)
    path = os.path.join(tempfile.mkdtemp(), f"tree_gdn_{name}.py")
    open(path, "w").write(src)
    spec = importlib.util.spec_from_file_location(f"sglang_dflash.kernels.tree_gdn.abl_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "sglang_dflash.kernels.tree_gdn"
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def inputs(R, N, kind, dev):
    gen = torch.Generator(device=dev).manual_seed(R * 1000 + N)
    rnd = lambda *s: torch.randn(*s, generator=gen, device=dev)
    q, k = rnd(R, N, H, K).bfloat16(), rnd(R, N, H, K).bfloat16()
    v, a, b = rnd(R, N, HV, V).bfloat16(), rnd(R, N, HV).bfloat16(), rnd(R, N, HV).bfloat16()
    A_log, dt_bias = torch.rand(HV, device=dev, generator=gen) * 2 - 3, rnd(HV)
    pool = rnd(R + 1, HV, V, K) * 0.1
    slots = torch.arange(R, device=dev, dtype=torch.int32)
    parents = tree_parents(R, N, kind, gen, dev)
    depth = int(ancestors(parents, N - 1).sum(-1).max()) - 1
    anc = base.aligned_ancestor_mask(ancestors(parents, depth))
    return (q, k, v, a, b, A_log, dt_bias, pool, slots, parents), dict(ancestor_mask=anc, max_depth=depth), depth


def main():
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    cases = [(1, 64, "ddtree"), (1, 64, "chain"), (1, 16, "chain"), (8, 64, "ddtree"), (1, 256, "ddtree")]
    if dev == "cpu":
        cases = [(1, 20, "ddtree")]
    mods = {n: load(n, s) for n, s in VARIANTS.items()}
    rows = []
    for R, N, kind in cases:
        args, kw, depth = inputs(R, N, kind, dev)
        ref = None
        line = f"R={R} N={N} {kind}(depth {depth}):"
        for name, mod in mods.items():
            for prec in (["tf32x3", "tf32"] if name == "main" else ["tf32x3"]):
                f = lambda: mod.tree_gdn_verify_triton(*args, **kw, precision=prec)
                o, _ = f()
                if name == "main" and prec == "tf32x3":
                    ref = o
                if dev == "cpu":
                    t = float((o.float() - ref.float()).abs().max())
                    line += f" {name}/{prec}: err {t:.2e}"
                    continue
                from benchmarks.timing import graph_us
                t = graph_us(f, reps=10)
                line += f" {name}{'' if prec == 'tf32x3' else '/tf32'} {t:.1f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
