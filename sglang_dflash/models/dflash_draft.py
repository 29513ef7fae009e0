"""The DFlash-family drafter (z-lab DFlash, DFlash2, DSpark): one forward pass drafts a block.

The block is [anchor (last verified token), MASK x (block_size - 1)] at positions seq_len ..
seq_len + block_size - 1. Queries come from the block only; keys and values from the context
(the committed tokens' target features, `hidden_norm(fc(taps))`, projected by each layer's own
k/v projections, k-normed and rotated at their positions, cached incrementally) and from the
block. Full-attention layers see the whole block, sliding layers the block causally and the last
`sliding_window` positions. Embedding and LM head are the target's.

Formats (`DraftConfig.format`): DFlash's rows 1 .. block_size - 1 draft depths 1 .. block_size - 1; DSpark's rows
0 .. block_size - 1 draft depths 1 .. block_size (its anchor row drafts too) and its Markov head biases each depth by
the token before; DFlash2 adds a candidate selector. Either may wrap each sublayer in grouped dynamic convolutions
(`draft_heads.GroupedConv`). How each drafts a chain or a tree: `models.draft_proposal`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from ..kernels.tree_attention import ancestor_bits, attend_tree
from .config import DraftConfig, read_config
from .draft_heads import CandidateSelector, ConfidenceHead, GroupedConv, markov_head
from .layers import MLP, RMSNorm, Rotary, load_checkpoint, load_into


@dataclass
class DraftCache:
    """Context K/V of the drafter layers as token pools k, v [layers, P + 1, HKV, Dh] (entry P: scratch for
    writes that go nowhere) and a page table [S, T] int: position p (< T) of request slot s is pool entry
    table[s, p]. `new_cache` makes it dense (entry s * T + p); SGLang's worker passes its req_to_token, so
    the drafter's context lives at the target's KV slots."""

    k: Tensor
    v: Tensor
    table: Tensor


class DraftAttention(nn.Module):
    def __init__(self, c: DraftConfig, layer: int, rotary: Rotary):
        super().__init__()
        self.rotary, self.head_dim = rotary, c.head_dim
        self.causal, self.window = c.causal[layer], c.sliding_window if c.layer_types[layer] == "sliding_attention" else None
        HQ, HKV, Dh, bias = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.attention_bias
        self.q_proj = nn.Linear(c.hidden_size, HQ * Dh, bias=bias)
        self.k_proj = nn.Linear(c.hidden_size, HKV * Dh, bias=bias)
        self.v_proj = nn.Linear(c.hidden_size, HKV * Dh, bias=bias)
        self.o_proj = nn.Linear(HQ * Dh, c.hidden_size, bias=bias)
        self.q_norm = RMSNorm(Dh, c.rms_norm_eps, zero_centred=False)
        self.k_norm = RMSNorm(Dh, c.rms_norm_eps, zero_centred=False)

    def kv(self, x: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """x [R, T, D] at positions [R, T] -> rotated k, v [R, T, HKV, Dh]."""
        R, T, _ = x.shape
        k = self.rotary(self.k_norm(self.k_proj(x).view(R, T, -1, self.head_dim)), positions)
        return k, self.v_proj(x).view(R, T, -1, self.head_dim)

    def visible(self, q_pos: Tensor, k_pos: Tensor, in_block: bool) -> Tensor:
        """bool [R, Q, T]: which keys (at k_pos [R, T]) each block query (at q_pos [R, Q]) sees."""
        d = q_pos[:, :, None] - k_pos[:, None, :]
        see = d >= 0 if (self.causal or not in_block) else torch.ones_like(d, dtype=torch.bool)
        if self.window is not None:
            see = see & (d < self.window) & (-d < self.window)
        return see

    @property
    def mask_key(self) -> tuple[bool, int | None]:
        """Layers with the same key see the same block keys: one `block_mask` serves them all."""
        return self.causal, self.window

    def block_mask(self, positions: Tensor) -> tuple[Tensor, Tensor | None]:
        """bool [R, B, B]: the block keys each block query (at positions [R, B]) sees; on CUDA also its bit words
        (`ancestor_bits`), the attention kernel's form, packed once per pass for all the layers of one `mask_key`."""
        see = self.visible(positions, positions, in_block=True)
        return see, (ancestor_bits(see) if see.is_cuda else None)

    def forward(
        self, x: Tensor, positions: Tensor, k_cache: Tensor, v_cache: Tensor, table: Tensor, slots: Tensor, ctx_lens: Tensor,
        mask: tuple[Tensor, Tensor | None],
    ) -> Tensor:  # fmt: skip
        """The block x [R, B, D] at positions [R, B] over the context K/V of request slots `slots` (pools read through
        `table`, the first ctx_lens[r] positions; every one precedes the block) and the block itself, seen through
        mask (this layer's `block_mask`)."""
        R, B, _ = x.shape
        q = self.rotary(self.q_norm(self.q_proj(x).view(R, B, -1, self.head_dim)), positions)
        k, v = self.kv(x, positions)
        in_block, words = mask
        o = attend_tree(q, k_cache, v_cache, ctx_lens, k, v, in_block, slots=slots, window=self.window, positions=positions,
                        table=table, ancestor_words=words)  # fmt: skip
        return self.o_proj(o.reshape(R, B, -1))


class DraftLayer(nn.Module):
    def __init__(self, c: DraftConfig, layer: int, rotary: Rotary):
        super().__init__()
        self.self_attn = DraftAttention(c, layer, rotary)
        self.mlp = MLP(c.hidden_size, c.intermediate_size)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps, zero_centred=False)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps, zero_centred=False)
        if c.conv_kernel_size:
            self.attention_conv = GroupedConv(c.hidden_size, c.conv_kernel_size, c.conv_group_size)
            self.mlp_conv = GroupedConv(c.hidden_size, c.conv_kernel_size, c.conv_group_size)

    def forward(
        self, h: Tensor, positions: Tensor, k_cache: Tensor, v_cache: Tensor, table: Tensor, slots: Tensor, ctx_lens: Tensor,
        mask: tuple[Tensor, Tensor | None],
    ) -> Tensor:  # fmt: skip
        attn = lambda x: self.self_attn(x, positions, k_cache, v_cache, table, slots, ctx_lens, mask)  # noqa: E731
        h = h + self._sublayer(attn, self.input_layernorm(h), "attention_conv")
        return h + self._sublayer(self.mlp, self.post_attention_layernorm(h), "mlp_conv")

    def _sublayer(self, fn, x: Tensor, conv: str) -> Tensor:
        """fn(x), inside the grouped convolutions where the drafter has them (its input, then its output)."""
        if not hasattr(self, conv):
            return fn(x)
        conv = getattr(self, conv)
        x, out = conv.prepare(x)
        return conv.finish(fn(x), out)


class DFlashDrafter(nn.Module):
    def __init__(self, config: DraftConfig):
        super().__init__()
        c = self.config = config
        rotary = Rotary(c.head_dim, c.rope_theta)
        self.layers = nn.ModuleList(DraftLayer(c, i, rotary) for i in range(c.num_hidden_layers))
        self.fc = nn.Linear(len(c.target_layer_ids) * c.hidden_size, c.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(c.hidden_size, c.rms_norm_eps, zero_centred=False)
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps, zero_centred=False)
        self.kv_heads = c.num_key_value_heads  # of this rank, after `tp_shard.shard_drafter`
        if c.selector_rank:
            self.candidate_selector = CandidateSelector(c.vocab_size, c.hidden_size, c.selector_rank)
        if c.markov_rank:
            self.markov_head = markov_head(c.markov_head_type, c.vocab_size, c.hidden_size, c.markov_rank)
        if c.confidence_head:
            self.confidence_head = ConfidenceHead(c.hidden_size, c.markov_rank, c.confidence_with_markov)

    @classmethod
    def from_pretrained(cls, path: str | Path, device="cpu", dtype=torch.float32) -> DFlashDrafter:
        config = DraftConfig.from_dict(read_config(path))
        with torch.device("meta"):
            model = cls(config)
        model = model.to_empty(device=device)
        load_into(model, load_checkpoint(path, {"model.": ""}), f"drafter {path}")
        return model.to(dtype).eval()

    def new_cache(self, num_slots: int, max_len: int, table: Tensor | None = None, pool_size: int = 0) -> DraftCache:
        """A dense cache of max_len positions for each of num_slots request slots; or, given a page table
        [num_slots, max_len] into a pool of pool_size entries (SGLang's req_to_token and KV pool size), that pool."""
        c, p = self.config, self.fc.weight
        if table is None:
            table, pool_size = torch.arange(num_slots * max_len, device=p.device).view(num_slots, max_len), num_slots * max_len
        shape = (len(self.layers), pool_size + 1, self.kv_heads, c.head_dim)
        return DraftCache(*(torch.zeros(shape, device=p.device, dtype=p.dtype) for _ in "kv"), table)

    @torch.no_grad()
    def append_context(self, cache: DraftCache, taps: Tensor, slots: Tensor, start: Tensor, nodes: Tensor) -> None:
        """Context K/V of committed tokens. taps [R, N, n_taps * D]: the target's tapped hidden states of a verify;
        nodes [R, P]: the committed nodes (-1: none), node nodes[r, j] being the token at position start[r] + j.
        Graph-safe (no host sync)."""
        R, P = nodes.shape
        features = self.hidden_norm(self.fc(taps[torch.arange(R, device=nodes.device)[:, None], nodes.clamp(min=0)]))
        positions = start[:, None] + torch.arange(P, device=nodes.device)
        T = cache.table.shape[1]
        ok = (nodes >= 0) & (slots[:, None] >= 0) & (positions < T)
        entry = cache.table[slots.clamp(min=0)[:, None], positions.clamp(max=T - 1)].long()
        entry = torch.where(ok, entry, cache.k.shape[1] - 1)  # [R, P]; scratch for what goes nowhere
        k, v = map(torch.stack, zip(*(layer.self_attn.kv(features, positions) for layer in self.layers)))
        cache.k[:, entry], cache.v[:, entry] = k.to(cache.k.dtype), v.to(cache.v.dtype)

    @torch.no_grad()
    def forward(
        self, cache: DraftCache, anchors: Tensor, slots: Tensor, seq_lens: Tensor, embed: nn.Embedding, lm_head
    ) -> Tensor:
        """Logits [R, D, V] for depths 1 .. D = config.num_depths after anchors [R] at positions seq_lens [R]
        (the context holds positions 0 .. seq_lens - 1)."""
        return self.logits(self.hidden(cache, anchors, slots, seq_lens, embed), lm_head)

    def logits(self, hidden: Tensor, lm_head) -> Tensor:
        """`hidden`'s rows [R, D, H] through the LM head, scaled and soft-capped as configured -> float [R, D, V]."""
        c = self.config
        logits = lm_head(hidden).float() * c.output_multiplier
        if c.final_logit_softcapping:
            logits = torch.tanh(logits / c.final_logit_softcapping) * c.final_logit_softcapping
        return logits

    @torch.no_grad()
    def hidden(self, cache: DraftCache, anchors: Tensor, slots: Tensor, seq_lens: Tensor, embed: nn.Embedding) -> Tensor:
        """The normed final hidden of the rows that draft depths 1 .. D [R, D, H] (as `forward`)."""
        c, R = self.config, anchors.shape[0]
        block = torch.full((R, c.block_size), c.mask_token_id, device=anchors.device, dtype=torch.long)
        block[:, 0] = anchors
        h = embed(block) * c.input_embedding_scale if c.input_embedding_scale != 1.0 else embed(block)
        positions = seq_lens[:, None] + torch.arange(c.block_size, device=anchors.device)
        masks = {}  # one block mask per distinct (causal, window), shared by its layers
        for layer, k_cache, v_cache in zip(self.layers, cache.k, cache.v):
            attn = layer.self_attn
            if attn.mask_key not in masks:
                masks[attn.mask_key] = attn.block_mask(positions)
            h = layer(h, positions, k_cache, v_cache, cache.table, slots, seq_lens, masks[attn.mask_key])
        return self.norm(h if c.format == "dspark" else h[:, 1:])
