"""Triton: greedy acceptance that reads only the target rows on the accepted path, in one launch.

`greedy_walk(token_ids, parents, target_logits, L)` equals
`walk_tree_ref(..., target_tokens=target_logits.argmax(-1), max_depth=L)` but reads at most L + 1
rows of the vocabulary per request (the nodes of the accepted path) instead of all N.

Shapes: token_ids, parents long [R, N] (a DraftTree's: parents[:, 0] == -1, siblings carry
distinct tokens); target_logits float [R, N, V] (bf16 / fp16 / fp32; any strides over R and N,
unit stride over V). Returns accept_len long [R], accepted_nodes long [R, L + 1] (padded -1),
bonus_tokens long [R].

One launch, grid (R, P), no host sync (captures in a CUDA graph). The vocabulary is cut into S
spans of CW entries (the last one partial), loaded BLOCK at a time; program (r, p) owns spans
p, p + P, ... The walk goes in rounds of LA rows: the current node's and its first-child chain's (the
draft's own continuation: siblings are in descending score order, so a node's first child is its most
likely one), loaded together as one [LA, BLOCK] tile. Per round every program stores the (max, first
index) of its spans of those rows, packed as one int64 key (order-preserving float bits, then the reversed
index: the larger key is the larger value, then the smaller index), in keys [rounds * LA, R, S]; the P
programs of request r meet at a barrier (an arrival counter, spun on, kept from call to call: no memset before the
launch); each then takes the largest span key of each row (the target tokens, in one load) and follows the chain
for as long as the target's token leads to its next node, then moves to the child carrying it (every row of the
round at once: one reduction for the children, a cumsum for the steps taken). All P make the same decisions, so
they stop together: at a node without that child, or at depth L. Program (r, 0) writes the path and the bonus
token.

bf16 rows (spans of several blocks, even strides) are read as int32 words of two bf16: each block's row maxima by
max.bf16x2, no conversion and no index; after the span, the block that first held the maximum is read once more
(from L2), again as words, for the first index equal to it (both halves compared as floats). The next block's loads
are issued before this one's reduction (two blocks in registers). On an H200 at R = 8, B = 64, 8 rows a round:
32.6 us when the walk goes 15 deep, 15.6 when it stops at the root (benchmarks/RESULTS.md; 40.6 and 19.3 with a bf16
loop before the pairs). The interpreter keeps the converting loop (no inline PTX there): the pairs run
in the GPU tests.

The barrier needs the P programs of a request resident at once: R * P stays within the SM count
(P = 1, no barrier, from R >= SMs). Under TRITON_INTERPRET=1 (programs run one after another) P is 1.

Argmax ties go to the smallest index (as torch.argmax; -0 and +0 tie). NaN logits are skipped (an all-NaN or
all -inf row gives index 0), where torch.argmax returns the first NaN.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from .. import device as gpu
from ..vocab.draft_topk import _token_key

MAX_BLOCK = 16384  # vocabulary entries a program loads at once (a whole span where it fits: one round trip)
MIN_BLOCK = 128
MAX_PROGRAMS = 32  # programs per request: more spin on one counter for little more bandwidth
# Warps per program. On an H200 (R = 8, B = 64, LA 2), 8 warps against 16 / 32: a walk that stops at the
# root 8.5 against 9.4 / 11.4 us, 6 deep 24.8 against 26.7 / 32.3, 15 deep 51.9 against 54.2 / 64.4 (fewer warps meet
# sooner in the round's reductions; 224 registers, no spills). With bf16 rows read as pairs, LA 8: 16 warps
# 18.9 / 18.8 / 39.2 against 8 warps 17.3 / 17.2 / 35.6 (root / 6 / 15 deep).
MAX_WARPS = 8
# Rows per round (`greedy_walk`). More rows a round win when the walk goes deep and lose when it stops at the root;
# DDTree accepts 7-10 tokens a step on average (the DDTree paper: tau 8-11 with the bonus), so 8. H200, the walk alone
# at R = 8, B = 64 (benchmarks/RESULTS.md, bf16 rows read as pairs), LA 8 against 4: stopping at the root 15.6 against
# 10.8 us, 6 deep 15.5 against 18.2, 15 deep 32.6 against 39.0 (before the pairs: 4 against 2 won from
# about 3 depths).
LOOKAHEAD = 8


@triton.jit
def _max_bf16x2(a, b):
    """Per 16-bit half, the larger bf16 of two int32 words of bf16 pairs (max.bf16x2: maxNum, a NaN never wins)."""
    return tl.inline_asm_elementwise("max.bf16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _load_pairs(words, start, o, CW, V, live, BLOCK: tl.constexpr):
    """int32 words [LA, BLOCK // 2] of bf16 pairs, entries start + o .. start + o + BLOCK of the live rows; two bf16
    -inf (0xFF80FF80) past the span (o >= CW: nothing read) or the row."""
    w_off = (start + o) // 2 + tl.arange(0, BLOCK // 2)
    ok = (w_off < V // 2) & (o // 2 + tl.arange(0, BLOCK // 2) < CW // 2)
    return tl.load(words[:, None] + w_off[None, :], mask=live[:, None] & ok[None, :], other=-8323200)


@triton.jit(do_not_specialize=["R"])  # one compile for every request count R
def _walk_kernel(
    logits,
    token_ids,
    parents,
    keys,
    arrived,
    accept_len,
    accepted_nodes,
    bonus,
    R,
    N,
    V,
    S,
    CW,
    stride_r,
    stride_n,
    P: tl.constexpr,
    L: tl.constexpr,
    NN: tl.constexpr,
    SS: tl.constexpr,
    LP: tl.constexpr,
    BLOCK: tl.constexpr,
    LA: tl.constexpr,
    NATIVE: tl.constexpr,
    PAIRS: tl.constexpr,
    PDL: tl.constexpr,
):
    gpu.pdl_start(PDL)
    r = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1)
    i = tl.arange(0, NN)
    im = i < N
    par = tl.load(parents + r * N + i, mask=im, other=-2)
    tok = tl.load(token_ids + r * N + i, mask=im, other=-1)
    j = tl.arange(0, LP)
    path = tl.full([LP], -1, tl.int64)
    c = tl.arange(0, SS)
    t = tl.arange(0, LA)
    cur = r * 0  # the root
    token = r * 0 - 1
    d = tl.full([], 0, tl.int32)
    rnd = tl.full([], 0, tl.int32)
    origin = tl.full([], 0, tl.int64)  # the barrier counter's value when this call began
    go = d == 0
    while go:
        # the round's rows: the current node and its first-child chain (-1 past a leaf or below depth L: rows the
        # walk could not follow, left unread)
        chain = tl.where(t == 0, cur, -1)
        node = cur
        for u in tl.static_range(1, LA):
            first = tl.min(tl.where(im & (par == node) & (node >= 0), i, NN), axis=0)
            node = tl.where(first < NN, first, -1).to(tl.int64)
            chain = tl.where((t == u) & (d + u <= L), node, chain)
        live = chain >= 0
        rows = logits + r * stride_r + tl.maximum(chain, 0) * stride_n
        words = logits.to(tl.pointer_type(tl.int32)) + (r * stride_r + tl.maximum(chain, 0) * stride_n) // 2
        for s in range(p, S, P):
            best_m = tl.full([LA], float("-inf"), tl.float32)
            best_i = tl.full([LA], 0, tl.int32) + s * CW  # an all -inf (or NaN) span: its first index
            if PAIRS:  # each block's maxima by max.bf16x2 on int32 words of bf16 pairs (no conversions, no index pass),
                # then the first index of the span's maximum in the one block that holds it, read again (from L2)
                best_o = tl.full([LA], -1, tl.int32)
                w = _load_pairs(words, s * CW, 0, CW, V, live, BLOCK)
                for o in range(0, CW, BLOCK):
                    w_next = _load_pairs(words, s * CW, o + BLOCK, CW, V, live, BLOCK)  # in flight while w is reduced
                    wm = tl.reduce(w, 1, _max_bf16x2)
                    m = tl.maximum((wm << 16).to(tl.float32, bitcast=True), (wm & -65536).to(tl.float32, bitcast=True))
                    upd = m > best_m  # strict: the first block holding the maximum; a NaN maximum never updates
                    best_m = tl.where(upd, m, best_m)
                    best_o = tl.where(upd, o, best_o)
                    w = w_next
                start = tl.multiple_of((s * CW + tl.maximum(best_o, 0)) // 2, BLOCK // 2)  # (so that loads are vectors)
                w_off = start[:, None] + tl.arange(0, BLOCK // 2)[None, :]
                w = tl.load(words[:, None] + w_off, mask=(live & (best_o >= 0))[:, None] & (w_off < V // 2), other=-8323200)
                lo = (w << 16).to(tl.float32, bitcast=True) == best_m[:, None]  # (float compares: -0 == +0)
                hi = (w & -65536).to(tl.float32, bitcast=True) == best_m[:, None]
                at = tl.min(tl.where(lo, 2 * w_off, tl.where(hi, 2 * w_off + 1, V)), axis=1).to(tl.int32)
                best_i = tl.where(best_o >= 0, at, best_i)
            else:
                for o in range(0, CW, BLOCK):
                    off = s * CW + o + tl.arange(0, BLOCK)
                    ok = (off < V) & (o + tl.arange(0, BLOCK) < CW)
                    x = tl.load(rows[:, None] + off[None, :], mask=live[:, None] & ok[None, :], other=float("-inf"))
                    if NATIVE:  # in the logits' dtype; the max is maxNum's (max.f32: NaN never wins, all NaN gives NaN)
                        m = tl.max(x, axis=1)
                    else:  # (numpy's maximum, the interpreter's, propagates NaN)
                        x = x.to(tl.float32)
                        x = tl.where(x == x, x, float("-inf"))
                        m = tl.max(x, axis=1)
                    at = tl.min(tl.where(x == m[:, None], off[None, :], V), axis=1).to(tl.int32)
                    m = m.to(tl.float32)
                    upd = m > best_m  # strict: the first maximum wins; a NaN maximum never updates
                    best_m = tl.where(upd, m, best_m)
                    best_i = tl.where(upd, at, best_i)
            tl.store(keys + ((rnd * LA + t) * R + r) * S + s, _token_key(best_m, best_i.to(tl.int64)), mask=live)
        if P > 1:  # the request's P programs meet: stores, then a release add, then acquire reads
            tl.debug_barrier()
            ticket = tl.atomic_add(arrived + r, 1, sem="release")
            # the counter runs on from call to call, P a round: this call's origin is the multiple of P below its
            # first ticket (no program arrives twice before all have arrived once)
            origin = tl.where(rnd == 0, ticket - ticket % P, origin)
            seen = ticket + 1
            while seen - origin < P * (rnd + 1):
                seen = tl.atomic_add(arrived + r, 0, sem="acquire")
        tl.debug_barrier()
        row_keys = ((rnd * LA + t) * R + r) * S
        span_keys = tl.load(
            keys + row_keys[:, None] + c[None, :],
            mask=live[:, None] & (c < S)[None, :],
            other=-9223372036854775807,
            cache_modifier=".cg",
        )  # fmt: skip; other: below every key
        toks = tl.where(live, 2147483647 - (tl.max(span_keys, axis=1) & 0x7FFFFFFF), -1)
        # Follow the chain for as long as the target's token leads to its next node (all P decide alike), every row
        # at once: child[u], the child of chain[u] carrying toks[u]; step u is taken iff every step before it went on
        # down the chain (a child, above depth L, and it is chain[u + 1]).
        hit = im[None, :] & (par[None, :] == chain[:, None]) & (tok[None, :] == toks[:, None]) & live[:, None]
        child = tl.min(tl.where(hit, i[None, :], NN), axis=1)
        down = (child < NN) & (d + t < L)
        stay = down & (child == tl.max(tl.where(t[None, :] == t[:, None] + 1, chain[None, :], -1), axis=1))
        off = 1 - stay.to(tl.int32)
        taken = (tl.cumsum(off, axis=0) - off) == 0  # steps 0 .. k, k the first that leaves the chain (or the last)
        steps = tl.sum(taken.to(tl.int32), axis=0)
        at = tl.max(tl.where((j[:, None] == d + t[None, :]) & taken[None, :], chain[None, :], -1), axis=1)
        path = tl.where((j >= d) & (j < d + steps), at, path)
        last = t == steps - 1
        token = tl.sum(tl.where(last, toks, 0), axis=0)
        cur = tl.sum(tl.where(last, child, 0), axis=0).to(tl.int64)
        go = tl.sum(tl.where(last, down.to(tl.int32), 0), axis=0) > 0
        d += steps
        rnd += 1
    if p == 0:
        tl.store(accepted_nodes + r * (L + 1) + j, path, mask=j < L + 1)
        tl.store(accept_len + r, (d - 1).to(tl.int64))
        tl.store(bonus + r, token)


def programs_per_request(R: int, sms: int) -> int:
    """Programs per request by default: the SMs' share of each request, rounded down to a power of two (at most
    MAX_PROGRAMS), so that the launch's constants take a few values, not one a batch size (each a compile)."""
    return 1 << (min(MAX_PROGRAMS, max(1, sms // R)).bit_length() - 1)


# The barrier's arrival counters, per (CUDA device index, programs per request P): int64 [SMs] (R * P <= SMs), kept
# from call to call and never reset (each call adds P a round to its requests' counters, int64: no wrap), so that no
# memset kernel runs before the walk. Never freed: captured graphs hold their address.
_COUNTERS: dict[tuple[int, int], Tensor] = {}


def _barrier_counters(device: torch.device, P: int) -> Tensor:
    """Arrival counters for `_walk_kernel`'s barrier (P > 1), each a multiple of P between calls. Walks on one device
    must not overlap (they run on one stream), as they share them. Made once, outside CUDA-graph capture; while a
    graph is captured before they exist, fresh zeroed ones are captured with the call (a memset)."""
    cuda = device.type == "cuda"
    key = (device.index if device.index is not None else torch.cuda.current_device(), P) if cuda else None
    if key not in _COUNTERS:
        counters = torch.zeros(gpu.multiprocessor_count(device), device=device, dtype=torch.int64)
        if not cuda or torch.cuda.is_current_stream_capturing():  # (CPU tensors: a launch recorded, not run)
            return counters
        torch.cuda.synchronize(device)  # zeroed before any stream uses them
        _COUNTERS[key] = counters
    return _COUNTERS[key]


def greedy_walk(
    token_ids: Tensor,
    parents: Tensor,
    target_logits: Tensor,
    max_depth: int,
    *,
    block: int | None = None,
    chunk: int | None = None,
    programs: int | None = None,
    lookahead: int = LOOKAHEAD,
) -> tuple[Tensor, Tensor, Tensor]:
    """(accept_len [R], accepted_nodes [R, max_depth + 1], bonus_tokens [R]), see the module
    docstring. lookahead: rows per round (a power of two), the current node's and its first-child chain's.
    block / chunk (a multiple of block: the span width) / programs (per request, at most the span count) override
    the tiling (tests). Walks on one device run one at a time (one stream, as the engine and the server run them):
    they share the barrier's counters (`_barrier_counters`)."""
    R, N, V = target_logits.shape
    L = max_depth
    device = target_logits.device
    if token_ids.device != device or parents.device != device:
        raise ValueError(f"token_ids / parents on {token_ids.device} / {parents.device}, target_logits on {device}")
    x = target_logits if target_logits.stride(2) == 1 else target_logits.contiguous()
    sms = gpu.multiprocessor_count(device)
    fit = programs_per_request(R, sms)
    want = triton.cdiv(V, fit)  # vocabulary entries per span
    if lookahead < 1 or lookahead & (lookahead - 1):
        raise ValueError(f"lookahead must be a power of two >= 1, got {lookahead}")
    if block is None:  # a round loads [lookahead, block] at once: at most 2 * MAX_BLOCK entries
        block = min(MAX_BLOCK // max(1, lookahead // 2), max(MIN_BLOCK, triton.next_power_of_2(want)))
    if chunk is None:
        chunk = block * triton.cdiv(want, block)
    if block & (block - 1) or chunk % block:
        raise ValueError(f"block must be a power of two and chunk a multiple of it, got {block}, {chunk}")
    S = triton.cdiv(V, chunk)
    # bf16 rows read as int32 pairs (`_walk_kernel`) where spans have several blocks (else the index pass is no saving)
    pairs = not gpu.INTERPRET and x.dtype == torch.bfloat16 and chunk > block and V % 2 == 0
    pairs = pairs and x.stride(0) % 2 == 0 and x.stride(1) % 2 == 0 and x.data_ptr() % 4 == 0
    P = 1 if gpu.INTERPRET else min(S, programs or fit)
    if P > 1 and R * P > sms:
        raise ValueError(f"programs={P} per request: R * P = {R * P} must stay within the {sms} SMs (the barrier)")
    keys = torch.empty((L + 1) * lookahead, R, S, device=device, dtype=torch.int64)  # per round and row
    accept_len = torch.empty(R, device=device, dtype=torch.long)
    accepted_nodes = torch.empty(R, L + 1, device=device, dtype=torch.long)
    bonus = torch.empty(R, device=device, dtype=torch.long)
    _walk_kernel[(R, P)](
        x,
        token_ids.contiguous(),
        parents.contiguous(),
        keys,
        _barrier_counters(device, P) if P > 1 else keys,
        accept_len,
        accepted_nodes,
        bonus,
        R,
        N,
        V,
        S,
        chunk,
        x.stride(0),
        x.stride(1),
        P=P,
        L=L,
        NN=triton.next_power_of_2(N),
        SS=triton.next_power_of_2(S),
        LP=triton.next_power_of_2(L + 1),
        BLOCK=block,
        LA=lookahead,
        NATIVE=not gpu.INTERPRET,
        PAIRS=pairs,
        num_warps=max(1, min(MAX_WARPS, lookahead * block // 512)),
        **gpu.pdl_launch(device),
    )
    return accept_len, accepted_nodes, bonus
