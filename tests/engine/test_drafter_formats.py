"""DFlash2 and DSpark drafters in the standalone engine: random checkpoints of each format (init_draft) load from
their own config.json, draft chains and trees in their own way (`proposal.propose`), and the output stays the
target's: greedy equal to transformers' own generate for DFLASH and DDTREE with conditional and marginal scoring.
Configs that are not one of the formats, or mix them, are refused in one line."""

from __future__ import annotations

import math

import pytest
import torch
from model_helpers import save_tiny_target, tiny_target_config

from sglang_dflash.engine import generate
from sglang_dflash.init_draft import init_draft
from sglang_dflash.models import PairError
from sglang_dflash.models.config import DraftConfig, read_config
from sglang_dflash.models.dflash_draft import DFlashDrafter

LIN, FULL = "linear_attention", "full_attention"
NEW_TOKENS = 24
PROMPTS = [[5, 6, 7, 8, 9], [3, 4, 90, 12, 5, 67, 1, 2, 3, 4, 5], [42]]
FORMATS = {  # name: (format, heads, block_size)
    "dflash-conv": ("dflash", dict(conv_kernel_size=3, conv_group_size=8), 6),
    "dflash2": ("dflash2", dict(conv_kernel_size=4, conv_group_size=16, selector_rank=8, selector_top_k=5), 6),
    "dflash2-noconv": ("dflash2", dict(selector_rank=4, selector_top_k=3), 5),
    "dspark-vanilla": ("dspark", dict(markov_rank=8, markov_head_type="vanilla"), 5),
    "dspark-gated": ("dspark", dict(markov_rank=8, markov_head_type="gated", enable_confidence_head=True), 4),
    "dspark-rnn": ("dspark", dict(markov_rank=6, markov_head_type="rnn"), 5),
}


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    root = tmp_path_factory.mktemp("target")
    hf = save_tiny_target(root, tiny_target_config(layer_types=(LIN, FULL, LIN)), seed=3)
    refs = []
    for p in PROMPTS:
        out = hf.generate(torch.tensor([p]), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
        refs.append(out[0, len(p) :].tolist())
    from sglang_dflash.models import Qwen3_5Target

    return root, refs, Qwen3_5Target


@pytest.fixture(scope="module", params=sorted(FORMATS))
def drafter(request, target, tmp_path_factory):
    fmt, heads, block = FORMATS[request.param]
    out = tmp_path_factory.mktemp(request.param)
    init_draft(target[0], out, num_layers=2, block_size=block, taps=2, seed=5, format=fmt, heads=heads)
    return DFlashDrafter.from_pretrained(out)  # strict load: every tensor of the format, nothing else


@pytest.mark.parametrize("algo, budget, scoring", [("dflash", 0, "conditional"), ("ddtree", 6, "conditional"),
                                                   ("ddtree", 20, "conditional"), ("ddtree", 6, "marginal")])  # fmt: skip
def test_greedy_equals_transformers(target, drafter, algo, budget, scoring):
    root, refs, Qwen3_5Target = target
    model = Qwen3_5Target.from_pretrained(root, tap_layers=drafter.config.target_layer_ids)
    res = generate(model, PROMPTS, NEW_TOKENS, algo, drafter, budget=budget, scoring=scoring)
    assert res.output_ids == refs
    if algo == "dflash":  # a DSpark chain drafts from the anchor's row too: block_size tokens
        assert drafter.config.num_depths == drafter.config.block_size - (drafter.config.format != "dspark")


def test_formats_load_their_modules(drafter):
    c, names = drafter.config, {n for n, _ in drafter.named_parameters()}
    assert ("layers.0.attention_conv.base_kernel" in names) == bool(c.conv_kernel_size)
    assert ("candidate_selector.predecessor_codebook" in names) == (c.format == "dflash2")
    assert ("markov_head.markov_w1.weight" in names) == (c.format == "dspark")
    assert ("confidence_head.proj.weight" in names) == c.confidence_head


def base_config(tmp_path, fmt="dflash", heads=None):
    save_tiny_target(tmp_path / "t", tiny_target_config(layer_types=(LIN, FULL)))
    init_draft(tmp_path / "t", tmp_path / "d", num_layers=1, block_size=4, taps=1, format=fmt, heads=heads)
    return read_config(tmp_path / "d")


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(architectures=["DFlashLagunaForCausalLM"]), "supported are one of"),
        (dict(architectures=["DFlashDraftModel", "Other"]), "supported are one of"),
        (dict(architectures=["DFlash2DraftModel"]), "candidate selector"),
        (dict(architectures=["DSparkDraftModel"]), "Markov head"),
        (dict(hidden_act="gelu"), "hidden_act"),
        (dict(quantization_config={}), "quantization_config"),
        (dict(sample_from_anchor=False), "sample_from_anchor"),
        (dict(dspark_block_size=7), "bundled dspark"),
        ({"dflash_config": dict(conv_kernel_size=4)}, "both or neither"),
        ({"dflash_config": dict(selector_rank=4)}, "both or neither"),
        ({"dflash_config": dict(conv_kernel_size=4, conv_group_size=7)}, "must divide"),
        ({"dflash_config": dict(projector_type="domino")}, "projector_type"),
        ({"dflash_config": dict(markov_rank=4, markov_head_type="vanilla")}, "Markov head"),
    ],
)
def test_unsupported_configs_are_refused(tmp_path, change, message):
    cfg = base_config(tmp_path)
    cfg = {**cfg, **{k: v for k, v in change.items() if k != "dflash_config"}}
    cfg["dflash_config"] = {**cfg["dflash_config"], **change.get("dflash_config", {})}
    with pytest.raises(PairError, match=message):
        DraftConfig.from_dict(cfg)


def test_chains_by_hand(target, drafter):
    """Each format's DFLASH chain, recomputed step by step from the drafter's rows: the argmax of the logits
    (DFlash), of the logits plus the Markov bias of the token drafted before (DSpark), of the selector's score among
    the top selector_top_k given the token drafted before (DFlash2)."""
    from sglang_dflash.proposal import markov_chain, selector_chain

    c = drafter.config
    if c.format == "dflash":
        pytest.skip("DFlash's chain is the argmax of each depth (greedy_chain, tests/test_ddtree.py)")
    g = torch.Generator().manual_seed(1)
    R, D, V = 2, c.num_depths, c.vocab_size
    hidden, logits, roots = torch.randn(R, D, c.hidden_size, generator=g), torch.randn(R, D, V, generator=g), torch.tensor([4, 9])
    got = (selector_chain if c.format == "dflash2" else markov_chain)(drafter, hidden, logits, roots)
    for r in range(R):
        prev, state = int(roots[r]), None
        for d in range(D):
            if c.format == "dflash2":
                sel, top = drafter.candidate_selector, logits[r, d].topk(c.selector_top_k).indices.tolist()
                q = sel.hidden_projection.weight @ hidden[r, d]
                score = {
                    t: float(logits[r, d, t]) + float((sel.predecessor_codebook[prev] * q * sel.successor_codebook[t]).sum())
                    for t in top
                }
                prev = max(top, key=lambda t: score[t])
            else:
                bias, state = drafter.markov_head.bias(torch.tensor([prev]), hidden[r, d][None], state)
                prev = int((logits[r, d] + bias[0].float()).argmax())
            assert int(got[r, d]) == prev, (r, d)


def test_dspark_settings(tmp_path):
    cfg = base_config(tmp_path, "dspark", dict(markov_rank=4, markov_head_type="Gated"))
    c = DraftConfig.from_dict(cfg)
    assert (c.format, c.markov_head_type, c.markov_rank, c.num_depths) == ("dspark", "gated", 4, 4)
    assert DraftConfig.from_dict({**cfg, "markov_rank": 4}).markov_rank == 4  # the top level may repeat it
    with pytest.raises(PairError, match="nested"):
        DraftConfig.from_dict({**cfg, "markov_rank": 8})
    with pytest.raises(PairError, match="markov_head_type"):
        DraftConfig.from_dict({**cfg, "dflash_config": {**cfg["dflash_config"], "markov_head_type": "lstm"}})
    nested = {**cfg, "dspark_config": {"markov_rank": 4, "markov_head_type": "rnn", "output_multiplier": 2.0}}
    c = DraftConfig.from_dict(nested)  # dspark_config overrides dflash_config; DSpark's logits are the head's own
    assert (c.markov_head_type, c.output_multiplier) == ("rnn", 1.0)


def test_conditional_scores_from_the_heads_by_hand(target, drafter):
    """The (candidates, first, step) that the tree is built from, recomputed element by element in float64 from the
    heads' parameters: the selector's sum over its rank (DFlash2), the Markov bias W2[c] . w1[prev] (vanilla DSpark),
    normalised over the K candidates, plus the log of the K's probability under the depth's own softmax."""
    from sglang_dflash.proposal import markov_heads, selector_heads

    c = drafter.config
    if c.format == "dflash" or c.markov_head_type in ("gated", "rnn"):
        pytest.skip("no conditional head here (gated: its gate is checked in the heads' own tests; rnn: marginal trees)")
    g = torch.Generator().manual_seed(0)
    R, D, V, H = 2, c.num_depths, c.vocab_size, c.hidden_size
    hidden, logits, roots = torch.randn(R, D, H, generator=g), torch.randn(R, D, V, generator=g), torch.tensor([3, 7])
    budget = 4
    heads = selector_heads if c.format == "dflash2" else markov_heads
    cand, first, step = heads(drafter, hidden, logits, roots, budget)
    K = cand.shape[2]

    def raw(r, d, prev, child):  # the unnormalised score of candidate `child` at depth d + 1 after token `prev`
        tok = int(cand[r, d, child])
        if c.format == "dflash2":
            sel = drafter.candidate_selector
            q = [
                sum(float(sel.hidden_projection.weight[j, h]) * float(hidden[r, d, h]) for h in range(H))
                for j in range(c.selector_rank)
            ]
            edge = sum(
                float(sel.predecessor_codebook[prev, j]) * q[j] * float(sel.successor_codebook[tok, j])
                for j in range(c.selector_rank)
            )
            return float(logits[r, d, tok]) + edge
        w1, w2 = drafter.markov_head.markov_w1.weight, drafter.markov_head.markov_w2.weight
        return float(logits[r, d, tok]) + sum(float(w2[tok, j]) * float(w1[prev, j]) for j in range(c.markov_rank))

    def log_sum_exp(xs):
        m = max(xs)
        return m + torch.tensor([x - m for x in xs], dtype=torch.float64).exp().sum().log().item()

    def log_softmax(xs):
        z = log_sum_exp(xs)
        return [x - z for x in xs]

    def log_mass(r, d):  # log P(depth d + 1's token is one of its K candidates) under the drafter's marginals
        row = [float(x) for x in logits[r, d]]
        return log_sum_exp([row[int(t)] for t in cand[r, d]]) - log_sum_exp(row)

    for r in range(R):
        expected = [x + log_mass(r, 0) for x in log_softmax([raw(r, 0, int(roots[r]), k) for k in range(K)])]
        torch.testing.assert_close(first[r].double(), torch.tensor(expected, dtype=torch.float64), rtol=1e-4, atol=1e-4)
        for d in range(1, D):
            for p in range(K):
                scores = log_softmax([raw(r, d, int(cand[r, d - 1, p]), k) for k in range(K)])
                expected = [x + log_mass(r, d) for x in scores]
                torch.testing.assert_close(
                    step[r, d - 1, p].double(), torch.tensor(expected, dtype=torch.float64), rtol=1e-4, atol=1e-4
                )


def test_scores_are_log_probabilities_where_the_candidates_hold_all_the_mass(target, drafter):
    """Drafter logits with as many finite tokens a depth as the head has candidates, one far ahead: the candidates'
    log-mass and that one's score among them are 0 up to float32 rounding, which puts some rows a few 1e-7 above 0
    unless clamped, and a score above 0 would let a child outscore its parent. Every score <= 0, and the tree has
    each parent before its child."""
    from sglang_dflash.proposal import draft, markov_heads, selector_heads, uses_heads

    c = drafter.config
    if not uses_heads(c, "ddtree"):
        pytest.skip("no conditional head here")
    K = c.selector_top_k if c.format == "dflash2" else 6  # DSpark: min(budget, V) candidates
    g = torch.Generator().manual_seed(2)
    R, D, V = 8, c.num_depths, c.vocab_size
    hidden, logits = torch.randn(R, D, c.hidden_size, generator=g), 2 * torch.randn(R, D, V, generator=g)
    live = torch.rand(R, D, V, generator=g).argsort(-1)[..., :K]
    logits = torch.full_like(logits, -math.inf).scatter_(2, live, logits.gather(2, live))
    logits.scatter_add_(2, live[..., :1], torch.full((R, D, 1), 20.0))  # one far ahead: its own score ~ 0 too
    roots = torch.arange(R)
    _, first, step = (selector_heads if c.format == "dflash2" else markov_heads)(drafter, hidden, logits, roots, 6)
    assert first.max() <= 0 and step.max() <= 0
    tree = draft(drafter, hidden, logits, roots, "ddtree", 6)
    assert all(0 <= p < i for row in tree.parents.tolist() for i, p in enumerate(row) if i)


def test_heads_that_add_nothing_give_ddtrees_tree(target, drafter):
    """A conditional head whose bias is zero (DFlash2's successor codebook, DSpark's W2 zeroed) must score every
    prefix by the product of its depths' marginals: the tree is DDTree's own (build_ddtree, tested against brute force
    over paths) for the same logits, path for path. K >= budget, so every token DDTree could pick is a candidate."""
    import copy

    from sglang_dflash.ddtree import build_ddtree
    from sglang_dflash.proposal import draft, uses_heads

    c = drafter.config
    if not uses_heads(c, "ddtree"):
        pytest.skip("no conditional head here: the tree is DDTree's by construction")
    zeroed = copy.deepcopy(drafter)
    with torch.no_grad():
        if c.format == "dflash2":
            zeroed.candidate_selector.successor_codebook.zero_()
        else:
            zeroed.markov_head.markov_w2.weight.zero_()
    budget = min(c.selector_top_k, 6) if c.format == "dflash2" else 6  # DDTree uses <= budget tokens per depth
    g = torch.Generator().manual_seed(1)
    R, D = 3, c.num_depths
    hidden, logits = torch.randn(R, D, c.hidden_size, generator=g), 2 * torch.randn(R, D, c.vocab_size, generator=g)
    roots = torch.tensor([3, 7, 11])

    def paths(tree):
        out = []
        for r in range(R):
            parent, tok = tree.parents[r].tolist(), tree.token_ids[r].tolist()

            def path(i):
                return () if i == 0 else path(parent[i]) + (tok[i],)

            out.append(sorted(path(i) for i in range(1, len(tok))))
        return out

    got = draft(zeroed, hidden, logits, roots, "ddtree", budget)
    assert paths(got) == paths(build_ddtree(logits, roots, budget))
    if c.format == "dspark":  # the head with its trained-looking random W2 does change the tree here
        assert paths(draft(drafter, hidden, logits, roots, "ddtree", budget)) != paths(got)
