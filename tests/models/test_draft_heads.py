"""draft_heads against element-by-element loops in float64: the DFlash2 grouped conv (causal per block, identity
at init), the candidate selector's edge and conditional scores, the DSpark Markov heads (vanilla, gated, two rnn
steps), bias at candidates only, the confidence head; checkpoint names; bad shapes raise ValueError."""

from __future__ import annotations

import math

import pytest
import torch

from sglang_dflash.models.draft_heads import (
    CandidateSelector,
    ConfidenceHead,
    GatedMarkov,
    GroupedConv,
    RNNMarkov,
    VanillaMarkov,
    chain_predecessors,
    markov_head,
    selector_scores,
)


def randomise(module, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.7)
    return module.double()


def sig(x):
    return 1.0 / (1.0 + math.exp(-x))


# --- grouped conv ---


def conv_loop(conv, x, z, side):
    """out[r,n,c] = sum_t [n>=t] (base[side,t,c] + proj(x)[r,n,side,t,c//gs]) * z[r,n-t,c], one element at a time."""
    R, B, H = x.shape
    T, G, gs = conv.taps, conv.groups, conv.group_size
    W, base = conv.kernel_projection.weight.tolist(), conv.base_kernel.tolist()
    out = torch.zeros(R, B, H, dtype=torch.float64)
    for r in range(R):
        for n in range(B):
            xs = x[r, n].tolist()
            for t in range(T):
                if n - t < 0:
                    continue
                for c in range(H):
                    row = side * T * G + t * G + c // gs
                    delta = sum(W[row][i] * xs[i] for i in range(H))
                    out[r, n, c] += (base[side][t][c] + delta) * float(z[r, n - t, c])
    return out


@pytest.mark.parametrize("H, T, gs, B", [(6, 3, 2, 5), (4, 1, 4, 3), (8, 4, 1, 3), (6, 2, 3, 1)])
def test_grouped_conv_by_loop(H, T, gs, B):
    conv = randomise(GroupedConv(H, T, gs), seed=H * 10 + T)
    assert conv.base_kernel.shape == (2, T, H) and conv.kernel_projection.weight.shape == (2 * T * (H // gs), H)
    assert conv.kernel_projection.bias is None
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(2, B, H, generator=g, dtype=torch.float64), torch.randn(2, B, H, generator=g, dtype=torch.float64)
    with torch.no_grad():
        xc, coeff = conv.prepare(x)
        yc = conv.finish(y, coeff)
    torch.testing.assert_close(xc, conv_loop(conv, x, x, 0))
    torch.testing.assert_close(yc, conv_loop(conv, x, y, 1))  # output side: kernel from the input x, applied to y


def test_grouped_conv_causal_in_block():
    H, T, gs, B = 6, 3, 3, 6
    conv = randomise(GroupedConv(H, T, gs), seed=3)
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(2, B, H, generator=g, dtype=torch.float64), torch.randn(2, B, H, generator=g, dtype=torch.float64)
    with torch.no_grad():
        xc, coeff = conv.prepare(x)
        yc = conv.finish(y, coeff)
        x2, y2 = x.clone(), y.clone()
        x2[:, 4] += 1.0
        y2[:, 4] -= 2.0
        xc2, coeff2 = conv.prepare(x2)
        yc2 = conv.finish(y2, coeff2)
        # the first token sees only itself: its base tap-0 coefficient plus its own delta (zero padding before the block)
        W0 = conv.kernel_projection.weight[: conv.groups]  # side 0, tap 0
        first = (conv.base_kernel[0, 0] + (x[:, 0] @ W0.T).repeat_interleave(gs, -1)) * x[:, 0]
    torch.testing.assert_close(xc2[:, :4], xc[:, :4], rtol=0, atol=0)
    torch.testing.assert_close(yc2[:, :4], yc[:, :4], rtol=0, atol=0)
    assert not torch.allclose(xc2[:, 4:], xc[:, 4:]) and not torch.allclose(yc2[:, 4:], yc[:, 4:])
    torch.testing.assert_close(xc[:, 0], first)
    # requests do not mix
    torch.testing.assert_close(conv.prepare(x[1:])[0].detach(), xc[1:])


def test_grouped_conv_identity_init():
    conv = GroupedConv(8, 4, 2)
    assert conv.base_kernel[:, 0].eq(1).all() and conv.base_kernel[:, 1:].eq(0).all()
    with torch.no_grad():
        conv.kernel_projection.weight.zero_()
    x, y = torch.randn(3, 5, 8), torch.randn(3, 5, 8)
    xc, coeff = conv.prepare(x)
    assert coeff.shape == (3, 5, 4, 4)
    torch.testing.assert_close(xc, x, rtol=0, atol=0)
    torch.testing.assert_close(conv.finish(y, coeff), y, rtol=0, atol=0)


def test_grouped_conv_errors():
    with pytest.raises(ValueError, match="does not divide"):
        GroupedConv(10, 3, 4)
    with pytest.raises(ValueError, match=">= 1"):
        GroupedConv(8, 0, 2)
    conv = GroupedConv(8, 2, 4)
    with pytest.raises(ValueError, match="prepare"):
        conv.prepare(torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match="prepare"):
        conv.prepare(torch.randn(3, 8))
    _, coeff = conv.prepare(torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match="finish"):
        conv.finish(torch.randn(2, 4, 8), coeff)
    assert set(conv.state_dict()) == {"base_kernel", "kernel_projection.weight"}


# --- candidate selector ---


def test_selector_edge_scores_by_loop():
    V, H, r, R, D, K, P = 11, 5, 3, 2, 3, 4, 2
    sel = randomise(CandidateSelector(V, H, r), seed=5)
    assert set(sel.state_dict()) == {"predecessor_codebook", "successor_codebook", "hidden_projection.weight"}
    assert sel.predecessor_codebook.shape == sel.successor_codebook.shape == (V, r) and sel.hidden_projection.weight.shape == (
        r,
        H,
    )
    g = torch.Generator().manual_seed(6)
    hidden = torch.randn(R, D, H, generator=g, dtype=torch.float64)
    cand, prev = torch.randint(V, (R, D, K), generator=g), torch.randint(V, (R, D, P), generator=g)
    with torch.no_grad():
        edge = sel.edge_scores(hidden, cand, prev)
    A, Bc, Pw = sel.predecessor_codebook.tolist(), sel.successor_codebook.tolist(), sel.hidden_projection.weight.tolist()
    want = torch.zeros(R, D, P, K, dtype=torch.float64)
    for i in range(R):
        for d in range(D):
            q = [sum(Pw[j][c] * float(hidden[i, d, c]) for c in range(H)) for j in range(r)]
            for p in range(P):
                for k in range(K):
                    want[i, d, p, k] = sum(A[prev[i, d, p]][j] * q[j] * Bc[cand[i, d, k]][j] for j in range(r))
    torch.testing.assert_close(edge, want)

    unary = torch.randn(R, D, K, generator=g, dtype=torch.float64)
    scores = selector_scores(unary, edge)
    assert scores.shape == (R, D, P, K) and scores.dtype == torch.float64
    torch.testing.assert_close(scores.exp().sum(-1), torch.ones(R, D, P, dtype=torch.float64))
    for i in range(R):
        for d in range(D):
            for p in range(P):
                s = [float(unary[i, d, k] + want[i, d, p, k]) for k in range(K)]
                lse = math.log(sum(math.exp(v) for v in s))
                for k in range(K):
                    assert scores[i, d, p, k].item() == pytest.approx(s[k] - lse, abs=1e-12)
    half = selector_scores(unary, edge, temperature=0.5)
    torch.testing.assert_close(half, torch.log_softmax(2 * (unary[:, :, None] + edge), -1))


def test_chain_predecessors_and_selector_errors():
    cand = torch.arange(24).view(2, 3, 4)
    prev = chain_predecessors(torch.tensor([100, 200]), cand)
    assert prev[:, 0].tolist() == [[100] * 4, [200] * 4] and torch.equal(prev[:, 1:], cand[:, :2])
    sel = CandidateSelector(30, 4, 2)
    with pytest.raises(ValueError, match="edge_scores"):
        sel.edge_scores(torch.randn(2, 3, 4), cand, prev[:, :2])
    with pytest.raises(ValueError, match="selector_scores"):
        selector_scores(torch.randn(2, 3, 4), torch.randn(2, 3, 2, 5))
    with pytest.raises(ValueError, match="selector rank"):
        CandidateSelector(30, 4, 0)


# --- markov heads ---


def matvec(W, v):
    return [sum(W[i][j] * v[j] for j in range(len(v))) for i in range(len(W))]


def test_markov_factory_and_names():
    assert isinstance(markov_head("Vanilla", 7, 4, 2), VanillaMarkov)
    assert isinstance(markov_head("GATED", 7, 4, 2), GatedMarkov) and isinstance(markov_head("rnn", 7, 4, 2), RNNMarkov)
    with pytest.raises(ValueError, match="markov_head_type"):
        markov_head("lstm", 7, 4, 2)
    with pytest.raises(ValueError, match="rank"):
        markov_head("vanilla", 7, 4, 0)
    base = {"markov_w1.weight": (7, 2), "markov_w2.weight": (7, 2)}
    shapes = lambda m: {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes(markov_head("vanilla", 7, 4, 2)) == base
    assert shapes(markov_head("gated", 7, 4, 2)) == {**base, "gate_proj.weight": (2, 6), "gate_proj.bias": (2,)}
    assert shapes(markov_head("rnn", 7, 4, 2)) == {**base, "joint_proj.weight": (6, 8), "joint_proj.bias": (6,)}


def test_vanilla_and_gated_by_hand():
    V, H, r = 7, 3, 2
    prev = torch.tensor([[3, 0], [6, 3]])
    hidden = torch.randn(2, 2, H, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    for kind in ("vanilla", "gated"):
        head = randomise(markov_head(kind, V, H, r), seed=8)
        with torch.no_grad():
            bias, state = head.bias(prev, hidden)
        assert bias.shape == (2, 2, V) and state is None and head.init_state(hidden) is None
        w1, W2 = head.markov_w1.weight.tolist(), head.markov_w2.weight.tolist()
        for i in range(2):
            for j in range(2):
                e = w1[prev[i, j]]
                if kind == "gated":
                    Wg, bg = head.gate_proj.weight.tolist(), head.gate_proj.bias.tolist()
                    x = hidden[i, j].tolist() + e  # [h ; e]
                    e = [sig(v + b) * ej for v, b, ej in zip(matvec(Wg, x), bg, e)]
                want = matvec(W2, e)
                assert bias[i, j].tolist() == pytest.approx(want, abs=1e-12)


def test_rnn_two_steps_by_hand():
    V, H, r = 6, 3, 2
    head = randomise(markov_head("rnn", V, H, r), seed=9)
    g = torch.Generator().manual_seed(10)
    h1, h2 = torch.randn(2, H, generator=g, dtype=torch.float64), torch.randn(2, H, generator=g, dtype=torch.float64)
    p1, p2 = torch.tensor([2, 5]), torch.tensor([4, 4])
    with torch.no_grad():
        s0 = head.init_state(h1)
        b1, s1 = head.bias(p1, h1, s0)
        b2, s2 = head.bias(p2, h2, s1)
        b1_none, s1_none = head.bias(p1, h1)  # no state: starts from zeros
    assert s0.shape == (2, r) and s0.eq(0).all()
    torch.testing.assert_close(b1_none, b1, rtol=0, atol=0)
    torch.testing.assert_close(s1_none, s1, rtol=0, atol=0)
    w1, W2 = head.markov_w1.weight.tolist(), head.markov_w2.weight.tolist()
    Wj, bj = head.joint_proj.weight.tolist(), head.joint_proj.bias.tolist()
    for i in range(2):
        s = [0.0] * r
        for prev, h, got_b, got_s in ((p1, h1, b1, s1), (p2, h2, b2, s2)):
            pre = [v + b for v, b in zip(matvec(Wj, s + w1[prev[i]] + h[i].tolist()), bj)]  # [s ; e ; h]
            a, b, o = pre[:r], pre[r : 2 * r], pre[2 * r :]
            gate = [sig(v) for v in a]
            s = [gk * sk + (1 - gk) * math.tanh(bk) for gk, sk, bk in zip(gate, s, b)]
            assert got_b[i].tolist() == pytest.approx(matvec(W2, [math.tanh(v) for v in o]), abs=1e-12)
            assert got_s[i].tolist() == pytest.approx(s, abs=1e-12)


@pytest.mark.parametrize("kind", ["vanilla", "gated", "rnn"])
def test_bias_at_is_the_full_bias_gathered(kind):
    V, H, r = 13, 4, 3
    head = randomise(markov_head(kind, V, H, r), seed=11)
    g = torch.Generator().manual_seed(12)
    prev, hidden = torch.randint(V, (2, 3), generator=g), torch.randn(2, 3, H, generator=g, dtype=torch.float64)
    cand = torch.randint(V, (2, 3, 5), generator=g)
    state = torch.randn(2, 3, r, generator=g, dtype=torch.float64) if kind == "rnn" else None
    with torch.no_grad():
        full, s_full = head.bias(prev, hidden, state)
        at, s_at = head.bias_at(prev, hidden, cand, state)
    torch.testing.assert_close(at, full.gather(-1, cand))
    assert (s_full is None and s_at is None) or torch.equal(s_full, s_at)
    with pytest.raises(ValueError, match="cand"):
        head.bias_at(prev, hidden, cand[:1])
    with pytest.raises(ValueError, match="hidden"):
        head.bias(prev, hidden[..., :2])
    if kind == "rnn":
        with pytest.raises(ValueError, match="state"):
            head.bias(prev, hidden, torch.zeros(2, 3, r + 1, dtype=torch.float64))
    if kind != "vanilla":
        with pytest.raises(ValueError, match="needs the hidden"):
            head.bias(prev, None)


@pytest.mark.parametrize("kind", ["vanilla", "gated"])
def test_bias_matrix_is_the_full_bias_of_each_parent_gathered(kind):
    """bias_matrix's [.., P, K]: for each parent p, `bias` of that parent under the row's hidden, at the candidates."""
    V, H, r = 13, 4, 3
    head = randomise(markov_head(kind, V, H, r), seed=13)
    g = torch.Generator().manual_seed(14)
    prev, hidden = torch.randint(V, (2, 3, 4), generator=g), torch.randn(2, 3, H, generator=g, dtype=torch.float64)
    cand = torch.randint(V, (2, 3, 5), generator=g)
    with torch.no_grad():
        got = head.bias_matrix(prev, hidden, cand)
        for p in range(4):
            full, _ = head.bias(prev[..., p], hidden)
            torch.testing.assert_close(got[..., p, :], full.gather(-1, cand))
    with pytest.raises(ValueError, match="want"):
        head.bias_matrix(prev, hidden[:1], cand)


def test_bias_matrix_refuses_the_rnn_head():
    head = markov_head("rnn", 13, 4, 3)
    with pytest.raises(ValueError, match="whole path"):
        head.bias_matrix(torch.zeros(1, 2, dtype=torch.long), torch.zeros(1, 4), torch.zeros(1, 3, dtype=torch.long))


# --- confidence head ---


@pytest.mark.parametrize("with_markov", [True, False])
def test_confidence_head_by_hand(with_markov):
    H, r = 4, 3
    head = randomise(ConfidenceHead(H, r, with_markov), seed=13)
    assert {k: tuple(v.shape) for k, v in head.state_dict().items()} == {
        "proj.weight": (1, H + r * with_markov),
        "proj.bias": (1,),
    }
    g = torch.Generator().manual_seed(14)
    hidden = torch.randn(2, 5, H, generator=g, dtype=torch.float64) * 3
    emb = torch.randn(2, 5, r, generator=g, dtype=torch.float64) if with_markov else None
    with torch.no_grad():
        conf = head(hidden, emb)
        cooled = head(hidden, emb, torch.full((5,), 2.0))
    assert conf.shape == (2, 5) and ((conf > 0) & (conf < 1)).all()
    w, b = head.proj.weight[0].tolist(), head.proj.bias.item()
    for i in range(2):
        for j in range(5):
            x = hidden[i, j].tolist() + (emb[i, j].tolist() if with_markov else [])
            raw = sum(wk * xk for wk, xk in zip(w, x)) + b
            assert conf[i, j].item() == pytest.approx(sig(raw), abs=1e-12)
            assert cooled[i, j].item() == pytest.approx(sig(raw / 2), abs=1e-12)
    assert head(hidden.float(), None if emb is None else emb.float()).dtype == torch.float32
    with pytest.raises(ValueError, match="confidence head"):
        head(hidden[..., :3], emb)
    with pytest.raises(ValueError, match="prev_embedding"):
        head(hidden, None if with_markov else torch.zeros(2, 5, r, dtype=torch.float64))
