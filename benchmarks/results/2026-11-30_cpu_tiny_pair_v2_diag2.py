"""Validation rollouts: repetitiveness, the training estimate (arithmetic mean over random anchors) vs the
engine-like walk (harmonic) on the same sequences."""

import json
import sys
import time
from pathlib import Path

_r = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(_r))
sys.path.insert(0, str(_r / "benchmarks"))
import torch  # noqa: E402 (after the sys.path set-up)

torch.set_num_threads(1)
torch.set_flush_denormal(True)
import train_tiny_pair as T  # noqa: E402 (after the sys.path set-up)
from transformers import Qwen3_5ForCausalLM  # noqa: E402 (after the sys.path set-up)

from sglang_dflash.demo import PROMPTS  # noqa: E402 (after the sys.path set-up)
from sglang_dflash.engine import generate, load_pair, load_tokenizer, tiny_pair  # noqa: E402 (after the sys.path set-up)

tdir, ddir = tiny_pair()
target, drafter = load_pair(tdir, ddir, "cpu")
tok = load_tokenizer(tdir)
hf = Qwen3_5ForCausalLM.from_pretrained(str(tdir), dtype=torch.float32).eval()
T.patch_gdn(hf)
layer_ids = list(drafter.config.target_layer_ids)
corpus = torch.load(str(_r / "build/tinypair/corpus.pt"))
held = T.unpack(corpus["held"])
bs, L = 16, 192
NV = int(sys.argv[1]) if len(sys.argv) > 1 else 256
val_prompts = torch.tensor([ids[o : o + 40] for o in range(64, 4096, 192) for ids in held if len(ids) >= o + 40][:NV])
t0 = time.time()
val = T.greedy_rollouts(hf, val_prompts, L, 64, torch.device("cpu"), "val")
print(f"val rollouts {tuple(val.shape)} in {time.time() - t0:.0f}s", flush=True)


def all_L(seqs, lo):
    """accept+1 at every anchor a in [lo, T-bs] (training forward), [N, T-bs-lo+1]."""
    res = []
    for s in seqs.split(16):
        taps, preds = T.taps_and_preds(hf, s, layer_ids, torch.device("cpu"))
        a = torch.arange(lo, s.shape[1] - bs + 1).expand(len(s), -1)
        with torch.no_grad():
            lg = T.drafter_block_logits(drafter, hf.get_input_embeddings(), hf.get_output_embeddings(), taps.float(), s, a)
        lab = preds.gather(1, (a[:, :, None] + torch.arange(bs - 1)).flatten(1)).view(*a.shape, bs - 1)
        res.append((lg.argmax(-1) == lab).long().cumprod(-1).sum(-1) + 1)
    return torch.cat(res)


def walk(Ls, lo, stop):
    """engine-like walk from anchor lo: tokens/steps while anchor <= stop."""
    tot_tok = tot_steps = 0
    per = []
    for row in Ls.tolist():
        a, tk, st = 0, 0, 0
        while a + lo <= stop and a < len(row):
            tk += row[a]
            st += 1
            a += row[a]
        per.append(tk / st)
        tot_tok += tk
        tot_steps += st
    return tot_tok / tot_steps, per


def repet(seqs, P):
    """share of generated tokens whose 8-gram ending there occurred earlier; share of rows with a periodic last 64."""
    rep, n, per = 0, 0, 0
    for s in seqs.tolist():
        seen = set()
        for t in range(8, len(s) + 1):
            g = tuple(s[t - 8 : t])
            if t - 1 >= P:
                rep += g in seen
                n += 1
            seen.add(g)
        per += any(s[-64:] == s[-64 - p : -p] for p in range(1, 65))
    return rep / n, per / len(seqs)


g = torch.Generator().manual_seed(5)
Lv = all_L(val, 1)  # anchors 1..176 (as validation samples them)
anchors = T.sample_anchors(len(val), 32, L, bs, g, "cpu") - 1  # index into Lv
samp = Lv.gather(1, anchors).float()
res = {"val_rollouts": len(val)}
res["val_train_estimate_arith"] = round(samp.mean().item(), 3)
res["val_harmonic_same_anchors"] = round(1 / (1 / samp).mean().item(), 3)
res["val_arith_gen_only(a>=40)"] = round(Lv[:, 39:].float().mean().item(), 3)
res["val_engine_walk_from40_to176"] = round(walk(Lv[:, 39:], 40, 176)[0], 3)
res["val_engine_walk_from40_first96"] = round(walk(Lv[:, 39:], 40, 40 + 96)[0], 3)
res["val_repeat8_share, periodic64_share"] = repet(val, 40)
# per-rollout: periodic vs not
per = torch.tensor([any(s[-64:] == s[-64 - p : -p] for p in range(1, 65)) for s in val.tolist()])
w = walk(Lv[:, 39:], 40, 176)[1]
wt = torch.tensor(w)
res["walk_mean_periodic_rows"] = round(wt[per].mean().item(), 3) if per.any() else None
res["walk_mean_nonperiodic_rows"] = round(wt[~per].mean().item(), 3) if (~per).any() else None
# demo continuations: same statistics
prompts = [tok.encode(t) for t in PROMPTS]
ar = generate(target, prompts, 96, "ar", eos_token_ids=target.config.eos_token_ids)
ar_long = generate(target, prompts, 160, "ar")
demo_seqs = [p + o for p, o in zip(prompts, ar_long.output_ids)]
res["demo_eos_lengths"] = [len(o) for o in ar.output_ids]
r8 = []
for p, s in zip(prompts, demo_seqs):
    r8.append(repet(torch.tensor([s[: len(p) + 96]]), len(p)))
res["demo_repeat8,periodic64 per prompt (96 new)"] = r8
# natural held-out text: repeat statistics of 192-token windows at the same offsets
nat = torch.tensor([ids[o : o + L] for o in range(64, 4096, 192) for ids in held if len(ids) >= o + L][:NV])
res["natural_heldout_repeat8,periodic64"] = repet(nat, 40)
print(json.dumps(res, indent=1))
json.dump(res, open("/tmp/diag2.json", "w"), indent=1)
torch.save({"val": val, "Lv": Lv}, "/tmp/val.pt")
