"""Whole-step costs of the standalone engine at Qwen3.6-27B TP=2 shard shapes, random weights, one GPU.

    PYTHONPATH=$PWD python3 benchmarks/bench_step.py [--out DIR] [--context 4096]

Per-GPU shard of Qwen3.6-27B at TP=2: hidden 5120, 64 layers (16 x [3 Gated DeltaNet + 1 gated
attention]), GDN 8 QK / 24 V heads of 128, attention 12 Q / 2 KV heads of 256, MLP 8704, LM head
124,160 rows; drafter: 5 layers (4 causal sliding-window layers of 2048 + 1 full, as Qwen3.6-27B-DFlash),
16 Q / 4 KV heads of 128, block 16. bf16 weights, caches filled
with random values as if `--context` tokens had been prefilled. Each stage is captured in a CUDA
graph and timed by median replay (benchmarks/timing.py): decode step (verify of the root alone +
LM head + commit), chain verify of 16 (DFLASH), tree verifies of 32 / 64 / 128 nodes (DDTREE-shaped),
drafter pass, tree build + greedy accept, commit (of the path a random target accepts). Issue 4's targets: tree verify
of 64 <= 1.20 x decode, chain verify of 16 <= 1.10 x decode. `--smoke` runs tiny shapes on CPU
without graphs (a check that the script runs, not a measurement).

Then tokens/s of the whole loop for an acceptance profile: step(N) = draft + verify(N) + build and
accept + commit, tokens/s = tau / step for tau accepted tokens per step (bonus included).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace

import torch

from sglang_dflash.ddtree import accept_greedy, build_ddtree
from sglang_dflash.dflash import chain_tree
from sglang_dflash.engine.loop import root_only
from sglang_dflash.models.config import DraftConfig, TargetConfig, default_target_layer_ids
from sglang_dflash.models.dflash_draft import DFlashDrafter
from sglang_dflash.models.qwen3_5 import Qwen3_5Target

SHARD = TargetConfig(
    vocab_size=248_320 // 2,
    hidden_size=5120,
    intermediate_size=17_408 // 2,
    layer_types=tuple("full_attention" if i % 4 == 3 else "linear_attention" for i in range(64)),
    num_attention_heads=12,
    num_key_value_heads=2,
    head_dim=256,
    linear_num_key_heads=8,
    linear_num_value_heads=24,
    linear_key_head_dim=128,
    linear_value_head_dim=128,
    linear_conv_kernel_dim=4,
    rms_norm_eps=1e-6,
    rope_theta=10_000_000.0,
    partial_rotary_factor=0.25,
    tie_word_embeddings=False,
)
TOY = replace(SHARD, vocab_size=512, hidden_size=64, intermediate_size=96, layer_types=SHARD.layer_types[:8], head_dim=32,
              num_attention_heads=4, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
              linear_value_head_dim=16)  # fmt: skip


def draft_config(t: TargetConfig, heads: tuple[int, int, int]) -> DraftConfig:
    return DraftConfig(
        hidden_size=t.hidden_size, intermediate_size=t.intermediate_size, num_hidden_layers=5, num_attention_heads=heads[0],
        num_key_value_heads=heads[1], head_dim=heads[2], vocab_size=t.vocab_size, rms_norm_eps=1e-6, rope_theta=1e7,
        attention_bias=False, target_layer_ids=tuple(default_target_layer_ids(t.num_hidden_layers, 5)), mask_token_id=0,
        block_size=16, layer_types=("sliding_attention",) * 4 + ("full_attention",), sliding_window=2048,
        causal=(True,) * 4 + (False,),  # Qwen3.6-27B-DFlash: 4 causal sliding-window layers + 1 full
    )  # fmt: skip


@torch.no_grad()
def random_(model: torch.nn.Module) -> None:
    for name, p in model.named_parameters():
        if name.endswith("A_log"):
            p.copy_(torch.log(torch.rand_like(p, dtype=torch.float32) * 15 + 1))
        elif p.dim() == 1:
            p.normal_(0.0, 0.1)
        else:
            p.normal_(0.0, p.shape[-1] ** -0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="directory for bench_step.json")
    ap.add_argument("--context", type=int, default=4096, help="tokens already in the caches (default: 4096)")
    ap.add_argument("--requests", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on CPU, no CUDA graphs")
    args = ap.parse_args()
    dev = "cpu" if args.smoke else "cuda"
    tcfg, dcfg = (TOY, draft_config(TOY, (4, 2, 16))) if args.smoke else (SHARD, draft_config(SHARD, (16, 4, 128)))
    dtype = torch.float32 if args.smoke else torch.bfloat16
    if args.smoke:
        args.context = 40
    torch.manual_seed(0)
    with torch.device("meta"):
        target, drafter = Qwen3_5Target(tcfg, dcfg.target_layer_ids), DFlashDrafter(dcfg)
    target, drafter = target.to_empty(device=dev).to(dtype), drafter.to_empty(device=dev).to(dtype)
    random_(target)
    random_(drafter)
    R, ctx = args.requests, args.context
    tcache, dcache = target.new_cache(R, ctx + 160), drafter.new_cache(R, ctx + 160)
    for t in (tcache.k, tcache.v, tcache.conv, dcache.k, dcache.v):
        t.normal_(0.0, 1.0)
    tcache.ssm.normal_(0.0, 0.05)
    slots = torch.arange(R, device=dev)
    seq_lens = torch.full((R,), ctx, device=dev)
    roots = torch.randint(tcfg.vocab_size, (R,), device=dev)
    draft_logits = torch.randn(R, 15, tcfg.vocab_size, device=dev) * 2.5
    trees = {"decode": root_only(roots), "chain16": chain_tree(draft_logits.argmax(-1), roots)}
    for n in (32, 64, 128):
        trees[f"tree{n}"] = build_ddtree(draft_logits, roots, n - 1)
    if args.smoke:
        timer = lambda fn: (lambda t0: (fn(), (time.perf_counter() - t0) * 1e6)[1])(time.perf_counter())  # noqa: E731
    else:
        from benchmarks.timing import graph_us as timer

    target_logits = torch.randn(R, 128, tcfg.vocab_size, device=dev)
    paths = {name: accept_greedy(tree, target_logits[:, : tree.num_nodes]).accepted_nodes for name, tree in trees.items()}

    def step(name: str, commit: bool):
        def run():
            out = target.verify(tcache, trees[name], slots, seq_lens)
            target.logits(out.hidden)
            if commit:
                target.commit(tcache, out, slots, seq_lens, paths[name])

        return run

    rows = {}
    for name in trees:
        rows[f"verify_{name}"] = timer(step(name, commit=False))
        rows[f"step_{name}"] = timer(step(name, commit=True))
    out64 = target.verify(tcache, trees["tree64"], slots, seq_lens)
    rows["commit_tree64"] = timer(lambda: target.commit(tcache, out64, slots, seq_lens, paths["tree64"]))
    rows["drafter"] = timer(lambda: drafter(dcache, roots, slots, seq_lens, target.embed_tokens, target.lm_head))
    for n in (16, 32, 64):
        logits_n = target_logits[:, :n]
        rows[f"build_accept_{n}"] = timer(
            lambda: accept_greedy(build_ddtree(draft_logits, roots, n - 1, validate=False), logits_n)
        )
    rows["draft_chain16_accept"] = timer(lambda: accept_greedy(chain_tree(draft_logits.argmax(-1), roots), target_logits[:, :16]))
    decode = rows["step_decode"]
    print(f"\nQwen3.6-27B TP=2 shard on one GPU, R = {R}, context {ctx}: microseconds (x decode step)")
    for key, value in rows.items():
        print(f"  {key:24s} {value:10.1f}  ({value / decode:5.2f} x)")
    print("tokens/s of the whole loop by tokens per step (tau, bonus included):")
    loops = {
        "ar": decode,
        "dflash": rows["drafter"] + rows["draft_chain16_accept"] + rows["step_chain16"],
        "ddtree 32": rows["drafter"] + rows["build_accept_32"] + rows["step_tree32"],
        "ddtree 64": rows["drafter"] + rows["build_accept_64"] + rows["step_tree64"],
    }
    for name, us in loops.items():
        taus = (1.0,) if name == "ar" else (2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0)
        print(f"  {name:10s} step {us:8.1f} us: " + ", ".join(f"tau {t:.0f}: {R * t / us * 1e6:7.1f}" for t in taus))
    rows["loop_step_us"] = loops
    with open(os.path.join(args.out, "bench_step.json"), "w") as f:
        json.dump({"requests": R, "context": ctx, "smoke": args.smoke, "us": rows}, f, indent=1)


if __name__ == "__main__":
    main()
