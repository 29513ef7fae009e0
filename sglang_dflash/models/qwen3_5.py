"""Qwen3.5/3.6 hybrid target (Gated DeltaNet + gated full attention), loading Hugging Face checkpoints.

Every forward is a tree verify: R requests, each a draft tree of N nodes rooted at the token after
its `seq_lens[r]` cached ones (a prompt chunk is a chain, a decode step the root alone). Verify
reads the caches and never writes them; `commit` then writes the accepted path of each request:
K/V of its nodes at positions seq_len + depth, and the GDN conv / recurrent states after it.
Matches transformers' `Qwen3_5ForCausalLM` (zero-centred RMSNorm, gated attention output, partial
RoPE, q/k norm, gated output norm); the tree kernels run on CUDA, their references elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from ..ddtree import DraftTree
from ..kernels import tree_causal_conv1d, tree_conv_commit, tree_gdn_commit, tree_gdn_verify
from ..kernels.tree_attention import ancestor_bits, attend_tree
from ..kernels.tree_conv import conv_windows
from ..kernels.tree_gdn import stack_contexts, verify_step_inputs
from .config import PairError, TargetConfig, read_config
from .layers import MLP, RMSNorm, Rotary, gated_rms_norm, load_checkpoint, load_into


@dataclass
class TargetCache:
    """Static per-slot caches, stacked over layers of a kind (a commit writes every layer in one launch).
    k, v [attention layers, S + 1, T, HKV, Dh] (row S takes the masked-off writes of a commit, so that
    commit needs no host sync); conv [GDN layers, S, conv_dim, W - 1]; ssm [GDN layers, S, HV, V, K]
    float32 (sglang's layouts)."""

    k: Tensor
    v: Tensor
    conv: Tensor
    ssm: Tensor


def scatter_rows(src: tuple[Tensor, ...], dst: tuple[Tensor, ...], slots: Tensor, starts: Tensor, nodes: Tensor) -> None:
    """dst[:, slots[r], starts[r] + j] = src[:, r, nodes[r, j]] for every tensor pair (src [layers, R, N, ...],
    dst [layers, S + 1, T, ...]); entries with nodes < 0 or slots < 0 go to the scratch row S. Graph-safe:
    no data-dependent shapes."""
    R, P = nodes.shape
    ok = (nodes >= 0) & (slots[:, None] >= 0)
    row = torch.where(ok, slots[:, None], dst[0].shape[1] - 1)
    pos = torch.where(ok, starts[:, None] + torch.arange(P, device=nodes.device), 0)
    take = torch.arange(R, device=nodes.device)[:, None], nodes.clamp(min=0)
    for s, d in zip(src, dst):
        d[:, row, pos] = s[:, take[0], take[1]].to(d.dtype)


@dataclass
class StepInput:
    """What every layer needs for one verify: the trees, their cache slots and cached lengths."""

    tree: DraftTree
    slots: Tensor  # long [R]
    seq_lens: Tensor  # long [R]
    positions: Tensor  # long [R, N] = seq_lens + depth
    conv_windows: Tensor  # long [R, N, W - 1]: `kernels.tree_conv.conv_windows`, for every conv layer
    gdn_verify: dict  # `tree_gdn.verify_step_inputs`: the tree as the GDN verify kernel that runs takes it
    attn_words: Tensor  # int64 [R, N, ceil(N / 64)], the ancestor mask as the attention kernel reads it


class GatedDeltaNet(nn.Module):
    def __init__(self, c: TargetConfig):
        super().__init__()
        self.c = c
        self.key_dim = c.linear_num_key_heads * c.linear_key_head_dim
        self.value_dim = c.linear_num_value_heads * c.linear_value_head_dim
        self.conv_dim = 2 * self.key_dim + self.value_dim
        self.in_proj_qkv = nn.Linear(c.hidden_size, self.conv_dim, bias=False)
        self.in_proj_z = nn.Linear(c.hidden_size, self.value_dim, bias=False)
        self.in_proj_b = nn.Linear(c.hidden_size, c.linear_num_value_heads, bias=False)
        self.in_proj_a = nn.Linear(c.hidden_size, c.linear_num_value_heads, bias=False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, c.linear_conv_kernel_dim, groups=self.conv_dim, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(c.linear_num_value_heads))
        self.A_log = nn.Parameter(torch.zeros(c.linear_num_value_heads))
        self.norm = nn.Module()
        self.norm.weight = nn.Parameter(torch.ones(c.linear_value_head_dim))
        self.out_proj = nn.Linear(self.value_dim, c.hidden_size, bias=False)

    def forward(self, x: Tensor, step: StepInput, conv_state: Tensor, ssm_state: Tensor):
        c, (R, N, _) = self.c, x.shape
        parents = step.tree.parents
        mixed = self.in_proj_qkv(x)
        qkv = tree_causal_conv1d(mixed, conv_state, self.conv1d.weight[:, 0], None, step.slots, parents, step.conv_windows)
        q, k, v = qkv.split([self.key_dim, self.key_dim, self.value_dim], dim=-1)
        H, HV = c.linear_num_key_heads, c.linear_num_value_heads
        o, gdn_ctx = tree_gdn_verify(
            q.reshape(R, N, H, -1),
            k.reshape(R, N, H, -1),
            v.reshape(R, N, HV, -1),
            self.in_proj_a(x),
            self.in_proj_b(x),
            self.A_log,
            self.dt_bias,
            ssm_state,
            step.slots,
            parents,
            **step.gdn_verify,  # once per step, not per layer (Triton paths)
        )
        z = self.in_proj_z(x).reshape(R, N, HV, -1)
        o = gated_rms_norm(o.to(x.dtype), z, self.norm.weight, c.rms_norm_eps)
        return self.out_proj(o.reshape(R, N, -1)), (mixed, gdn_ctx)


class GatedAttention(nn.Module):
    def __init__(self, c: TargetConfig, rotary: Rotary):
        super().__init__()
        self.c, self.rotary = c, rotary
        HQ, HKV, Dh = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, 2 * HQ * Dh, bias=False)  # query and output gate, per head
        self.k_proj = nn.Linear(c.hidden_size, HKV * Dh, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, HKV * Dh, bias=False)
        self.o_proj = nn.Linear(HQ * Dh, c.hidden_size, bias=False)
        self.q_norm = RMSNorm(Dh, c.rms_norm_eps, zero_centred=True)
        self.k_norm = RMSNorm(Dh, c.rms_norm_eps, zero_centred=True)

    def forward(self, x: Tensor, step: StepInput, k_cache: Tensor, v_cache: Tensor):
        c, (R, N, _) = self.c, x.shape
        q, gate = self.q_proj(x).view(R, N, c.num_attention_heads, 2 * c.head_dim).chunk(2, dim=-1)
        q = self.rotary(self.q_norm(q), step.positions)
        k = self.rotary(self.k_norm(self.k_proj(x).view(R, N, c.num_key_value_heads, -1)), step.positions)
        v = self.v_proj(x).view(R, N, c.num_key_value_heads, -1)
        o = attend_tree(q, k_cache, v_cache, step.seq_lens, k, v, step.tree.ancestor_mask, slots=step.slots,
                        ancestor_words=step.attn_words)  # fmt: skip
        o = o.reshape(R, N, -1) * torch.sigmoid(gate.reshape(R, N, -1))
        return self.o_proj(o), (k, v)


class DecoderLayer(nn.Module):
    def __init__(self, c: TargetConfig, layer_type: str, rotary: Rotary):
        super().__init__()
        self.layer_type = layer_type
        if layer_type == "linear_attention":
            self.linear_attn = GatedDeltaNet(c)
        else:
            self.self_attn = GatedAttention(c, rotary)
        self.mlp = MLP(c.hidden_size, c.intermediate_size)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps, zero_centred=True)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps, zero_centred=True)

    def forward(self, h: Tensor, step: StepInput, caches: tuple[Tensor, Tensor]):
        mixer = self.linear_attn if self.layer_type == "linear_attention" else self.self_attn
        out, ctx = mixer(self.input_layernorm(h), step, *caches)
        h = h + out
        return h + self.mlp(self.post_attention_layernorm(h)), ctx


@dataclass
class VerifyOutput:
    """hidden [R, N, D] after the final norm (logits = target.logits(hidden)); taps [R, N, len(tap_layers) * D]
    (outputs of the tapped decoder layers, concatenated); ctx: what `commit` needs, per layer."""

    hidden: Tensor
    taps: Tensor | None
    ctx: list


class Qwen3_5Target(nn.Module):
    """The text model of a Qwen3.5/3.6 checkpoint. `tap_layers`: decoder layers whose outputs
    `verify` returns (a DFlash drafter's target_layer_ids)."""

    def __init__(self, config: TargetConfig, tap_layers: tuple[int, ...] = ()):
        super().__init__()
        self.config, self.tap_layers = config, tuple(tap_layers)
        c = config
        self.rotary = Rotary(c.rotary_dim, c.rope_theta)
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(c, t, self.rotary) for t in c.layer_types)
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps, zero_centred=True)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    @classmethod
    def from_pretrained(cls, path: str | Path, tap_layers=(), device="cpu", dtype=torch.float32) -> Qwen3_5Target:
        config = TargetConfig.from_dict(read_config(path))
        bad = [i for i in tap_layers if not 0 <= i < config.num_hidden_layers]
        if bad:
            raise PairError(f"tapped layers {bad} out of range for a {config.num_hidden_layers}-layer target")
        with torch.device("meta"):
            model = cls(config, tap_layers)
        # transformers writes Qwen3_5ForCausalLM under model.language_model. too, so both prefixes are read
        tensors = load_checkpoint(path, {"model.language_model.": "", "model.": ""}, skip=("mtp.", "model.visual."))
        if config.tie_word_embeddings:
            tensors["lm_head.weight"] = tensors["embed_tokens.weight"]
        model = model.to_empty(device=device)
        load_into(model, tensors, f"target {path}")
        if config.tie_word_embeddings:
            model.lm_head.weight = model.embed_tokens.weight
        return model.to(dtype).eval()

    def new_cache(self, num_slots: int, max_len: int) -> TargetCache:
        c, p = self.config, self.embed_tokens.weight
        attn = [i for i, t in enumerate(c.layer_types) if t == "full_attention"]
        gdn = [i for i, t in enumerate(c.layer_types) if t == "linear_attention"]
        kv = lambda: torch.zeros(  # noqa: E731
            len(attn), num_slots + 1, max_len, c.num_key_value_heads, c.head_dim, device=p.device, dtype=p.dtype
        )
        conv_dim = 2 * c.linear_num_key_heads * c.linear_key_head_dim + c.linear_num_value_heads * c.linear_value_head_dim
        return TargetCache(
            k=kv(),
            v=kv(),
            conv=torch.zeros(len(gdn), num_slots, conv_dim, c.linear_conv_kernel_dim - 1, device=p.device, dtype=p.dtype),
            ssm=torch.zeros(
                len(gdn), num_slots, c.linear_num_value_heads, c.linear_value_head_dim, c.linear_key_head_dim, device=p.device
            ),
        )

    def _caches(self, cache: TargetCache):
        """Each layer's cache pair, in layer order: (k, v) for attention, (conv, ssm) for Gated DeltaNet."""
        attn, gdn = iter(zip(cache.k, cache.v)), iter(zip(cache.conv, cache.ssm))
        return [next(gdn) if layer.layer_type == "linear_attention" else next(attn) for layer in self.layers]

    @torch.no_grad()
    def verify(self, cache: TargetCache, tree: DraftTree, slots: Tensor, seq_lens: Tensor) -> VerifyOutput:
        """Run R trees of N nodes (node 0 at position seq_lens[r]) against the caches of `slots`; caches untouched.
        No host sync (CUDA-graph safe): the caller keeps seq_lens + depth below cache.max_len."""
        windows = conv_windows(tree.parents, self.config.linear_conv_kernel_dim)
        gdn = verify_step_inputs(tree.ancestor_mask, tree.max_depth)
        words = ancestor_bits(tree.ancestor_mask)
        step = StepInput(tree, slots, seq_lens, seq_lens[:, None] + tree.depths, windows, gdn, words)
        h = self.embed_tokens(tree.token_ids)
        taps, ctx = {}, []
        for i, (layer, caches) in enumerate(zip(self.layers, self._caches(cache))):
            h, layer_ctx = layer(h, step, caches)
            ctx.append(layer_ctx)
            if i in self.tap_layers:
                taps[i] = h
        h = self.norm(h)
        if len(self.layers) - 1 in taps:  # transformers' hidden_states[N] (what z-lab taps) is after the final norm
            taps[len(self.layers) - 1] = h
        tapped = torch.cat([taps[i] for i in self.tap_layers], dim=-1) if self.tap_layers else None
        return VerifyOutput(h, tapped, ctx)

    @torch.no_grad()
    def commit(self, cache: TargetCache, out: VerifyOutput, slots: Tensor, seq_lens: Tensor, accepted_nodes: Tensor) -> None:
        """Write request r's accepted path (accepted_nodes[r]: node indices from 0, padded -1) into slot
        slots[r] (skipped where slots[r] < 0); the caller then advances seq_lens by the path lengths."""
        gdn = [ctx for layer, ctx in zip(self.layers, out.ctx) if layer.layer_type == "linear_attention"]
        attn = [ctx for layer, ctx in zip(self.layers, out.ctx) if layer.layer_type != "linear_attention"]
        if attn:  # K/V of accepted node j of request r -> position seq_lens[r] + j of slot slots[r]
            scatter_rows(tuple(map(torch.stack, zip(*attn))), (cache.k, cache.v), slots, seq_lens, accepted_nodes)
        if gdn:
            mixed, gdn_ctx = zip(*gdn)
            tree_conv_commit(cache.conv, slots, torch.stack(mixed), accepted_nodes)
            tree_gdn_commit(cache.ssm, slots, stack_contexts(list(gdn_ctx)), accepted_nodes)

    def logits(self, hidden: Tensor) -> Tensor:
        return self.lm_head(hidden).float()
