"""The standalone engine against transformers' own Qwen3.5: AR, DFLASH and DDTREE emit exactly
`Qwen3_5ForCausalLM.generate`'s greedy tokens on random tiny hybrid models, batched, with a random
drafter (mostly rejections) and with a drafter forced to be right (long accepted paths, deep
trees); sampled output follows the target's own distribution (chi-square)."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from model_helpers import save_tiny_target, tiny_target_config

from sglang_dflash.dflash import chain_tree
from sglang_dflash.engine import generate
from sglang_dflash.init_draft import init_draft
from sglang_dflash.models import PairError, Qwen3_5Target, TargetConfig, check_pair
from sglang_dflash.models.config import DraftConfig, read_config
from sglang_dflash.models.dflash_draft import DFlashDrafter

NEW_TOKENS = 64
LIN, FULL = "linear_attention", "full_attention"

# (target config kwargs, drafter kwargs): layer patterns, H != HV, odd sizes, tied embeddings, a sliding-window drafter
CONFIGS = {
    "lin-full": (dict(layer_types=(LIN, FULL)), dict(num_layers=2, block_size=8, taps=2)),
    "odd-sizes": (
        dict(
            layer_types=(LIN, LIN, LIN, FULL),
            vocab=101,
            hidden=40,
            heads=(3, 1),
            head_dim=12,
            gdn_heads=(3, 6),
            gdn_dims=(6, 10),
            intermediate=72,
        ),
        dict(num_layers=1, block_size=5, taps=3),
    ),
    "full-first-tied": (
        dict(layer_types=(FULL, LIN, FULL), gdn_heads=(2, 2), tie=True),
        dict(num_layers=2, block_size=16, taps=5),
    ),
    "five-layers-full-rope": (
        dict(layer_types=(LIN, FULL, LIN, FULL, LIN), gdn_heads=(1, 3), rotary=1.0, heads=(2, 2)),
        dict(num_layers=3, block_size=7, taps=1),
    ),
    "sliding-drafter": (dict(layer_types=(LIN, LIN, FULL, LIN)), dict(num_layers=3, block_size=6, taps=3, sliding_window=5)),
}
PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [3, 4, 90, 12, 5, 67, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], [42]]


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def pair(request, tmp_path_factory):
    """(target, drafter, reference continuations by transformers' greedy generate)."""
    target_kw, draft_kw = CONFIGS[request.param]
    root = tmp_path_factory.mktemp(request.param)
    hf = save_tiny_target(root / "target", tiny_target_config(**target_kw), seed=len(request.param))
    init_draft(root / "target", root / "draft", seed=1, **draft_kw)
    drafter = DFlashDrafter.from_pretrained(root / "draft")
    target = Qwen3_5Target.from_pretrained(root / "target", tap_layers=drafter.config.target_layer_ids)
    refs = []
    for p in PROMPTS:
        out = hf.generate(torch.tensor([p]), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
        refs.append(out[0, len(p) :].tolist())
    return target, drafter, refs


class OracleDrafter:
    """Proposes the target's own continuation (from the reference) with probability `right` per depth,
    a random token otherwise; other tokens get random logits so that trees also branch."""

    def __init__(self, sequences: list[list[int]], vocab: int, block_size: int, right: float, seed: int = 0):
        self.sequences, self.vocab, self.right = sequences, vocab, right
        self.config = types.SimpleNamespace(block_size=block_size, num_depths=block_size - 1, format="dflash")
        self.gen = torch.Generator().manual_seed(seed)

    def new_cache(self, num_slots, max_len):
        return None

    def __call__(self, cache, anchors, slots, seq_lens, embed, lm_head):
        L = self.config.block_size - 1
        logits = torch.randn(len(slots), L, self.vocab, generator=self.gen)
        for i, (slot, n) in enumerate(zip(slots.tolist(), seq_lens.tolist())):
            seq = self.sequences[slot]
            for d in range(L):
                right = n + 1 + d < len(seq) and torch.rand(1, generator=self.gen).item() < self.right
                token = seq[n + 1 + d] if right else int(torch.randint(self.vocab, (1,), generator=self.gen))
                logits[i, d, token] += 6.0
        return logits.to(anchors.device)


@pytest.mark.parametrize("algo,budget", [("ar", 0), ("dflash", 0), ("ddtree", 3), ("ddtree", 24)])
def test_greedy_equals_transformers(pair, algo, budget):
    target, drafter, refs = pair
    res = generate(target, PROMPTS, NEW_TOKENS, algo, drafter, budget=budget)
    assert res.output_ids == refs
    assert all(len(a) > 0 for a in res.accept_lens)


@pytest.mark.parametrize("algo,budget", [("dflash", 0), ("ddtree", 8), ("ddtree", 40)])
def test_greedy_with_a_drafter_forced_right(pair, algo, budget):
    target, drafter, refs = pair
    vocab, block = target.config.vocab_size, drafter.config.block_size
    oracle = OracleDrafter([p + r for p, r in zip(PROMPTS, refs)], vocab, block, right=0.85)
    res = generate(target, PROMPTS, NEW_TOKENS, algo, oracle, budget=budget)
    assert res.output_ids == refs
    deepest = max(a for per_request in res.accept_lens for a in per_request)
    assert res.mean_accept_len > 2.0 and deepest >= min(block - 1, 4), (res.mean_accept_len, deepest)


def test_sampling_follows_the_target_end_to_end(tmp_path):
    """Joint distribution of the first two sampled tokens (the second comes from a verify pass: an
    accepted draft or the bonus) against transformers' probabilities, 3000 requests in one batch."""
    from scipy.stats import chisquare

    V = 7
    hf = save_tiny_target(tmp_path / "t", tiny_target_config(layer_types=(LIN, FULL), vocab=V), seed=3)
    init_draft(tmp_path / "t", tmp_path / "d", num_layers=1, block_size=4, taps=2, seed=2)
    drafter = DFlashDrafter.from_pretrained(tmp_path / "d")
    target = Qwen3_5Target.from_pretrained(tmp_path / "t", tap_layers=drafter.config.target_layer_ids)
    prompt, T = [1, 2, 3], 0.9
    with torch.no_grad():
        p1 = torch.softmax(hf(torch.tensor([prompt])).logits[0, -1] / T, -1)
        p2 = torch.softmax(hf(torch.tensor([prompt + [t] for t in range(V)])).logits[:, -1] / T, -1)
    expected = (p1[:, None] * p2).flatten().double().numpy()
    expected /= expected.sum()  # float32 softmax rounding; chisquare wants equal totals
    R = 3000
    for algo, budget in [("ddtree", 10), ("dflash", 0)]:
        res = generate(target, [prompt] * R, 2, algo, drafter, budget=budget, temperature=T, seed=7)
        counts = np.bincount([o[0] * V + o[1] for o in res.output_ids], minlength=V * V)
        live = expected * R > 5
        tail = counts[~live].sum(), expected[~live].sum() * R
        stat = chisquare(np.append(counts[live], tail[0]), np.append(expected[live], expected[~live].sum()) * R)
        assert stat.pvalue > 1e-3, (algo, stat)
        assert any(a > 0 for per_request in res.accept_lens for a in per_request)


def test_pair_mismatches_are_refused(tmp_path):
    save_tiny_target(tmp_path / "t", tiny_target_config(layer_types=(LIN, FULL, LIN)))
    init_draft(tmp_path / "t", tmp_path / "d", num_layers=1, block_size=4, taps=2)
    target = TargetConfig.from_dict(read_config(tmp_path / "t"))
    good = read_config(tmp_path / "d")
    check_pair(target, DraftConfig.from_dict(good))
    cases = {
        "hidden size": {"hidden_size": 64},
        "vocab size": {"vocab_size": 50},
        "out of range": {"dflash_config": {**good["dflash_config"], "target_layer_ids": [0, 3]}},
        "drafts no token": {"dflash_config": {**good["dflash_config"], "block_size": 1}},
    }
    for message, change in cases.items():
        with pytest.raises(PairError, match=message):
            check_pair(target, DraftConfig.from_dict({**good, **change}))
    with pytest.raises(PairError, match="out of range"):
        Qwen3_5Target.from_pretrained(tmp_path / "t", tap_layers=(3,))


def test_conditional_generation_config_reads_the_text_part():
    text = tiny_target_config(layer_types=(LIN, FULL)).to_dict()
    c = TargetConfig.from_dict(
        {"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": text, "tie_word_embeddings": True}
    )
    assert c.layer_types == (LIN, FULL) and c.tie_word_embeddings and c.rotary_dim == 8


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: runs the models through the Triton kernels")
def test_cuda_generate_equals_transformers(tmp_path):
    """Head dims of 16/32 so that every Triton kernel (not a reference fallback) runs inside the models."""
    cfg = tiny_target_config(layer_types=(LIN, FULL, LIN, LIN), hidden=64, head_dim=32, gdn_heads=(2, 4), gdn_dims=(16, 32))
    hf = save_tiny_target(tmp_path / "t", cfg, seed=11)
    init_draft(tmp_path / "t", tmp_path / "d", num_layers=2, block_size=16, taps=3, seed=3)
    drafter = DFlashDrafter.from_pretrained(tmp_path / "d", device="cuda")
    target = Qwen3_5Target.from_pretrained(tmp_path / "t", tap_layers=drafter.config.target_layer_ids, device="cuda")
    refs = [
        hf.generate(torch.tensor([p]), max_new_tokens=48, min_new_tokens=48, do_sample=False)[0, len(p) :].tolist()
        for p in PROMPTS
    ]
    sequences = [p + r for p, r in zip(PROMPTS, refs)]
    oracle = OracleDrafter(sequences, cfg.vocab_size, 16, right=0.85)  # host-side logic: eager only
    # DDTREE 32 and 64: 33 and 65 nodes, which the blocked tree GDN verify takes as the root and then whole blocks;
    # DDTREE 128: the ancestor-gather GDN verify (`gather_tables`), graphed and with long accepted paths
    for algo, budget, draft, graphs in [("ar", 0, drafter, True), ("dflash", 0, drafter, True), ("ddtree", 32, drafter, True),
                                        ("ddtree", 24, drafter, False), ("ddtree", 64, oracle, False),
                                        ("ddtree", 128, drafter, True), ("ddtree", 128, oracle, False)]:  # fmt: skip
        res = generate(target, PROMPTS, 48, algo, draft, budget=budget, cuda_graphs=graphs)
        assert res.output_ids == refs, (algo, budget, graphs)


def test_taps_are_transformers_hidden_states(tmp_path):
    """Tapped layer l = transformers' hidden_states[l + 1], the last layer's included (after the final norm there)."""
    cfg = tiny_target_config(layer_types=(LIN, FULL, LIN))
    hf = save_tiny_target(tmp_path / "t", cfg, seed=4)
    target = Qwen3_5Target.from_pretrained(tmp_path / "t", tap_layers=(0, 1, 2))
    ids = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    with torch.no_grad():
        states = hf(ids, output_hidden_states=True).hidden_states
    out = target.verify(target.new_cache(1, 16), chain_tree(ids[:, 1:], ids[:, 0]), torch.tensor([0]), torch.tensor([0]))
    torch.testing.assert_close(out.taps, torch.cat([states[1], states[2], states[3]], -1), rtol=1e-4, atol=1e-4)


def test_default_taps_follow_z_lab_and_stay_distinct_on_small_targets():
    from sglang_dflash.models import default_target_layer_ids as taps

    assert taps(64, 5) == [1, 16, 31, 46, 61] and taps(36, 5) == [1, 9, 17, 25, 33]
    assert taps(8, 4) == [1, 2, 4, 5] and taps(2, 2) == [0, 1] and taps(4, 3) == [0, 2, 3]
    assert taps(3, 5) == [0, 0, 1, 2, 2]  # more taps than layers: repeats are the only way
    with pytest.raises(PairError):
        taps(4, 0)


TIERS = (1, 4, 16, 41)  # node counts, the root included: plain decoding up to a budget-40 tree


@pytest.mark.parametrize(
    "case, seconds",
    [
        ("never-pays", (1.0, 10.0, 40.0, 100.0)),  # R x N tokens cost far more than they can bring
        ("wider-is-cheaper", (4.0, 3.0, 2.0, 1.0)),  # the widest tier wins every step
        ("linear", (1.0, 1.3, 2.2, 4.0)),  # the width follows the drafted trees' acceptance probabilities
    ],
)
def test_budget_control_is_lossless(pair, case, seconds):
    """DDTREE with a BudgetControl emits the target's greedy tokens whatever width each step verifies. The first step
    decodes plainly (no tree drafted yet); where speculation never pays, every step does; where the widest tier
    always wins, every later step verifies the whole tree."""
    from sglang_dflash.budget import BudgetControl, VerifyCost

    target, drafter, refs = pair
    vocab, block = target.config.vocab_size, drafter.config.block_size
    oracle = lambda: OracleDrafter([p + r for p, r in zip(PROMPTS, refs)], vocab, block, right=0.85)  # noqa: E731
    R = len(PROMPTS)
    control = BudgetControl(VerifyCost(tuple(R * n for n in TIERS), seconds), TIERS)
    res = generate(target, PROMPTS, NEW_TOKENS, "ddtree", oracle(), budget_control=control)
    assert res.output_ids == refs
    assert set(res.verify_nodes) <= set(TIERS) and res.verify_nodes[0] == 1
    if case == "never-pays":
        assert set(res.verify_nodes) == {1} and all(a == 0 for per_request in res.accept_lens for a in per_request)
    if case == "wider-is-cheaper":
        assert set(res.verify_nodes[1:]) == {TIERS[-1]} and res.mean_accept_len > 2.0


def test_budget_control_is_for_marginal_trees(pair):
    from sglang_dflash.budget import BudgetControl, VerifyCost

    target, drafter, _ = pair
    control = BudgetControl(VerifyCost((3, 12), (1.0, 2.0)), (1, 4))
    with pytest.raises(ValueError, match="DDTREE with trees of the drafter's marginals"):
        generate(target, PROMPTS, 4, "dflash", drafter, budget_control=control)
    short = BudgetControl(VerifyCost((2,), (1.0,)), (1, 4))  # 3 requests x 1 node are past its table
    with pytest.raises(ValueError, match="stops short of 3 requests x 1 nodes"):
        generate(target, PROMPTS, 4, "ddtree", drafter, budget_control=short)
