"""Extra drafter modules of SGLang 0.5.23's checkpoint formats, written from their math.

DFlash2 (`DFlash2DraftModel`; `conv_*` also on plain `DFlashDraftModel`):
- `GroupedConv`: `layers.{i}.{attention,mlp}_conv.*`, a dynamic depthwise conv causal inside each block, wrapped
  around a sublayer: `prepare` convolves its input, `finish` its output, both with kernels computed from the input.
- `CandidateSelector`: `candidate_selector.*`, a rank-r bilinear score of (previous token, candidate) at each depth,
  modulated by that depth's normed draft hidden; `selector_scores` turns it into log q(candidate | previous token).
DSpark (`Qwen3DSparkModel`, `LingDSparkModel`, `DSparkDraftModel`):
- `markov_head(kind, ...)`: `markov_head.*`, a logit bias [.., V] from the previous token (vanilla), gated by the step's
  draft hidden (gated), or through a recurrent state (rnn).
- `ConfidenceHead`: `confidence_head.*`, sigmoid acceptance probability of each draft token.
Shapes: H hidden, V vocab, r rank, B block, T conv taps, G = H / group_size groups, K candidates per depth.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _float(t: Tensor) -> Tensor:
    """t in float32, or wider if it already is."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


class GroupedConv(nn.Module):
    """Dynamic grouped conv of one sublayer: coefficient C[r,n,t,c] = base_kernel[s,t,c] + delta[r,n,s,t,c // gs], with
    delta = kernel_projection(x).view(R, B, 2, T, G) from the sublayer's input x; side s = 0 for `prepare`, 1 for
    `finish`. out[r,n,c] = sum_t [n >= t] C[r,n,t,c] z[r,n-t,c]: causal inside each block, zero before its start."""

    def __init__(self, hidden_size: int, kernel_size: int, group_size: int):
        super().__init__()
        _check(kernel_size >= 1 and group_size >= 1, f"conv kernel_size {kernel_size}, group_size {group_size}: must be >= 1")
        _check(hidden_size % group_size == 0, f"conv group_size {group_size} does not divide hidden_size {hidden_size}")
        self.hidden, self.taps, self.group_size, self.groups = hidden_size, kernel_size, group_size, hidden_size // group_size
        base = torch.zeros(2, kernel_size, hidden_size)
        base[:, 0] = 1.0  # identity: tap 0 passes the token through
        self.base_kernel = nn.Parameter(base)
        self.kernel_projection = nn.Linear(hidden_size, 2 * kernel_size * self.groups, bias=False)

    def _conv(self, z: Tensor, delta: Tensor, side: int) -> Tensor:
        """z [R, B, H], delta [R, B, T, G] -> [R, B, H]."""
        R, B, H = z.shape
        G, gs = self.groups, self.group_size
        zg, out = z.view(R, B, G, gs), torch.zeros(R, B, G, gs, dtype=torch.promote_types(z.dtype, delta.dtype), device=z.device)
        for t in range(min(self.taps, B)):  # a tap t >= B only ever reaches the zero padding
            coeff = self.base_kernel[side, t].view(G, gs) + delta[:, :, t, :, None]  # [R, B, G, gs], by output row n
            shifted = F.pad(zg, (0, 0, 0, 0, t, 0))[:, :B]  # z[r, n - t], zero for n < t
            out = out + coeff * shifted
        return out.reshape(R, B, H).to(z.dtype)

    def prepare(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """x [R, B, H] (the normed sublayer input) -> (its conv [R, B, H], the output side's delta [R, B, T, G])."""
        _check(x.dim() == 3 and x.shape[-1] == self.hidden, f"GroupedConv.prepare: x {list(x.shape)}, want [R, B, {self.hidden}]")
        R, B, _ = x.shape
        delta = self.kernel_projection(x).view(R, B, 2, self.taps, self.groups)
        return self._conv(x, delta[:, :, 0], 0), delta[:, :, 1]

    def finish(self, y: Tensor, out_coeff: Tensor) -> Tensor:
        """y [R, B, H] (the sublayer output), out_coeff from `prepare` of its input -> conv of y [R, B, H]."""
        want = [*y.shape[:2], self.taps, self.groups]
        _check(y.dim() == 3 and y.shape[-1] == self.hidden and list(out_coeff.shape) == want,
               f"GroupedConv.finish: y {list(y.shape)}, out_coeff {list(out_coeff.shape)}; "
               f"want [R, B, {self.hidden}] and {want}")  # fmt: skip
        return self._conv(y, out_coeff, 1)


class CandidateSelector(nn.Module):
    """DFlash2's edge score edge[p, k] = sum_j A[prev_p, j] (P h)[j] Bc[cand_k, j] at each depth."""

    def __init__(self, vocab_size: int, hidden_size: int, rank: int):
        super().__init__()
        _check(rank >= 1, f"selector rank {rank}: must be >= 1")
        self.predecessor_codebook = nn.Parameter(torch.randn(vocab_size, rank) * 0.02)  # A [V, r]
        self.successor_codebook = nn.Parameter(torch.randn(vocab_size, rank) * 0.02)  # Bc [V, r]
        self.hidden_projection = nn.Linear(hidden_size, rank, bias=False)  # P [r, H]

    def edge_scores(self, hidden: Tensor, cand: Tensor, prev: Tensor) -> Tensor:
        """hidden [R, D, H] (normed draft hidden of each depth), cand [R, D, K], prev [R, D, P] token ids
        -> [R, D, P, K]: compatibility of previous token p with candidate k at each depth."""
        _check(hidden.dim() == 3 and cand.dim() == 3 and prev.dim() == 3 and hidden.shape[:2] == cand.shape[:2] == prev.shape[:2],
               f"edge_scores: hidden {list(hidden.shape)}, cand {list(cand.shape)}, prev {list(prev.shape)}; "
               "want [R, D, H], [R, D, K], [R, D, P]")  # fmt: skip
        q = self.hidden_projection(hidden)  # [R, D, r]
        a = self.predecessor_codebook[prev] * q[:, :, None]  # [R, D, P, r]
        return a @ self.successor_codebook[cand].transpose(-1, -2)  # [R, D, P, r] @ [R, D, r, K]


def chain_predecessors(anchor: Tensor, cand: Tensor) -> Tensor:
    """anchor [R], cand [R, D, K] -> prev [R, D, K]: depth 1's rows all the anchor, depth d's the candidates of d - 1."""
    _check(anchor.dim() == 1 and cand.dim() == 3 and anchor.shape[0] == cand.shape[0],
           f"chain_predecessors: anchor {list(anchor.shape)}, cand {list(cand.shape)}; want [R] and [R, D, K]")  # fmt: skip
    return torch.cat([anchor[:, None, None].expand(-1, 1, cand.shape[2]), cand[:, :-1]], dim=1)


def selector_scores(unary: Tensor, edge: Tensor, temperature: float = 1.0) -> Tensor:
    """unary [R, D, K], edge [R, D, P, K] -> log q(cand k | prev p, depth d) [R, D, P, K], normalised over the K
    candidates of each depth: log_softmax_K((unary + edge) / temperature) (temperature clamped to >= 1e-5)."""
    _check(unary.dim() == 3 and edge.dim() == 4 and edge.shape[:2] == unary.shape[:2] and edge.shape[3] == unary.shape[2],
           f"selector_scores: unary {list(unary.shape)}, edge {list(edge.shape)}; want [R, D, K] and [R, D, P, K]")  # fmt: skip
    return torch.log_softmax(_float(unary[:, :, None, :] + edge) / max(temperature, 1e-5), dim=-1)


class VanillaMarkov(nn.Module):
    """DSpark logit bias from the previous token: W2 w1[prev]. w1 = markov_w1 [V, r], W2 = markov_w2 [V, r]."""

    def __init__(self, vocab_size: int, hidden_size: int, rank: int):
        super().__init__()
        _check(rank >= 1, f"markov rank {rank}: must be >= 1")
        self.hidden, self.rank = hidden_size, rank
        self.markov_w1 = nn.Embedding(vocab_size, rank)
        self.markov_w2 = nn.Linear(rank, vocab_size, bias=False)

    def init_state(self, hidden: Tensor) -> Tensor | None:
        """The state before the first step for hidden rows [.., H] (none here)."""
        return None

    def _mix(self, e: Tensor, hidden: Tensor | None, state: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """e = w1[prev] [.., r] -> (the vector W2 maps to the bias [.., r], next state)."""
        return e, state

    def _mixed(self, prev: Tensor, hidden: Tensor | None, state: Tensor | None) -> tuple[Tensor, Tensor | None]:
        if hidden is not None:
            _check(
                hidden.shape == (*prev.shape, self.hidden),
                f"markov head: hidden {list(hidden.shape)}, want {[*prev.shape, self.hidden]}",
            )
        if state is not None:
            _check(
                state.shape == (*prev.shape, self.rank),
                f"markov head: state {list(state.shape)}, want {[*prev.shape, self.rank]}",
            )
        return self._mix(self.markov_w1(prev), hidden, state)

    def bias(self, prev: Tensor, hidden: Tensor | None, state: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """prev [..] token ids, hidden [.., H] (the step's normed draft hidden row) -> (bias [.., V], next state)."""
        u, state = self._mixed(prev, hidden, state)
        return self.markov_w2(u), state

    def bias_at(
        self, prev: Tensor, hidden: Tensor | None, cand: Tensor, state: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """`bias` at candidate ids cand [.., K] only (W2's rows gathered) -> (bias [.., K], next state)."""
        _check(cand.shape[:-1] == prev.shape, f"markov head: cand {list(cand.shape)}, want {[*prev.shape, 'K']}")
        u, state = self._mixed(prev, hidden, state)
        return (self.markov_w2.weight[cand] * u[..., None, :]).sum(-1), state

    def bias_matrix(self, prev: Tensor, hidden: Tensor, cand: Tensor) -> Tensor:
        """`bias_at` of every parent prev [.., P] at every candidate cand [.., K], one hidden row [.., H] for all P
        -> bias [.., P, K], as one matmul (no [.., P, K, r] tensor: a server batch's trees would need gigabytes)."""
        _check(prev.shape[:-1] == cand.shape[:-1] == hidden.shape[:-1] and hidden.shape[-1] == self.hidden,
               f"markov head: prev {list(prev.shape)}, hidden {list(hidden.shape)}, cand {list(cand.shape)}; "
               "want [.., P], [.., H], [.., K]")  # fmt: skip
        u = self._mix_rows(self.markov_w1(prev), hidden)
        return u @ self.markov_w2.weight[cand].transpose(-1, -2)

    def _mix_rows(self, e: Tensor, hidden: Tensor) -> Tensor:
        """`_mix` of e [.., P, r] under one hidden row [.., H] per P parents -> [.., P, r] (no state)."""
        return e


class GatedMarkov(VanillaMarkov):
    """W2 (g * e), g = sigmoid(gate_proj([hidden ; e])): the step's hidden gates the previous token's embedding."""

    def __init__(self, vocab_size: int, hidden_size: int, rank: int):
        super().__init__(vocab_size, hidden_size, rank)
        self.gate_proj = nn.Linear(hidden_size + rank, rank)

    def _mix(self, e, hidden, state):
        _check(hidden is not None, "gated markov head: needs the hidden row")
        return torch.sigmoid(self.gate_proj(torch.cat([hidden, e], dim=-1))) * e, state

    def _mix_rows(self, e, hidden):  # gate_proj([hidden ; e]) split: the hidden part once per row
        w, H = self.gate_proj.weight, self.hidden
        gate = F.linear(hidden, w[:, :H], self.gate_proj.bias)[..., None, :] + F.linear(e, w[:, H:])
        return torch.sigmoid(gate) * e


class RNNMarkov(VanillaMarkov):
    """[a | b | o] = joint_proj([s ; e ; hidden]); g = sigmoid(a); s' = g s + (1 - g) tanh(b); bias = W2 tanh(o)."""

    def __init__(self, vocab_size: int, hidden_size: int, rank: int):
        super().__init__(vocab_size, hidden_size, rank)
        self.joint_proj = nn.Linear(2 * rank + hidden_size, 3 * rank)

    def init_state(self, hidden: Tensor) -> Tensor:
        return hidden.new_zeros(*hidden.shape[:-1], self.rank)

    def _mix(self, e, hidden, state):
        _check(hidden is not None, "rnn markov head: needs the hidden row")
        state = self.init_state(hidden) if state is None else state
        a, b, o = self.joint_proj(torch.cat([state.to(e.dtype), e, hidden], dim=-1)).chunk(3, dim=-1)
        g = torch.sigmoid(a)
        return torch.tanh(o), g * state + (1 - g) * torch.tanh(b)

    def _mix_rows(self, e, hidden):
        raise ValueError("rnn markov head: its bias depends on the whole path, not on the parent alone")


MARKOV_HEADS = {"vanilla": VanillaMarkov, "gated": GatedMarkov, "rnn": RNNMarkov}


def markov_head(kind: str, vocab_size: int, hidden_size: int, rank: int) -> VanillaMarkov:
    """The DSpark Markov head of `markov_head_type` kind (vanilla, gated or rnn; any case)."""
    cls = MARKOV_HEADS.get(str(kind).lower())
    _check(cls is not None, f"markov_head_type {kind!r}: want one of {sorted(MARKOV_HEADS)}")
    return cls(vocab_size, hidden_size, rank)


class ConfidenceHead(nn.Module):
    """DSpark's acceptance probability of draft token i: sigmoid(proj([h_i ; w1[prev_i]]) / temperature), or
    sigmoid(proj(h_i) / temperature) without the Markov embedding; computed in float32 (or wider)."""

    def __init__(self, hidden_size: int, rank: int, with_markov: bool):
        super().__init__()
        _check(not with_markov or rank >= 1, f"confidence head with_markov needs rank >= 1, got {rank}")
        self.hidden, self.rank, self.with_markov = hidden_size, rank, with_markov
        self.proj = nn.Linear(hidden_size + (rank if with_markov else 0), 1)

    def forward(self, hidden: Tensor, prev_embedding: Tensor | None, temperature: Tensor | float = 1.0) -> Tensor:
        """hidden [.., H], prev_embedding [.., r] (markov_w1 of the previous token) or None -> confidence [..]."""
        _check(hidden.shape[-1] == self.hidden, f"confidence head: hidden {list(hidden.shape)}, want [.., {self.hidden}]")
        if self.with_markov:
            _check(prev_embedding is not None and prev_embedding.shape == (*hidden.shape[:-1], self.rank),
                   f"confidence head: prev_embedding {None if prev_embedding is None else list(prev_embedding.shape)}, "
                   f"want {[*hidden.shape[:-1], self.rank]}")  # fmt: skip
            hidden = torch.cat([hidden, prev_embedding.to(hidden.dtype)], dim=-1)
        else:
            _check(prev_embedding is None, "confidence head built without markov: prev_embedding must be None")
        x = _float(hidden)
        raw = F.linear(x, self.proj.weight.to(x.dtype), self.proj.bias.to(x.dtype))[..., 0]
        return torch.sigmoid(raw / temperature)
