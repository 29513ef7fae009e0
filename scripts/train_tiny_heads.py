#!/usr/bin/env python3
"""Conditional heads on the shipped tiny drafter, and what they buy: a DFlash2-style candidate selector and a
DSpark-style vanilla Markov head trained on the frozen backbone of sglang_dflash/assets/tiny-pair/draft, then tokens
per verify pass of DFLASH chains and DDTREE trees scored by per-depth marginals or by the head, on held-out prompts.

Data: the tiny target's greedy rollouts from stdlib windows (the text the pair was trained on; validation and
held-out prompts from other seeds). Every position of a rollout is an anchor (from the prompt's last token on: the
labels are the target's own tokens, as when decoding): the drafter's block hidden rows at that anchor (one pass,
backbone frozen) and the target's next tokens there as labels. Each head keeps the training step whose validation
chain (teacher-forced drafts accepted per pass) is best, step 0 included, so it cannot end worse than its start
there; the held-out figures are on prompts used for neither. Both heads start as exact no-ops (the selector's
successor codebook and the Markov head's W2 zero: edge and bias 0, the other factors random so gradients flow), so
step 0 is the marginals' chain; at Adam 3e-3 what they learn that generalises comes within the first ~30 steps (the
rollouts are small and loop), hence validation every 10 steps. Losses: the selector's log-softmax over each
depth's top-K candidates given the true previous token (labels outside the candidates skipped); the Markov head's
cross-entropy of (logits + bias of the true previous token) over the vocabulary.

Both heads ride the DFlash backbone's layout (rows 1 .. 15 draft depths 1 .. 15): the selector as a DFlash2 drafter
(the same layout), the Markov head through a DSpark-format view of the same rows (`MarkovView`); neither is a
checkpoint of those formats' own training. The target's verify decides every token, so outputs are the target's.

    python scripts/train_tiny_heads.py [--rollouts 64] [--steps 100] [--held-out 12] [--new-tokens 48]   # CPU, ~9 min
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks" / "gpu"))

from sglang_dflash.dflash import chain_tree  # noqa: E402
from sglang_dflash.engine import generate  # noqa: E402
from sglang_dflash.engine.load import TINY_PAIR, load_pair  # noqa: E402
from sglang_dflash.models.dflash_draft import DFlashDrafter  # noqa: E402
from sglang_dflash.models.draft_heads import CandidateSelector, markov_head, selector_scores  # noqa: E402

BUDGETS = (8, 16, 32, 64)


def prompts(n: int, seed: int) -> list[list[int]]:
    from harness import text_prompts  # stdlib windows in the pair's tokenizer

    return [p for p in text_prompts(n, seed) if len(p) >= 4]


def features(target, drafter, prompts_: list[list[int]], rollouts: list[list[int]]):
    """(hidden [P, D, H], anchors [P], labels [P, D]; -1 past the sequence) at every anchor of each prompt + rollout
    whose labels are the target's own tokens: from the prompt's last token on, as when decoding (the prompt's own
    text is not what the target would write, and a head trained on it learns the wrong thing)."""
    D = drafter.config.num_depths
    out_h, out_a, out_y = [], [], []
    for prompt, rollout in zip(prompts_, rollouts):
        seq, T = prompt + rollout, len(prompt) + len(rollout)
        tcache, dcache = target.new_cache(1, T + 1), drafter.new_cache(1, T + 1)
        slot, tokens = torch.tensor([0]), torch.tensor(seq)
        for start in range(0, T, 64):  # prefill as the engine does: chains whose every node is committed
            chunk, lens = tokens[start : start + 64], torch.tensor([start])
            out = target.verify(tcache, chain_tree(chunk[None, 1:], chunk[:1]), slot, lens)
            nodes = torch.arange(len(chunk))[None]
            target.commit(tcache, out, slot, lens, nodes)
            drafter.append_context(dcache, out.taps, slot, lens, nodes)
        anchors = torch.arange(max(1, len(prompt) - 1), T - 1)
        hidden = drafter.hidden(dcache, tokens[anchors], torch.zeros_like(anchors), anchors, target.embed_tokens)
        idx = anchors[:, None] + 1 + torch.arange(D)
        out_h.append(hidden)
        out_a.append(tokens[anchors])
        out_y.append(torch.where(idx < T, tokens[idx.clamp(max=T - 1)], -1))
    return torch.cat(out_h), torch.cat(out_a), torch.cat(out_y)


def previous(anchors, labels):
    """The true token before each depth's: the anchor, then the labels (a -1 label's successor gets token 0)."""
    return torch.cat([anchors[:, None], labels[:, :-1].clamp(min=0)], 1)


def train(head, loss_fn, data, steps: int, lr: float, name: str, score, every: int = 10, weight_decay: float = 0.0) -> None:
    """Adam (AdamW if weight_decay > 0) on random batches of 256 anchors; every `every` steps (and before the first)
    score() on the validation anchors, and the head ends with the weights of the best score (early stopping: the heads
    are bigram-like tables over the vocabulary and over-fit a few thousand anchors fast)."""
    hidden, anchors, labels = data
    params = head.parameters()
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay) if weight_decay else torch.optim.Adam(params, lr=lr)
    g, t0 = torch.Generator().manual_seed(0), time.time()
    best = (score(), 0, {k: v.clone() for k, v in head.state_dict().items()})
    for step in range(1, steps + 1):
        i = torch.randint(len(hidden), (256,), generator=g)
        loss = loss_fn(hidden[i], anchors[i], labels[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % every == 0 or step == steps:
            got = score()
            print(f"  {name} step {step}: loss {loss.item():.3f}, validation {got:.2f} ({time.time() - t0:.0f} s)", flush=True)
            if got > best[0]:
                best = (got, step, {k: v.clone() for k, v in head.state_dict().items()})
    head.load_state_dict(best[2])
    print(f"  {name}: kept step {best[1]} (validation {best[0]:.2f})", flush=True)


def teacher_forced(data, predict) -> tuple[float, float]:
    """(depth-1 top-1 accuracy, mean drafts a greedy chain would have accepted) when each depth predicts given the
    true token before: predict(hidden, anchors, labels) -> tokens [P, D]. A chain's drafts equal the true tokens up to
    its first miss, so the second number is the chain's accepted drafts per pass on these anchors."""
    hidden, anchors, labels = data
    with torch.no_grad():
        ok = (predict(hidden, anchors, labels) == labels) & (labels >= 0)
    return ok[:, 0].float().mean().item(), ok.long().cumprod(1).sum(1).float().mean().item()


class MarkovView:
    """The drafter's rows through `proposal` as a DSpark drafter with this Markov head (config.format dspark, D
    depths = the backbone's block_size - 1)."""

    def __init__(self, drafter, head):
        self.inner, self.markov_head = drafter, head
        c = drafter.config
        self.config = dataclasses.replace(c, format="dspark", block_size=c.num_depths, markov_rank=1, markov_head_type="vanilla")

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __call__(self, *args, **kwargs):  # proposal calls the drafter itself where no head is read (marginal scoring)
        return self.inner(*args, **kwargs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--rollouts", type=int, default=64, help="training rollouts")
    p.add_argument("--rollout-tokens", type=int, default=96)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lr", type=float, default=3e-3, help="Adam's learning rate for both heads")
    p.add_argument("--eval-every", type=int, default=10, help="steps between validation scores")
    p.add_argument("--weight-decay", type=float, default=0.0, help="AdamW's decoupled weight decay (0: plain Adam)")
    p.add_argument("--rank", type=int, default=32)
    p.add_argument("--top-k", type=int, default=8, help="the selector's candidates per depth")
    p.add_argument("--validation", type=int, default=8, help="prompts whose rollouts pick each head's training step")
    p.add_argument("--held-out", type=int, default=12, help="evaluation prompts")
    p.add_argument("--new-tokens", type=int, default=48)
    args = p.parse_args(argv)
    torch.manual_seed(0)
    target, drafter = load_pair(TINY_PAIR / "target", TINY_PAIR / "draft")
    c = drafter.config

    def rollout_features(seed: int, n: int):
        """(prompts, features of their greedy rollouts) for n prompts of this seed."""
        ps = prompts(n, seed=seed)
        return ps, features(target, drafter, ps, generate(target, ps, args.rollout_tokens, "ar").output_ids)

    t0 = time.time()
    train_prompts, data = rollout_features(11, args.rollouts)
    print(f"{len(data[0])} anchors from {len(train_prompts)} rollouts in {time.time() - t0:.0f} s", flush=True)

    lm_head = target.lm_head
    selector = CandidateSelector(c.vocab_size, c.hidden_size, args.rank)
    markov = markov_head("vanilla", c.vocab_size, c.hidden_size, args.rank)
    with torch.no_grad():  # exact no-ops at step 0 (nn.Embedding x nn.Linear's default init gave the Markov head a
        selector.successor_codebook.zero_()  # bias of mean |.| ~0.5, which changed most chains)
        markov.markov_w2.weight.zero_()

    def selector_loss(h, a, y):
        with torch.no_grad():
            unary, cand = drafter.logits(h, lm_head).topk(args.top_k, dim=-1)
        scores = selector_scores(unary, selector.edge_scores(h, cand, previous(a, y)[:, :, None]))[:, :, 0]  # [b, D, K]
        hit = (cand == y[..., None]) & (y[..., None] >= 0)
        return -(scores * hit).sum() / hit.sum().clamp(min=1)

    def markov_loss(h, a, y):
        with torch.no_grad():
            logits = drafter.logits(h, lm_head)
        bias, _ = markov.bias(previous(a, y), None)
        return F.cross_entropy((logits + bias).flatten(0, 1), y.flatten(), ignore_index=-1)

    _, valid_data = rollout_features(13, args.validation)  # early stopping
    held, held_data = rollout_features(12345, args.held_out)  # the reported figures

    def marginal_pred(h, a, y):
        return drafter.logits(h, lm_head).argmax(-1)

    def selector_pred(h, a, y):
        unary, cand = drafter.logits(h, lm_head).topk(args.top_k, dim=-1)
        edge = selector.edge_scores(h, cand, previous(a, y)[:, :, None])[:, :, 0]
        return cand.gather(2, (unary + edge).argmax(-1, keepdim=True))[..., 0]

    def markov_pred(h, a, y):
        return (drafter.logits(h, lm_head) + markov.bias(previous(a, y), None)[0]).argmax(-1)

    heads = ((selector, selector_loss, selector_pred, "selector"), (markov, markov_loss, markov_pred, "markov"))
    for head, loss, pred, name in heads:
        score = lambda p=pred: teacher_forced(valid_data, p)[1]  # noqa: E731
        train(head, loss, data, args.steps, args.lr, name, score, args.eval_every, args.weight_decay)

    print("\nteacher-forced (each depth given the true token before): depth-1 accuracy, chain drafts accepted / pass")
    for name, pred in (("marginals", marginal_pred), ("selector", selector_pred), ("markov", markov_pred)):
        for split, d in (("train", data), ("validation", valid_data), ("held-out", held_data)):
            acc, run = teacher_forced(d, pred)
            print(f"  {name:9s} {split:10s} {acc:.3f}  {run:.2f}", flush=True)

    dflash2 = DFlashDrafter(dataclasses.replace(c, format="dflash2", selector_rank=args.rank, selector_top_k=args.top_k))
    dflash2.load_state_dict({**drafter.state_dict(), **{f"candidate_selector.{k}": v for k, v in selector.state_dict().items()}})
    drafters = {
        "DFlash (marginals)": drafter,
        "DFlash2-style selector": dflash2.eval(),
        "DSpark-style Markov": MarkovView(drafter, markov),
    }
    rows = ["| drafter | DFLASH chain | " + " | ".join(f"DDTREE {b} marginal / conditional" for b in BUDGETS) + " |",
            "|---|---|" + "---|" * len(BUDGETS)]  # fmt: skip
    for name, d in drafters.items():
        run = lambda algo, budget=0, scoring="conditional": generate(  # noqa: E731
            target, held, args.new_tokens, algo, d, budget=budget, scoring=scoring).mean_accept_len  # fmt: skip
        cells = [f"{run('dflash'):.2f}"]
        for b in BUDGETS:
            marginal = run("ddtree", b, "marginal")
            cells.append(f"{marginal:.2f}" if d is drafter else f"{marginal:.2f} / {run('ddtree', b):.2f}")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    print("\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
