"""Diagnosis: engine DFLASH acceptance vs the training forward's acceptance on the same greedy continuations."""

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
names = corpus["held_names"]
bs = 16


def depth_stats(lens):
    lens = torch.tensor(lens)
    return [round((lens >= k).float().mean().item(), 3) for k in range(1, bs)]


def train_forward_accept(seq, anchors):
    """accepted drafts per block of the training forward at `anchors` on the sequence seq (list)."""
    x = torch.tensor([seq])
    taps, preds = T.taps_and_preds(hf, x, layer_ids, torch.device("cpu"))
    a = torch.tensor([anchors])
    with torch.no_grad():
        logits = T.drafter_block_logits(drafter, hf.get_input_embeddings(), hf.get_output_embeddings(), taps.float(), x, a)
    labels = preds.gather(1, (a[:, :, None] + torch.arange(bs - 1)).flatten(1)).view(1, len(anchors), bs - 1)
    return (logits.argmax(-1) == labels).long().cumprod(-1).sum(-1)[0].tolist()


def run(name, prompts, new, eos):
    eos_ids = target.config.eos_token_ids if eos else ()
    t0 = time.time()
    d = generate(target, prompts, new, "dflash", drafter, eos_token_ids=eos_ids)
    ar = generate(target, prompts, new + 2 * bs, "ar")  # longer, so every engine block has labels
    rows, all_e, all_t = [], [], []
    for p, o, al, ao in zip(prompts, d.output_ids, d.accept_lens, ar.output_ids):
        assert ao[: len(o)] == o
        seq = p + ao
        anchors, a = [], len(p)
        for n in al:
            anchors.append(a)
            a += n + 1
        tf = train_forward_accept(seq, anchors)
        mism = sum(int(x != y) for x, y in zip(al, tf))
        rows.append(
            dict(
                steps=len(al),
                engine=round(sum(x + 1 for x in al) / len(al), 3),
                train_fwd=round(sum(x + 1 for x in tf) / len(tf), 3),
                mismatched_blocks=mism,
            )
        )
        all_e += al
        all_t += tf
    res = dict(
        set=name,
        prompts=len(prompts),
        new=new,
        engine=round(sum(x + 1 for x in all_e) / len(all_e), 3),
        train_fwd=round(sum(x + 1 for x in all_t) / len(all_t), 3),
        per_prompt=rows,
        depth_engine=depth_stats(all_e),
        s=round(time.time() - t0, 1),
    )
    print(json.dumps(res), flush=True)
    return res


out = []
out.append(run("demo", [tok.encode(t) for t in PROMPTS], 96, True))
out.append(run("demo_noeos_160", [tok.encode(t) for t in PROMPTS], 160, False))
first = [ids[:40] for ids in held if len(ids) >= 48][:8]
out.append(run("heldout_filestart40", first, 128, False))
# line-start windows inside held-out files (short prompts, like the demo)
nl = torch.zeros(len(tok), dtype=torch.bool)
nl[[i for i in range(len(tok)) if "\n" in tok.decode([i])]] = True
g = torch.Generator().manual_seed(1)
ls = []
for ids in held:
    if len(ids) < 400:
        continue
    t = torch.tensor(ids)
    starts = (nl[t[:-1]].nonzero().squeeze(1) + 1).tolist()
    starts = [s for s in starts if 64 <= s < len(ids) - 200]
    if starts:
        ls.append(ids[starts[torch.randint(len(starts), (1,), generator=g).item()] :][:16])
out.append(run("heldout_linestart16", ls[:12], 96, False))
json.dump(out, open("/tmp/diag.json", "w"), indent=1)
