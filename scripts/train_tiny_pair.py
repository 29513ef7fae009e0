#!/usr/bin/env python3
"""Train the tiny target / DFlash-drafter pair shipped in sglang_dflash/assets/tiny-pair.

All data is the Python standard library's own source (`sysconfig.get_paths()["stdlib"]`, *.py),
which every machine has offline. Files whose relative path hashes to 0 mod 50 are held out.

Stages (all in this one script):
  a. tokenizer: byte-level BPE (`tokenizers`), special tokens <|endoftext|> (eos, separates files)
     and <|MASK|> (the drafter's block filler), saved in Hugging Face format beside the target;
  b. target: transformers' Qwen3_5ForCausalLM (Gated DeltaNet + gated full attention), next-token
     prediction on the stdlib stream, bf16 autocast on GPU, AdamW, saved as bf16 safetensors;
  c. drafter: `sglang_dflash.init_draft` then distillation from the frozen target: greedy
     rollouts of the target (what the drafter sees at inference) plus natural windows; for each
     sequence many random anchors a, each block [token a, MASK x 15] attends to the context
     features of positions < a and to its own 16 positions, labels are the target's greedy
     next tokens at a+1 .. a+15, loss weights exp(-(k-1)/7) over depth k. The training forward
     reuses the drafter's own modules; --smoke asserts it equals DFlashDrafter.forward;
  d. evaluation with the project's engine (AR / DFLASH / DDTREE, greedy) on held-out prompts.

A corpus tokenized on one machine (--write-corpus: its stdlib, test suite included) can train on another
(--corpus), and the rollouts can be generated once (--rollouts-file, --rollouts-only) for several drafter runs.

  python scripts/train_tiny_pair.py --smoke --out /tmp/tiny-smoke          # ~1 minute on CPU, with the checks
  python scripts/train_tiny_pair.py --out /tmp/tok --tokenizer-only         # the shipped tokenizer (CPU, 22 s)
  python3 scripts/train_tiny_pair.py --out /tmp/pair --device cuda \
      --tokenizer sglang_dflash/assets/tiny-pair/target --skip-eval --bar-interval 30 --target-steps 20000 \
      --target-time 195 --draft-steps 20000 --draft-time 185 --rollout-time 40   # the shipped target (one H200, 438 s)
  python scripts/train_tiny_pair.py --out /tmp/tok --tokenizer sglang_dflash/assets/tiny-pair/target \
      --write-corpus build/tinypair/corpus.pt                                   # the v2 corpus (CPU, 27 s)
  git show 9cdaba4:benchmarks/results/2026-11-29_h200_tiny_pair_v2.sh | bash   # the shipped drafter (one H200, 439 s)
  python scripts/train_tiny_pair.py --eval-only --out /tmp/pair             # its evaluation (CPU)
  git show 9cdaba4:benchmarks/results/2026-11-30_h200_tiny_pair_v3.sh | bash   # drafter v3: from v2, demo-like
                                                                                # validation (one H200, 430 s)
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import inspect
import json
import math
import random
import sys
import sysconfig
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sglang_dflash.models.layers import masked_attention, save_checkpoint  # noqa: E402

EOS, MASK = "<|endoftext|>", "<|MASK|>"


def log(msg: str) -> None:
    tqdm.write(f"[{time.strftime('%H:%M:%S')}] {msg}")
    sys.stdout.flush()


# ----------------------------------------------------------------------------------------------- data


def stdlib_files(limit: int | None = None) -> tuple[list[str], list[str], list[str]]:
    """(train texts, held-out texts, held-out relative paths) of the stdlib's *.py files, in a fixed order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(f for f in root.rglob("*.py") if not {"site-packages", "dist-packages"} & set(f.relative_to(root).parts))
    train, held, held_names = [], [], []
    for f in files:
        rel = f.relative_to(root).as_posix()
        try:
            text = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if not text.strip():
            continue
        if int(hashlib.md5(rel.encode()).hexdigest(), 16) % 50 == 0:
            held.append(text)
            held_names.append(rel)
        else:
            train.append(text)
    if limit:
        train, held, held_names = train[:limit], held[: max(8, limit // 10)], held_names[: max(8, limit // 10)]
    return train, held, held_names


def train_tokenizer(texts: list[str], vocab_size: int, out_dir: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS, MASK],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=True,
    )
    tok.train_from_iterator(texts, trainer, length=len(texts))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=EOS, mask_token=MASK)
    save_tokenizer(fast, out_dir)
    return fast


def save_tokenizer(tok, out_dir: Path) -> None:
    """save_pretrained, with the class name transformers 4.x and 5.x both load and without load-time flags."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(out_dir))
    cfg_file = out_dir / "tokenizer_config.json"
    cfg = {k: v for k, v in json.loads(cfg_file.read_text()).items() if k not in ("is_local", "local_files_only")}
    cfg_file.write_text(json.dumps({**cfg, "tokenizer_class": "PreTrainedTokenizerFast"}, indent=2))


def encode_files(tok, texts: list[str]) -> list[list[int]]:
    bt = tok.backend_tokenizer
    encode = getattr(bt, "encode_batch_fast", bt.encode_batch)  # no offsets: faster (tokenizers >= 0.21)
    return [e.ids for e in encode(texts, add_special_tokens=False)]


def pack(files_ids: list[list[int]]) -> dict:
    return {
        "ids": torch.tensor([t for ids in files_ids for t in ids], dtype=torch.int16),
        "lens": torch.tensor([len(ids) for ids in files_ids], dtype=torch.long),
    }


def unpack(packed: dict) -> list[list[int]]:
    return [x.tolist() for x in packed["ids"].long().split(packed["lens"].tolist())]


def write_corpus(path: Path, tok, train_texts, held_texts, held_names) -> None:
    """The tokenized stdlib of this machine (training and held-out files, held-out names) in one small file, so a
    machine with a smaller stdlib (e.g. Debian's, without the test suite) trains on the same, larger corpus."""
    assert len(tok) <= 32767, "int16 token ids"
    data = {
        "train": pack(encode_files(tok, train_texts)),
        "held": pack(encode_files(tok, held_texts)),
        "held_names": held_names,
        "source": f"{sysconfig.get_paths()['stdlib']} (Python {sys.version.split()[0]})",
        "train_bytes": sum(len(t.encode()) for t in train_texts),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(data, path)


def stream(files_ids: list[list[int]], eos: int, seed: int) -> torch.Tensor:
    order = list(range(len(files_ids)))
    random.Random(seed).shuffle(order)
    out = []
    for i in order:
        out.extend(files_ids[i])
        out.append(eos)
    return torch.tensor(out, dtype=torch.long)


def windows(data: torch.Tensor, batch: int, length: int, gen: torch.Generator) -> torch.Tensor:
    start = torch.randint(0, len(data) - length, (batch,), generator=gen, device=data.device)
    return data[start[:, None] + torch.arange(length, device=data.device)]


# ------------------------------------------------------------------------------------- GDN training path


def fast_chunk_gated_delta_rule(
    query, key, value, g, beta, chunk_size=64, initial_state=None, output_final_state=False, use_qk_l2norm_in_kernel=False, **_
):
    """transformers' torch_chunk_gated_delta_rule with its 63-step row loop replaced by one triangular solve
    ((I - A)^-1 for the strictly lower A); same maths, ~10x fewer kernel launches. --smoke checks equality."""
    initial_dtype = query.dtype
    if use_qk_l2norm_in_kernel:
        query = F.normalize(query.float(), dim=-1, eps=1e-6)
        key = F.normalize(key.float(), dim=-1, eps=1e-6)
    query, key, value, beta, g = [x.transpose(1, 2).contiguous().to(torch.float32) for x in (query, key, value, beta, g)]
    B, H, T, K = key.shape
    V = value.shape[-1]
    pad = (chunk_size - T % chunk_size) % chunk_size
    query, key, value = (F.pad(x, (0, 0, 0, pad)) for x in (query, key, value))
    beta, g = F.pad(beta, (0, pad)), F.pad(g, (0, pad))
    n = (T + pad) // chunk_size
    query = query * K**-0.5
    v_beta, k_beta = value * beta[..., None], key * beta[..., None]
    query, key, value, k_beta, v_beta = (x.reshape(B, H, n, chunk_size, -1) for x in (query, key, value, k_beta, v_beta))
    g = g.reshape(B, H, n, chunk_size).cumsum(-1)
    decay = (g[..., :, None] - g[..., None, :]).tril().exp().tril()
    eye = torch.eye(chunk_size, device=query.device, dtype=torch.float32)
    strict = torch.tril(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device), -1)
    a = ((k_beta @ key.transpose(-1, -2)) * decay).masked_fill(~strict, 0)  # = -attn of the reference
    attn = torch.linalg.solve_triangular(eye + a, eye.expand_as(a), upper=False, unitriangular=True)
    value = attn @ v_beta
    k_cumdecay = attn @ (k_beta * g.exp()[..., None])
    # everything but the chunk-to-chunk recurrence, batched over chunks
    upper = torch.triu(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device), 1)
    qk = (query @ key.transpose(-1, -2) * decay).masked_fill(upper, 0)
    q_decayed = query * g.exp()[..., None]
    k_decayed = key * (g[..., -1:] - g).exp()[..., None]
    g_last = g[..., -1].exp()[..., None, None]
    state = torch.zeros(B, H, K, V, device=query.device) if initial_state is None else initial_state.float()
    outs = []
    for qk_i, qd_i, kd_i, kc_i, v_i, gl_i in zip(*(x.unbind(2) for x in (qk, q_decayed, k_decayed, k_cumdecay, value, g_last))):
        v_new = v_i - kc_i @ state
        outs.append(qd_i @ state + qk_i @ v_new)
        state = state * gl_i + kd_i.transpose(-1, -2) @ v_new
    out = torch.stack(outs, 2).reshape(B, H, -1, V)[:, :, :T].transpose(1, 2).contiguous().to(initial_dtype)
    return out, (state if output_final_state else None)


FAST_GDN_CALLS = [0]


def counted_fast_gdn(*args, **kwargs):
    FAST_GDN_CALLS[0] += 1
    return fast_chunk_gated_delta_rule(*args, **kwargs)


def patch_gdn(model) -> str:
    """Use the fast torch path where transformers fell back to its reference (keeps fla kernels if present).
    transformers <= 5.3 keeps the function on each GatedDeltaNet module; later releases call a module-level one."""
    import importlib.util

    import transformers.models.qwen3_5.modeling_qwen3_5 as mq

    kinds = set()
    for m in model.modules():
        fn = getattr(m, "chunk_gated_delta_rule", None)
        if fn is None:
            continue
        if getattr(fn, "__name__", "") == "torch_chunk_gated_delta_rule":
            m.chunk_gated_delta_rule = counted_fast_gdn
        kinds.add(getattr(m.chunk_gated_delta_rule, "__module__", "?") + "." + m.chunk_gated_delta_rule.__name__)
    if not kinds and importlib.util.find_spec("fla") is None and callable(getattr(mq, "chunk_gated_delta_rule", None)):
        # kept only if the model's output is unchanged and the patch is really called
        original, calls = mq.chunk_gated_delta_rule, FAST_GDN_CALLS[0]
        x = torch.randint(0, model.config.vocab_size, (2, 80), device=next(model.parameters()).device)
        with torch.no_grad():
            ref = model(input_ids=x, use_cache=False).logits.float()
            mq.chunk_gated_delta_rule = counted_fast_gdn
            try:
                new = model(input_ids=x, use_cache=False).logits.float()
                ok = FAST_GDN_CALLS[0] > calls and bool((new - ref).norm() <= 1e-3 * ref.norm())
            except Exception:  # noqa: BLE001
                ok = False
        if ok:
            kinds.add("module-level fast path (checked equal)")
        else:
            mq.chunk_gated_delta_rule = original
    return ", ".join(sorted(kinds)) or "transformers' own"


# ---------------------------------------------------------------------------------------------- helpers


def progress(step: int, steps: int, t0: float, budget_s: float) -> float:
    return min(1.0, max(step / steps, (time.perf_counter() - t0) / budget_s))


def lr_at(frac: float, step: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def scheduled_steps(opt, steps: int, t0: float, budget_s: float, peak_lr: float, warmup: int, bar):
    """Step numbers 1, 2, ... until `steps` are done or the time budget (from t0) is spent; sets each step's
    learning rate (warm-up, then cosine over the budget) before yielding it, and advances `bar` after it."""
    done = 0
    while (frac := progress(done, steps, t0, budget_s)) < 1.0:
        for group in opt.param_groups:
            group["lr"] = lr_at(frac, done, peak_lr, warmup)
        done += 1
        yield done
        bar.update(1)


def optimizer_step(opt, loss: torch.Tensor, params) -> None:
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)


def adamw(params, lr, device, wd=0.1):
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), fused=device.type == "cuda")


def autocast(device):
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


# ----------------------------------------------------------------------------------------------- target


def target_config(args, vocab: int, eos: int):
    from transformers import Qwen3_5TextConfig

    pattern = ["linear_attention"] * (args.full_every - 1) + ["full_attention"]
    types = (pattern * args.layers)[: args.layers]
    return Qwen3_5TextConfig(
        vocab_size=vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        layer_types=types,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=args.head_dim,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=args.gdn_head_dim,
        linear_value_head_dim=args.gdn_head_dim,
        linear_conv_kernel_dim=4,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        tie_word_embeddings=True,
        eos_token_id=eos,
        pad_token_id=eos,
        bos_token_id=None,
    )


@torch.no_grad()
def heldout_loss(model, batch: torch.Tensor, device) -> float:
    model.eval()
    total = 0.0
    for x in batch.split(16):
        with autocast(device):
            logits = model(input_ids=x[:, :-1], use_cache=False).logits
        total += F.cross_entropy(logits.float().flatten(0, 1), x[:, 1:].flatten(), reduction="sum").item()
    model.train()
    return total / batch[:, 1:].numel()


def train_target(args, cfg, train: torch.Tensor, held: torch.Tensor, device, stats: dict):
    from transformers import Qwen3_5ForCausalLM

    torch.manual_seed(args.seed)
    model = Qwen3_5ForCausalLM(cfg).to(device).train()
    stats["gdn_impl"] = patch_gdn(model)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"target: {n_params / 1e6:.2f} M parameters, layers {cfg.layer_types}, GDN path {stats['gdn_impl']}")
    opt = adamw(list(model.parameters()), args.target_lr, device)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    held_batch = windows(held, args.eval_batches, args.seq_len + 1, torch.Generator(device=device).manual_seed(1))
    t0, losses, step, running, best = time.perf_counter(), [], 0, 0.0, (float("inf"), 0, None)
    bar = tqdm(total=args.target_steps, desc="target", mininterval=args.bar_interval, unit="step")
    for step in scheduled_steps(opt, args.target_steps, t0, args.target_time, args.target_lr, args.warmup, bar):
        x = windows(train, args.target_batch, args.seq_len + 1, gen)
        with autocast(device):
            logits = model(input_ids=x[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), x[:, 1:].flatten())
        optimizer_step(opt, loss, model.parameters())
        if step == 1:
            log(f"fast GDN path called {FAST_GDN_CALLS[0]} times in the first step (0: transformers' own path runs)")
        running = running + loss.detach()  # no host sync per step
        if step % args.avg_every == 0:
            losses.append((step, running.item() / args.avg_every))
            running = 0.0
            bar.set_postfix(loss=f"{losses[-1][1]:.3f}")
        if step % args.eval_every == 0:
            hl = heldout_loss(model, held_batch, device)
            if hl < best[0]:
                best = (hl, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            log(f"target step {step}: train loss {losses[-1][1]:.4f}, held-out {hl:.4f}")
    bar.close()
    sync(device)
    kept = step
    if best[2] is not None and best[0] < heldout_loss(model, held_batch, device):  # held-out loss rose: overfitting
        model.load_state_dict(best[2])
        kept = best[1]
        log(f"target: restored the step-{kept} weights (best held-out loss)")
    stats["target_kept_step"] = kept
    stats["target_train_s"] = round(time.perf_counter() - t0, 1)
    stats["target_steps"] = step
    stats["target_tokens"] = step * args.target_batch * args.seq_len
    stats["target_train_loss"] = round(sum(v for _, v in losses[-4:]) / max(1, len(losses[-4:])), 4)  # last 100 steps
    stats["target_loss_curve"] = [(k, round(v, 4)) for k, v in losses[:: max(1, len(losses) // 40)]]
    stats["target_heldout_loss"] = round(heldout_loss(model, held_batch, device), 4)
    stats["target_params"] = n_params
    log(
        f"target done: {step} steps in {stats['target_train_s']} s, train loss {stats['target_train_loss']}, "
        f"held-out loss {stats['target_heldout_loss']} (nats/token)"
    )
    return model.eval()


def save_target(model, tok, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(str(out))
    save_tokenizer(tok, out)
    model.float()


# ------------------------------------------------------------------------------------------------ drafter


def retap_draft(draft_dir: Path, layer_ids: list[int], seed: int):
    """Rewrite init_draft's drafter at draft_dir to tap `layer_ids`, initialised as init_draft initialises."""
    from sglang_dflash.models.config import DraftConfig
    from sglang_dflash.models.dflash_draft import DFlashDrafter

    cfg = json.loads((draft_dir / "config.json").read_text())
    cfg["dflash_config"]["target_layer_ids"] = layer_ids
    torch.manual_seed(seed)
    model = DFlashDrafter(DraftConfig.from_dict(cfg))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]))
    (draft_dir / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    save_checkpoint(model, draft_dir)
    return model


def taps_and_preds(target, tokens: torch.Tensor, layer_ids, device):
    """Concatenated hidden states of the tapped decoder layers (hidden_states[l + 1]) and greedy next tokens."""
    with torch.no_grad(), autocast(device):
        out = target(input_ids=tokens, use_cache=False, output_hidden_states=True)
    hs = out.hidden_states
    assert len(hs) == target.config.num_hidden_layers + 1
    return torch.cat([hs[i + 1] for i in layer_ids], -1), out.logits.argmax(-1)


def drafter_block_logits(drafter, embed, lm_head, taps: torch.Tensor, tokens: torch.Tensor, anchors: torch.Tensor):
    """Training forward of the DFlash drafter, all blocks of a batch at once, with the drafter's own modules.

    taps [B, T, n_taps * D] (target hidden states of the tapped layers), tokens [B, T], anchors [B, A]
    (1 <= a, a + block_size - 1 < T). Block (b, j) = [tokens[b, a], MASK x (bs - 1)] at positions a .. a + bs - 1;
    its queries see the context features of positions < a (per layer: k_proj/v_proj, k_norm, RoPE, exactly as
    DFlashDrafter.append_context caches them) and the keys of their own block (causal only where the layer is),
    never another block. Returns logits [B, A, bs - 1, V] for depths 1 .. bs - 1."""
    c = drafter.config
    bs, (B, T, _), A = c.block_size, taps.shape, anchors.shape[1]
    dev = tokens.device
    feats = drafter.hidden_norm(drafter.fc(taps))
    block = torch.full((B, A, bs), c.mask_token_id, device=dev, dtype=torch.long)
    block[:, :, 0] = tokens.gather(1, anchors)
    h = embed(block).flatten(1, 2)
    if c.input_embedding_scale != 1.0:
        h = h * c.input_embedding_scale
    q_pos = (anchors[:, :, None] + torch.arange(bs, device=dev)).flatten(1)  # [B, A * bs]
    ctx_pos = torch.arange(T, device=dev).expand(B, T)
    before_anchor = ctx_pos[:, None, :] < anchors.repeat_interleave(bs, 1)[:, :, None]  # [B, A * bs, T]
    blk = torch.arange(A, device=dev).repeat_interleave(bs)
    same_block = (blk[:, None] == blk[None, :])[None]
    for layer in drafter.layers:
        attn = layer.self_attn
        see = torch.cat(
            [
                attn.visible(q_pos, ctx_pos, in_block=False) & before_anchor,
                attn.visible(q_pos, q_pos, in_block=True) & same_block,
            ],
            dim=2,
        )
        x = layer.input_layernorm(h)
        q = attn.rotary(attn.q_norm(attn.q_proj(x).view(B, A * bs, -1, attn.head_dim)), q_pos)
        k_blk, v_blk = attn.kv(x, q_pos)
        k_ctx, v_ctx = attn.kv(feats, ctx_pos)
        dt = v_blk.dtype  # the projections' dtype (bf16 under autocast): norms and RoPE return float32
        k, v = torch.cat([k_ctx, k_blk], 1).to(dt), torch.cat([v_ctx, v_blk], 1).to(dt)
        o = masked_attention(q.to(dt), k, v, see, attn.head_dim**-0.5)
        h = h + attn.o_proj(o.reshape(B, A * bs, -1))
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    h = drafter.norm(h.view(B, A, bs, -1)[:, :, 1:])
    logits = lm_head(h).float() * c.output_multiplier
    if c.final_logit_softcapping:
        logits = torch.tanh(logits / c.final_logit_softcapping) * c.final_logit_softcapping
    return logits


@torch.no_grad()
def check_training_forward(drafter, embed, lm_head, taps: torch.Tensor, tokens: torch.Tensor, anchors: list[int]) -> float:
    """Max |training logits - DFlashDrafter.forward logits| (fp32) for blocks at `anchors` of sequence 0."""
    drafter = drafter.float()
    train = drafter_block_logits(drafter, embed, lm_head, taps[:1].float(), tokens[:1], torch.tensor([anchors]))
    worst = 0.0
    for j, a in enumerate(anchors):
        cache = drafter.new_cache(1, tokens.shape[1] + drafter.config.block_size)
        slot, ctx = torch.tensor([0]), taps[:1, :a].float()
        if "nodes" in inspect.signature(drafter.append_context).parameters:  # (cache, taps, slots, start, nodes)
            drafter.append_context(cache, ctx, slot, torch.tensor([0]), torch.arange(a)[None])
        else:  # (cache, taps, slots, positions)
            drafter.append_context(cache, ctx, slot, torch.arange(a)[None])
        ref = drafter(cache, tokens[:1, a], torch.tensor([0]), torch.tensor([a]), embed, lm_head)
        assert torch.allclose(train[0, j], ref[0], atol=1e-4, rtol=1e-4), (a, (train[0, j] - ref[0]).abs().max())
        worst = max(worst, (train[0, j] - ref[0]).abs().max().item())
    return worst


@torch.no_grad()
def check_taps(target_dir: Path, layer_ids, tokens: list[int]) -> float:
    """The engine's Qwen3_5Target taps vs transformers' hidden_states[l + 1] on the saved checkpoint (CPU, fp32)."""
    from transformers import Qwen3_5ForCausalLM

    from sglang_dflash.dflash import chain_tree
    from sglang_dflash.models import Qwen3_5Target

    hf = Qwen3_5ForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32).eval()
    x = torch.tensor([tokens])
    hs = hf(input_ids=x, use_cache=False, output_hidden_states=True).hidden_states
    ref = torch.cat([hs[i + 1] for i in layer_ids], -1)
    eng = Qwen3_5Target.from_pretrained(target_dir, tap_layers=tuple(layer_ids))
    cache = eng.new_cache(1, len(tokens) + 1)
    out = eng.verify(cache, chain_tree(x[:, 1:], x[:, 0]), torch.tensor([0]), torch.tensor([0]))
    err = (out.taps - ref).abs().max().item() / ref.abs().max().item()
    assert err < 1e-3, f"engine taps differ from transformers' hidden_states by {err:.2e} (relative)"
    return err


@torch.no_grad()
def greedy_rollouts(target, prompts: torch.Tensor, length: int, batch: int, device, desc: str) -> torch.Tensor:
    """Greedy continuations of prompts [N, P] to `length` tokens, eos not stopping them: transformers' generate with
    its KV / recurrent-state cache, or (if that fails or stops early) a full recompute per token."""
    out = []
    for chunk in tqdm(prompts.split(batch), desc=desc, mininterval=5):
        seq = chunk.to(device)
        if ROLLOUT_CACHE[0]:
            eos, target.generation_config.eos_token_id = target.generation_config.eos_token_id, None
            try:
                with torch.no_grad(), autocast(device):
                    gen = target.generate(
                        seq,
                        attention_mask=torch.ones_like(seq),
                        max_new_tokens=length - seq.shape[1],
                        do_sample=False,
                        pad_token_id=0,
                        use_cache=True,
                    )
                if gen.shape != (len(seq), length):
                    raise RuntimeError(f"generate returned {tuple(gen.shape)}")
                out.append(gen)
                continue
            except Exception as e:  # noqa: BLE001 - any failure: the slow path below is always right
                ROLLOUT_CACHE[0] = False
                log(f"rollouts: cached generate failed ({type(e).__name__}: {e}); recomputing each token instead")
            finally:
                target.generation_config.eos_token_id = eos
        while seq.shape[1] < length:
            with torch.no_grad(), autocast(device):
                logits = target(input_ids=seq, use_cache=False, logits_to_keep=1).logits
            seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], 1)
        out.append(seq)
    return torch.cat(out)


ROLLOUT_CACHE = [True]


def file_start_prompts(files_ids: list[list[int]], length: int) -> torch.Tensor:
    rows = [ids[:length] for ids in files_ids if len(ids) >= length]
    return torch.tensor(rows, dtype=torch.long) if rows else torch.empty(0, length, dtype=torch.long)


PROMPT_LENS = (8, 12, 16, 20, 24, 32, 40, 48, 64)
DEMO_PROMPT_LENS = (8, 12, 16, 20, 24)  # the demo's prompts are 12-22 tokens


def periodic_tail(seqs: torch.Tensor, width: int = 64) -> torch.Tensor:
    """bool [N]: the last `width` tokens of each sequence repeat with a period <= width (a greedy loop)."""
    w = min(width, seqs.shape[1] // 2)
    tail = seqs[:, -w:]
    return torch.stack([(tail == seqs[:, -w - p : seqs.shape[1] - p]).all(1) for p in range(1, w + 1)], 1).any(1)


def line_start_prompts(files_ids: list[list[int]], newline_ids, lens, n: int, file_start_frac: float, gen) -> list[list[int]]:
    """n prompts of lengths cycling through `lens`: a share file_start_frac of file starts, the rest windows that begin
    at a line start inside the files (past their first 64 tokens), in a fixed random order."""
    is_nl = torch.zeros(max(max(map(max, files_ids)), max(newline_ids)) + 1, dtype=torch.bool)
    is_nl[list(newline_ids)] = True
    starts = []  # (file, offset)
    for f, ids in enumerate(files_ids):
        t = torch.tensor(ids)
        at = (is_nl[t[:-1]].nonzero().squeeze(1) + 1).tolist()
        starts += [(f, o) for o in at if 64 <= o < len(ids) - max(lens)]
    order = torch.randperm(len(starts), generator=gen).tolist()
    files = [f for f, ids in enumerate(files_ids) if len(ids) >= max(lens)]
    forder = [files[i] for i in torch.randperm(len(files), generator=gen).tolist()]
    out, k, j = [], 0, 0
    for i in range(n):
        P = lens[i % len(lens)]
        if forder and (i * file_start_frac) % 1 + file_start_frac >= 1:  # every 1/frac-th prompt
            out.append(files_ids[forder[j % len(forder)]][:P])
            j += 1
        else:
            f, o = starts[order[k % len(order)]]
            out.append(files_ids[f][o : o + P])
            k += 1
    return out


def demo_val_set(args, target, held_ids, newline_ids, bs: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The demo-like validation set: (sequences [N, T], prompt lengths [N]). Prompts of 8-24 tokens from held-out
    files (a quarter file starts, the rest line-start windows), each continued greedily to T = 24 +
    --demo-val-new + block_size tokens, so that every DFLASH step of --demo-val-new new tokens has its labels."""
    prompts = line_start_prompts(held_ids, newline_ids, DEMO_PROMPT_LENS, args.demo_val, 0.25, torch.Generator().manual_seed(11))
    T = max(DEMO_PROMPT_LENS) + args.demo_val_new + bs
    seqs = torch.empty(len(prompts), T, dtype=torch.long)
    lens = torch.tensor([len(p) for p in prompts])
    for P in DEMO_PROMPT_LENS:  # one prompt length per generate call; the set keeps the prompts' order
        at = (lens == P).nonzero().squeeze(1)
        if len(at):
            group = torch.tensor([prompts[i] for i in at.tolist()], dtype=torch.long)
            seqs[at] = greedy_rollouts(target, group, T, args.rollout_batch, device, f"rollouts (demo-like, prompt {P})").cpu()
    return seqs, lens


def make_rollouts(args, target, train_ids, train, held_ids, newline_ids, device, stats):
    """Pool of distinct target-greedy sequences of args.draft_seq_len tokens. Each batch has one prompt length P
    (cycling through --rollout-prompt-lens, default PROMPT_LENS); 1/8 of its prompts are file starts, the rest
    windows of the training stream that start at a line start (like the demo's prompts). A validation pool comes
    from windows inside held-out files (not their starts, which the evaluation uses)."""
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(args.seed + 7)
    L = args.draft_seq_len
    val_prompts = torch.tensor(
        [ids[o : o + 40] for o in range(64, 4096, 192) for ids in held_ids if len(ids) >= o + 40][: args.draft_val],
        dtype=torch.long,
    )
    val = greedy_rollouts(target, val_prompts, L, args.rollout_batch, device, "rollouts (held-out)")
    lens = tuple(int(x) for x in args.rollout_prompt_lens.split(",")) if args.rollout_prompt_lens else PROMPT_LENS
    cpu_train = train.cpu()
    is_nl = torch.zeros(int(cpu_train.max()) + 1, dtype=torch.bool)
    is_nl[[i for i in newline_ids if i < len(is_nl)]] = True
    line_starts = is_nl[cpu_train[:-1]].nonzero().squeeze(1) + 1
    line_starts = line_starts[line_starts < len(cpu_train) - max(lens)]
    pool, n, k = [], 0, 0
    while not pool or (n < args.rollouts and time.perf_counter() - t0 < args.rollout_time):
        P = lens[k % len(lens)]
        k += 1
        B = min(args.rollout_batch, max(1, args.rollouts - n))
        starts = file_start_prompts(train_ids, P)
        pick = starts[torch.randperm(len(starts), generator=gen)[: B // 8]]
        at = line_starts[torch.randint(0, len(line_starts), (B - len(pick),), generator=gen)]
        prompts = torch.cat([pick, cpu_train[at[:, None] + torch.arange(P)]])
        pool.append(greedy_rollouts(target, prompts, L, args.rollout_batch, device, f"rollouts (prompt {P})").cpu())
        n += len(prompts)
        log(f"rollouts: {n} after {time.perf_counter() - t0:.1f} s")
    sync(device)
    pool = torch.unique(torch.cat(pool), dim=0)  # identical prompts give identical greedy rollouts
    pool = pool[torch.randperm(len(pool), generator=gen)]
    stats["rollouts"], stats["rollouts_distinct"] = n, len(pool)
    stats["rollouts_periodic_tail"] = round(periodic_tail(pool).float().mean().item(), 4)
    log(f"rollouts: {stats['rollouts_periodic_tail']:.1%} of the distinct ones end in a loop (last 64 tokens periodic)")
    stats["rollout_s"] = round(time.perf_counter() - t0, 1)
    log(f"rollouts: {n} training sequences ({len(pool)} distinct) of {L} tokens + {len(val)} held-out in {stats['rollout_s']} s")
    return pool, val.cpu()


def block_loss(logits, labels, weights):
    """Weighted CE over depths (weights [bs - 1], or per block [B, A, bs - 1]); also the exact-match acceptance length
    per block (accepted drafts + 1)."""
    ce = F.cross_entropy(logits.flatten(0, 2), labels.flatten(), reduction="none").view(labels.shape)
    loss = (ce * weights).sum() / weights.expand_as(ce).sum()
    accepted = (logits.argmax(-1) == labels).long().cumprod(-1).sum(-1)
    return loss, accepted.float().mean() + 1


def sample_anchors(B: int, A: int, T: int, bs: int, gen, device) -> torch.Tensor:
    scores = torch.rand(B, T - bs, generator=gen, device=device)
    return scores.topk(A, dim=-1).indices + 1  # distinct anchors in [1, T - bs]


def chain_weights(tokens, preds, anchors, weights, bs: int) -> torch.Tensor:
    """Per-block depth weights [B, A, bs - 1] that keep depth k only where the k - 1 tokens after the anchor are the
    target's own greedy tokens (--chain-labels-only). The engine drafts the greedy chain, so a label behind a natural
    (prompt or window) token is one the engine never asks for."""
    greedy = torch.ones_like(tokens, dtype=torch.bool)
    greedy[:, 1:] = preds[:, :-1] == tokens[:, 1:]  # token j is the target's greedy pick after tokens < j
    after = greedy.gather(1, (anchors[:, :, None] + 1 + torch.arange(bs - 2, device=tokens.device)).flatten(1))
    ok = torch.cat([torch.ones_like(anchors[:, :, None], dtype=torch.bool), after.view(*anchors.shape, bs - 2)], 2)
    return weights * ok.long().cumprod(-1)


def draft_batch(target, drafter, tokens, anchors, layer_ids, device, cached=None, chain=None):
    """Drafter logits and labels for the blocks at `anchors`; `cached`: (taps, preds) of `tokens` computed before.
    With chain (depth weights [bs - 1]) also the per-block weights of chain_weights."""
    taps, preds = cached if cached is not None else taps_and_preds(target, tokens, layer_ids, device)
    if device.type != "cuda":
        taps = taps.float()
    bs = drafter.config.block_size
    # depth k (1..bs-1) of the block at a: the target's greedy token after the prefix ending at a + k - 1
    labels = preds.gather(1, (anchors[:, :, None] + torch.arange(bs - 1, device=device)).flatten(1)).view(*anchors.shape, bs - 1)
    embed, lm_head = target.get_input_embeddings(), target.get_output_embeddings()
    with autocast(device):
        logits = drafter_block_logits(drafter, embed, lm_head, taps, tokens, anchors)
    if chain is not None:
        return logits, labels, chain_weights(tokens, preds, anchors, chain, bs)
    return logits, labels


@torch.no_grad()
def block_accepts(target, drafter, seqs, lo: int, layer_ids, device, cached=None, batch: int = 16) -> torch.Tensor:
    """Accepted drafts + 1 of the drafter's block at every anchor a in [lo, T - bs] of every sequence [N, T] (int
    [N, T - bs - lo + 1]). The training forward equals DFlashDrafter.forward, so on greedy continuations this is what
    the engine's DFLASH step at a accepts."""
    bs, T = drafter.config.block_size, seqs.shape[1]
    anchors = torch.arange(lo, T - bs + 1, device=device)
    out = []
    for i in range(0, len(seqs), batch):
        sl = slice(i, i + batch)
        tokens = seqs[sl].to(device)
        c = (cached[0][sl], cached[1][sl]) if cached is not None else None
        logits, labels = draft_batch(target, drafter, tokens, anchors.expand(len(tokens), -1), layer_ids, device, c)
        out.append((logits.argmax(-1) == labels).long().cumprod(-1).sum(-1) + 1)
    return torch.cat(out).cpu()


def walk_accept(acc: torch.Tensor, lo: int, seqs: torch.Tensor, prompt_lens, new_tokens: int, eos: int) -> dict:
    """What the engine's greedy DFLASH reports on these continuations (acc from block_accepts): from the first new
    token on, each step at anchor a emits acc[a] tokens and moves to a + acc[a]; a request stops at new_tokens tokens
    or at eos, as the demo's do. mean_accept_len: tokens per verify pass over all steps (the demo's number);
    per_depth: share of steps that accept at least k drafts."""
    steps, per_prompt = [], []
    for row, seq, P in zip(acc.tolist(), seqs.tolist(), prompt_lens.tolist()):
        a, n, mine = P, 1, []
        done = seq[P] == eos
        while not done:
            L = row[a - lo]
            mine.append(L)
            for t in seq[a + 1 : a + L + 1]:
                n += 1
                if n >= new_tokens or t == eos:
                    done = True
                    break
            a += L
        steps += mine
        per_prompt.append((sum(mine), len(mine)))
    s = torch.tensor(steps or [1], dtype=torch.float)
    return {
        "mean_accept_len": round(s.mean().item(), 4),
        "steps": len(steps),
        "per_depth": [round((s > k).float().mean().item(), 3) for k in range(1, 16)],
        "prompt_mean": round(sum(t / max(1, n) for t, n in per_prompt) / max(1, len(per_prompt)), 4),
        "per_prompt": per_prompt,  # (tokens, steps)
    }


@torch.no_grad()
def tap_cache(target, seqs: torch.Tensor, layer_ids, device, batch: int, desc: str):
    """(taps in bf16, greedy preds) of every sequence, computed once (for --cache-taps), into preallocated tensors."""
    n, T = seqs.shape
    width = len(layer_ids) * target.config.hidden_size
    taps = torch.empty(n, T, width, dtype=torch.bfloat16, device=device)
    preds = torch.empty(n, T, dtype=torch.long, device=device)
    for i in tqdm(range(0, n, batch), desc=desc, mininterval=5):
        t, p = taps_and_preds(target, seqs[i : i + batch].to(device), layer_ids, device)
        taps[i : i + batch], preds[i : i + batch] = t, p
    return taps, preds


def train_drafter(args, target, drafter, pool, val, train, device, stats, demo_val=None):
    """Distil the drafter; demo_val: (sequences, prompt lengths) of demo_val_set, validated as the engine's DFLASH
    acceptance (walk_accept), and the weights with the best such acceptance are kept."""
    layer_ids = list(drafter.config.target_layer_ids)
    bs = drafter.config.block_size
    for p in target.parameters():
        p.requires_grad_(False)
    drafter.to(device).train()
    params = [p for p in drafter.parameters() if p.requires_grad]
    n_params = sum(p.numel() for p in params)
    log(f"drafter: {n_params / 1e6:.2f} M parameters, {drafter.config.num_hidden_layers} layers, taps {layer_ids}")
    opt = adamw(params, args.draft_lr, device, wd=0.01)
    weights = torch.exp(-torch.arange(bs - 1, device=device, dtype=torch.float32) / args.gamma)
    gen = torch.Generator(device=device).manual_seed(args.seed + 3)
    pool = pool.to(device)
    val = val.to(device)
    val_anchors = sample_anchors(len(val), args.anchors, val.shape[1], bs, torch.Generator(device=device).manual_seed(5), device)
    n_nat = int(round(args.draft_batch * args.natural_frac))
    T = args.draft_seq_len
    val_cache = pool_cache = demo_cache = None
    eos = target.config.eos_token_id
    if args.cache_taps:  # a fixed natural pool beside the rollouts, target taps computed once for all
        t0 = time.perf_counter()
        n_pool_nat = int(round(len(pool) * args.natural_frac / max(1e-9, 1 - args.natural_frac)))
        pool = torch.cat([pool, windows(train, n_pool_nat, T, gen)])
        n_nat = 0
        pool_cache = tap_cache(target, pool, layer_ids, device, args.draft_batch * 4, "target taps (training pool)")
        val_cache = tap_cache(target, val, layer_ids, device, args.draft_batch * 4, "target taps (validation)")
        if demo_val is not None:
            demo_cache = tap_cache(target, demo_val[0], layer_ids, device, args.draft_batch * 4, "target taps (demo-like)")
        log(f"cached target taps of {len(pool)} sequences ({n_pool_nat} natural) in {time.perf_counter() - t0:.1f} s")

    def validate():
        drafter.eval()
        with torch.no_grad():
            tot, acc, n = 0.0, 0.0, 0
            for i in range(0, len(val), args.draft_batch):
                sl = slice(i, i + args.draft_batch)
                cached = (val_cache[0][sl], val_cache[1][sl]) if val_cache else None
                logits, labels = draft_batch(target, drafter, val[sl], val_anchors[sl], layer_ids, device, cached)
                loss, acc_len = block_loss(logits, labels, weights)
                k = len(labels)
                tot, acc, n = tot + loss.item() * k, acc + acc_len.item() * k, n + k
            walk = None
            if demo_val is not None:
                seqs, plens = demo_val
                lo = int(plens.min())
                acc_all = block_accepts(
                    target, drafter, seqs, lo, layer_ids, device, demo_cache, batch=max(1, args.draft_batch // 8)
                )
                walk = walk_accept(acc_all, lo, seqs, plens, args.demo_val_new, eos)
        drafter.train()
        return tot / max(n, 1), acc / max(n, 1), walk

    def walk_str(w):
        return f", demo-like DFLASH {w['mean_accept_len']:.3f} tokens/pass" if w else ""

    best = (-1.0, 0, None)  # (demo-like DFLASH acceptance, step, weights)

    def keep_best(w, step):
        nonlocal best
        if w and w["mean_accept_len"] > best[0]:
            best = (w["mean_accept_len"], step, {k: v.detach().clone() for k, v in drafter.state_dict().items()})

    if args.init_draft or demo_val is not None:
        vl, va, w = validate()
        log(f"drafter step 0: held-out {vl:.4f} (accept {va:.2f}){walk_str(w)}")
        stats["draft_initial_heldout"] = (round(vl, 4), round(va, 3))
        if w:
            stats["draft_initial_demo_like"] = w
            if args.init_draft:  # the starting weights compete too
                keep_best(w, 0)
    t0, step, hist, running = time.perf_counter(), 0, [], 0.0
    bar = tqdm(total=args.draft_steps, desc="drafter", mininterval=args.bar_interval, unit="step")
    for step in scheduled_steps(opt, args.draft_steps, t0, args.draft_time, args.draft_lr, args.warmup, bar):
        idx = torch.randint(0, len(pool), (args.draft_batch - n_nat,), generator=gen, device=device)
        tokens = torch.cat([pool[idx], windows(train, n_nat, T, gen)]) if n_nat else pool[idx]
        anchors = sample_anchors(len(tokens), args.anchors, T, bs, gen, device)
        cached = (pool_cache[0][idx], pool_cache[1][idx]) if pool_cache else None
        if args.chain_labels_only:
            logits, labels, w = draft_batch(target, drafter, tokens, anchors, layer_ids, device, cached, chain=weights)
        else:
            (logits, labels), w = draft_batch(target, drafter, tokens, anchors, layer_ids, device, cached), weights
        loss, acc_len = block_loss(logits, labels, w)
        optimizer_step(opt, loss, params)
        running = running + torch.stack([loss.detach(), acc_len.detach()])
        if step % args.avg_every == 0:
            avg = (running / args.avg_every).tolist()
            hist.append((step, avg[0], avg[1]))
            running = 0.0
            bar.set_postfix(loss=f"{avg[0]:.3f}", acc=f"{avg[1]:.2f}")
        if step % args.eval_every == 0:
            vl, va, w = validate()
            keep_best(w, step)
            tl = f"train loss {hist[-1][1]:.4f} (accept {hist[-1][2]:.2f}), " if hist else ""
            log(f"drafter step {step}: {tl}held-out {vl:.4f} (accept {va:.2f}){walk_str(w)}")
    bar.close()
    sync(device)
    vl, va, w = validate()
    kept = step
    if w and best[2] is not None and best[0] > w["mean_accept_len"]:
        log(f"drafter: restoring the step-{best[1]} weights (demo-like DFLASH {best[0]:.3f} > final {w['mean_accept_len']:.3f})")
        drafter.load_state_dict(best[2])
        vl, va, w = validate()
        kept = best[1]
    stats["draft_kept_step"] = kept
    if w:
        stats["draft_demo_like"] = w
    stats["draft_train_s"] = round(time.perf_counter() - t0, 1)
    stats["draft_steps"] = step
    stats["draft_params"] = n_params
    last = hist[-4:]  # last 100 steps
    stats["draft_loss_curve"] = [(k, round(v, 4), round(a, 3)) for k, v, a in hist[:: max(1, len(hist) // 40)]]
    stats["draft_train_loss"] = round(sum(h[1] for h in last) / max(1, len(last)), 4)
    stats["draft_train_accept_est"] = round(sum(h[2] for h in last) / max(1, len(last)), 3)
    stats["draft_heldout_loss"] = round(vl, 4)
    stats["draft_heldout_accept_est"] = round(va, 3)
    log(
        f"drafter done: {step} steps in {stats['draft_train_s']} s, train loss {stats['draft_train_loss']}, held-out loss "
        f"{vl:.4f}, held-out block acceptance estimate {va:.2f} tokens/step (mean over random anchors){walk_str(w)}"
    )
    return drafter.eval()


# --------------------------------------------------------------------------------------------- evaluation


def engine_eval(out: Path, demo_val, tok, args, stats: dict) -> dict:
    """The engine's own greedy DFLASH, as `python -m sglang_dflash.demo` runs it (fp32, eos stops, --demo-val-new
    tokens), on the saved pair: on the demo's 4 prompts (DFLASH and DDTREE) and on the first --engine-eval prompts of
    the demo-like validation set (DFLASH), beside the validation's walk estimate for those same prompts."""
    from sglang_dflash.demo import PROMPTS
    from sglang_dflash.engine import generate, load_pair

    t0, device = time.perf_counter(), args.engine_eval_device
    target, drafter = load_pair(out / "target", out / "draft", device)
    eos = target.config.eos_token_ids
    sets = {"demo": ([tok.encode(t) for t in PROMPTS], ("dflash", "ddtree"))}
    n = min(args.engine_eval, len(demo_val[0])) if demo_val is not None else 0
    if n:
        seqs, lens = demo_val
        sets["demo_like"] = ([seqs[i, : lens[i]].tolist() for i in range(n)], ("dflash",))
    res = {}
    for name, (prompts, algos) in sets.items():
        r = res[name] = {"prompts": len(prompts)}
        for algo in algos:
            g = generate(
                target, prompts, args.demo_val_new, algo, drafter, budget=args.budget, eos_token_ids=eos, cuda_graphs=False
            )
            r[algo] = round(g.mean_accept_len, 3)
            if algo == "dflash":
                r["dflash_per_prompt"] = [round(sum(a + 1 for a in x) / max(1, len(x)), 2) for x in g.accept_lens]
        log(f"engine eval ({device}) {name}: " + ", ".join(f"{a} {r[a]:.3f}" for a in algos) + " tokens/pass")
    walk = stats.get("draft_demo_like")
    if n and walk:
        tokens, steps = (sum(x) for x in zip(*walk["per_prompt"][:n]))
        res["demo_like"]["walk_estimate"] = round(tokens / max(1, steps), 3)
        log(f"engine eval: the validation's walk estimate for the same {n} prompts: {res['demo_like']['walk_estimate']:.3f}")
    res["s"] = round(time.perf_counter() - t0, 1)
    stats["engine_eval"] = res
    return res


def evaluate(out: Path, held_ids: list[list[int]], held_names: list[str], args, stats: dict) -> dict:
    """Greedy AR / DFLASH / DDTREE with the project's engine on the first tokens of held-out files: all of them, and
    those outside the test suites (the population of a stdlib that ships without them, e.g. Debian's)."""
    from sglang_dflash.engine import generate
    from sglang_dflash.models import Qwen3_5Target
    from sglang_dflash.models.dflash_draft import DFlashDrafter

    device = args.eval_device
    drafter = DFlashDrafter.from_pretrained(out / "draft", device=device)
    target = Qwen3_5Target.from_pretrained(out / "target", tap_layers=drafter.config.target_layer_ids, device=device)
    nontest = [ids for ids, name in zip(held_ids, held_names) if not any("test" in part for part in name.split("/"))]
    results = {}
    for subset, files in (("heldout", held_ids), ("heldout_nontest", nontest)):
        prompts = [ids[: args.eval_prompt_len] for ids in files if len(ids) >= args.eval_prompt_len + 8][: args.eval_prompts]
        if not prompts:
            continue
        res, summary = {}, {"prompts": len(prompts), "prompt_len": args.eval_prompt_len, "new_tokens": args.eval_new_tokens}
        for algo in ("ar", "dflash", "ddtree"):
            res[algo] = r = generate(target, prompts, args.eval_new_tokens, algo, drafter, budget=args.budget, progress=True)
            summary[algo] = {
                "mean_accept_len": round(r.mean_accept_len, 3),
                "tokens_per_s": round(r.tokens_per_s, 1),
                "decode_s": round(r.decode_s, 2),
            }
            log(
                f"eval {subset} {algo:<7} ({device}): mean acceptance {r.mean_accept_len:.3f} tokens/step, "
                f"{r.tokens_per_s:.1f} tokens/s"
            )
        summary["identical_outputs"] = all(r.output_ids == res["ar"].output_ids for r in res.values())
        summary["budget"], summary["device"] = args.budget, device
        log(f"eval {subset}: outputs identical across ar/dflash/ddtree: {summary['identical_outputs']}")
        results[subset] = summary
    stats["eval"] = results
    return results


# --------------------------------------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory: target/ (model + tokenizer), draft/, summary.json")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--smoke", action="store_true", help="toy scale: everything in about a minute on CPU, with the equality checks"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--threads", type=int, default=0, help="CPU threads (0: 1 where anything runs on the CPU, else torch's default)"
    )
    p.add_argument("--tokenizer", help="reuse the tokenizer saved in this directory instead of training one")
    p.add_argument("--skip-target", action="store_true", help="reuse OUT/target instead of training a target")
    p.add_argument("--eval-only", action="store_true", help="only evaluate OUT/target + OUT/draft")
    p.add_argument("--skip-eval", action="store_true")
    p.add_argument("--tokenizer-only", action="store_true", help="only train the tokenizer (into OUT/target)")
    p.add_argument(
        "--write-corpus", metavar="FILE", help="only tokenize this machine's stdlib (training + held-out files) into FILE"
    )
    p.add_argument("--corpus", metavar="FILE", help="train and evaluate on a --write-corpus FILE instead of this stdlib")
    g = p.add_argument_group("target")
    g.add_argument("--vocab-size", type=int, default=2048)
    g.add_argument("--hidden", type=int, default=192)
    g.add_argument("--layers", type=int, default=8)
    g.add_argument("--full-every", type=int, default=4, help="every n-th layer is full attention, the rest Gated DeltaNet")
    g.add_argument("--intermediate", type=int, default=512)
    g.add_argument("--head-dim", type=int, default=64)
    g.add_argument("--gdn-head-dim", type=int, default=32)
    g.add_argument("--seq-len", type=int, default=256)
    g.add_argument("--target-batch", type=int, default=128)
    g.add_argument("--target-lr", type=float, default=3e-3)
    g.add_argument("--target-steps", type=int, default=6000)
    g.add_argument("--target-time", type=float, default=220.0, help="seconds; the LR schedule follows max(step, time) progress")
    d = p.add_argument_group("drafter")
    d.add_argument("--draft-layers", type=int, default=3)
    d.add_argument("--draft-taps", type=int, default=4)
    d.add_argument("--block-size", type=int, default=16)
    d.add_argument("--draft-seq-len", type=int, default=256)
    d.add_argument("--draft-batch", type=int, default=64)
    d.add_argument("--anchors", type=int, default=32, help="blocks per training sequence")
    d.add_argument("--natural-frac", type=float, default=0.25, help="share of natural stdlib windows (the rest: target rollouts)")
    d.add_argument("--gamma", type=float, default=7.0, help="loss weight exp(-(k-1)/gamma) at depth k")
    d.add_argument("--draft-lr", type=float, default=2e-3)
    d.add_argument("--draft-steps", type=int, default=8000)
    d.add_argument("--draft-time", type=float, default=180.0)
    d.add_argument("--rollouts", type=int, default=16384, help="target-greedy training sequences to generate at most")
    d.add_argument("--rollout-time", type=float, default=45.0)
    d.add_argument("--rollout-batch", type=int, default=1024)
    d.add_argument("--draft-val", type=int, default=128, help="held-out rollouts for validation")
    d.add_argument(
        "--draft-tap-ids", help="comma-separated target layers to tap (default: --draft-taps layers spread as z-lab does)"
    )
    d.add_argument(
        "--rollouts-file",
        metavar="FILE",
        help="load the rollouts (training + validation) from FILE if it exists, else generate them and save them there",
    )
    d.add_argument("--rollouts-only", action="store_true", help="stop after the rollouts (with --rollouts-file)")
    d.add_argument(
        "--cache-taps", action="store_true", help="compute the target's taps of the training pool once (kept on the device)"
    )
    d.add_argument(
        "--init-draft",
        help="start from this drafter checkpoint (same config) instead of a random one; a checkpoint with fewer layers (else "
        "the same config) fills the first layers, and the added ones start as identities (zeroed o_proj and down_proj)",
    )
    d.add_argument(
        "--rollout-prompt-lens", help="comma-separated prompt lengths the rollout batches cycle through (default: 8,12,...,64)"
    )
    d.add_argument(
        "--periodic-keep",
        type=float,
        default=1.0,
        help="keep this share of the rollouts whose last 64 tokens loop (periodic); the rest are dropped (default: keep all)",
    )
    d.add_argument(
        "--chain-labels-only",
        action="store_true",
        help="train depth k only where the k - 1 tokens after the anchor are the target's greedy ones: in natural windows "
        "and prompts the deeper labels follow tokens the engine never drafts past",
    )
    d.add_argument(
        "--demo-val",
        type=int,
        default=0,
        help="validate on this many demo-like held-out prompts (8-24 tokens, line or file starts), continued greedily: "
        "the engine's DFLASH tokens/pass on them (eos stops, --demo-val-new tokens), from the training forward at every "
        "anchor; the best weights by it are kept (0: off)",
    )
    d.add_argument("--demo-val-new", type=int, default=96, help="new tokens per demo-like prompt (the demo's 96)")
    e = p.add_argument_group("schedule / evaluation")
    e.add_argument("--warmup", type=int, default=200)
    e.add_argument("--eval-every", type=int, default=500)
    e.add_argument("--eval-batches", type=int, default=64, help="held-out windows for the target's held-out loss")
    e.add_argument("--bar-interval", type=float, default=10.0, help="seconds between progress-bar refreshes")
    e.add_argument("--eval-device", default="cpu")
    e.add_argument("--eval-prompts", type=int, default=8)
    e.add_argument("--eval-prompt-len", type=int, default=40)
    e.add_argument("--eval-new-tokens", type=int, default=128)
    e.add_argument("--budget", type=int, default=32, help="DDTREE node budget")
    e.add_argument(
        "--engine-eval",
        type=int,
        default=0,
        help="after training, run the engine's DFLASH as the demo does on the demo's prompts (+ DDTREE) and on this many "
        "demo-like validation prompts (0: off)",
    )
    e.add_argument("--engine-eval-device", default="cpu")
    args = p.parse_args(argv)
    args.avg_every = 25  # steps per logged (averaged) training loss
    if args.smoke:
        args.vocab_size, args.hidden, args.layers, args.intermediate, args.head_dim, args.gdn_head_dim = 384, 64, 5, 128, 16, 16
        args.seq_len, args.target_batch, args.target_steps, args.target_time, args.warmup = 128, 8, 40, 15.0, 10
        args.draft_layers, args.draft_taps, args.draft_seq_len, args.draft_batch, args.anchors = 2, 2, 48, 8, 8
        args.draft_steps, args.draft_time, args.rollouts, args.rollout_batch, args.rollout_time = 30, 10.0, 32, 32, 5.0
        args.draft_val, args.eval_every, args.eval_batches, args.bar_interval, args.avg_every = 8, 20, 8, 2.0, 10
        args.eval_prompts, args.eval_prompt_len, args.eval_new_tokens, args.budget = 2, 16, 24, 8
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads or "cpu" in (args.device, args.eval_device):
        torch.set_num_threads(args.threads or 1)  # tiny models: one thread is fastest and immune to oversubscription
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    torch.set_flush_denormal(True)  # decays underflow in the GDN chunks; denormals are very slow on CPUs
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary_file = out / "summary.json"
    stats = json.loads(summary_file.read_text()) if (args.eval_only or args.skip_target) and summary_file.exists() else {}
    run = {"argv": sys.argv[1:], "args": vars(args), "torch": torch.__version__, "python": sys.version.split()[0]}
    run["transformers"] = __import__("transformers").__version__
    run["device"] = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    stats.setdefault("runs", []).append(run)  # every invocation on this OUT, in order (training, then evaluations)
    t_start = time.perf_counter()

    def save_stats():
        summary_file.write_text(json.dumps(stats, indent=2) + "\n")

    corpus = None
    if args.corpus:  # a stdlib tokenized elsewhere (--write-corpus), in place of this machine's
        corpus = torch.load(args.corpus)
        train_texts = held_texts = None
        held_names = corpus["held_names"]
        log(
            f"corpus {args.corpus}: {len(corpus['train']['lens'])} training files, {len(held_names)} held-out files "
            f"({corpus['source']})"
        )
    else:
        train_texts, held_texts, held_names = stdlib_files(limit=60 if args.smoke else None)
        log(f"stdlib: {len(train_texts)} training files, {len(held_texts)} held-out files ({sysconfig.get_paths()['stdlib']})")

    from transformers import AutoTokenizer

    tok_dir = out / "target"
    if args.eval_only or args.skip_target:
        tok = AutoTokenizer.from_pretrained(str(tok_dir))
    elif args.tokenizer:
        tok = AutoTokenizer.from_pretrained(args.tokenizer)
        save_tokenizer(tok, tok_dir)
    else:
        if corpus is not None:
            raise SystemExit("--corpus holds token ids: give --tokenizer (the corpus's tokenizer) too")
        t0 = time.perf_counter()
        tok = train_tokenizer(train_texts, args.vocab_size, tok_dir)
        stats["tokenizer_s"] = round(time.perf_counter() - t0, 1)
        log(f"tokenizer: {len(tok)} tokens trained in {stats['tokenizer_s']} s")
    eos, mask = tok.convert_tokens_to_ids(EOS), tok.convert_tokens_to_ids(MASK)
    if args.tokenizer_only:
        save_stats()
        return 0
    if args.write_corpus:
        if corpus is not None:
            raise SystemExit("--write-corpus tokenizes this machine's stdlib: leave out --corpus")
        write_corpus(Path(args.write_corpus), tok, train_texts, held_texts, held_names)
        log(f"corpus written to {args.write_corpus} ({Path(args.write_corpus).stat().st_size / 1e6:.1f} MB)")
        return 0
    if corpus is None:
        sample = held_texts[0][:300]
        assert tok.decode(tok.encode(sample)) == sample, "tokenizer does not round-trip"
    held_ids = unpack(corpus["held"]) if corpus is not None else encode_files(tok, held_texts)
    stats.update(vocab_size=len(tok), eos_token_id=eos, mask_token_id=mask, heldout_files=held_names)

    if args.eval_only:
        evaluate(out, held_ids, held_names, args, stats)
        save_stats()
        return 0

    t0 = time.perf_counter()
    train_ids = unpack(corpus["train"]) if corpus is not None else encode_files(tok, train_texts)
    train = stream(train_ids, eos, args.seed).to(device)
    held = stream(held_ids, eos, args.seed).to(device)
    stats["train_tokens"], stats["heldout_tokens"] = len(train), len(held)
    n_bytes = corpus["train_bytes"] if corpus is not None else sum(len(t.encode()) for t in train_texts)
    log(
        f"data: {len(train) / 1e6:.2f} M training tokens ({n_bytes / len(train):.2f} bytes/token), "
        f"{len(held) / 1e3:.0f} k held-out, {time.perf_counter() - t0:.1f} s"
    )

    # ---- b. target
    from transformers import Qwen3_5ForCausalLM

    if args.skip_target:
        target = Qwen3_5ForCausalLM.from_pretrained(str(out / "target"), dtype=torch.float32).to(device).eval()
        log(f"target: loaded from {out / 'target'}, GDN path {patch_gdn(target)}")
    else:
        cfg = target_config(args, len(tok), eos)
        if args.smoke:  # the fast GDN path equals transformers' reference, values and gradients
            from transformers.models.qwen3_5.modeling_qwen3_5 import torch_chunk_gated_delta_rule

            gq, gk = torch.randn(2, 150, 4, 16), torch.randn(2, 150, 4, 16)
            gv, gg, gb = torch.randn(2, 150, 4, 24), -torch.rand(2, 150, 4), torch.rand(2, 150, 4)
            ref, ref_state = torch_chunk_gated_delta_rule(
                gq, gk, gv, gg, gb, output_final_state=True, use_qk_l2norm_in_kernel=True
            )
            new, new_state = fast_chunk_gated_delta_rule(
                gq, gk, gv, gg, gb, output_final_state=True, use_qk_l2norm_in_kernel=True
            )
            assert torch.allclose(ref, new, atol=1e-4, rtol=1e-4) and torch.allclose(ref_state, new_state, atol=1e-4, rtol=1e-4)
            log(f"smoke: fast GDN == transformers' torch GDN (max diff {(ref - new).abs().max().item():.1e})")
        target = train_target(args, cfg, train, held, device, stats)
        save_target(target, tok, out / "target")
        stats["target_config"] = json.loads((out / "target" / "config.json").read_text())
        save_stats()
        log(f"saved target to {out / 'target'}")

    # ---- c. drafter
    from sglang_dflash.init_draft import init_draft

    drafter = init_draft(
        out / "target", out / "draft", args.draft_layers, args.block_size, args.seed, mask_token_id=mask, taps=args.draft_taps
    )
    if args.draft_tap_ids:
        drafter = retap_draft(out / "draft", [int(x) for x in args.draft_tap_ids.split(",")], args.seed)
    layer_ids = list(drafter.config.target_layer_ids)
    if args.init_draft:
        from sglang_dflash.models.config import DraftConfig, read_config
        from sglang_dflash.models.layers import load_checkpoint, load_into

        init_cfg = DraftConfig.from_dict(read_config(args.init_draft))
        weights = {k: v.float() for k, v in load_checkpoint(args.init_draft, {"model.": ""}).items()}
        n_init, n_new = init_cfg.num_hidden_layers, drafter.config.num_hidden_layers
        shallower = dataclasses.replace(
            drafter.config,
            num_hidden_layers=n_init,
            layer_types=drafter.config.layer_types[:n_init],
            causal=drafter.config.causal[:n_init],
        )
        if init_cfg == drafter.config:
            load_into(drafter, weights, args.init_draft)
            log(f"drafter: starting from the weights in {args.init_draft}")
        elif n_init < n_new and init_cfg == shallower:
            weights.update(
                {k: v for k, v in drafter.state_dict().items() if k.startswith("layers.") and int(k.split(".")[1]) >= n_init}
            )
            load_into(drafter, weights, args.init_draft)
            with torch.no_grad():  # the added layers start as identities: their residual branches write zeros
                for layer in drafter.layers[n_init:]:
                    layer.self_attn.o_proj.weight.zero_()
                    layer.mlp.down_proj.weight.zero_()
            log(f"drafter: starting from the {n_init} layers in {args.init_draft}, {n_new - n_init} identity layers on top")
        else:
            raise SystemExit(f"--init-draft {args.init_draft}: its config differs from the drafter this run builds")
    err = check_taps(out / "target", layer_ids, held_ids[0][:48])
    log(f"engine taps == transformers hidden_states[l + 1] for l in {layer_ids} (relative diff {err:.1e})")
    if args.smoke:
        target_cpu = target.float().cpu()
        toks = windows(train.cpu(), 1, 48, torch.Generator().manual_seed(0))
        taps, _ = taps_and_preds(target_cpu, toks, layer_ids, torch.device("cpu"))
        worst = check_training_forward(
            drafter, target_cpu.get_input_embeddings(), target_cpu.get_output_embeddings(), taps, toks, [1, 7, 20, 32]
        )
        log(f"smoke: training forward == DFlashDrafter.forward after append_context (max diff {worst:.1e})")
        target.to(device)
    if device.type == "cuda":
        target.to(torch.bfloat16)
    rf = Path(args.rollouts_file) if args.rollouts_file else None
    newline_ids = [i for i in range(len(tok)) if "\n" in tok.decode([i])]
    demo_val = None
    if rf is not None and rf.exists():
        saved = torch.load(rf)
        pool, val, demo_val = saved["pool"], saved["val"], saved.get("demo_val")
        stats.update(saved["stats"], rollouts_file=str(rf))
        log(f"rollouts: {len(pool)} training + {len(val)} held-out sequences loaded from {rf}")
    else:
        pool, val = make_rollouts(args, target, train_ids, train, held_ids, newline_ids, device, stats)
    if args.demo_val and (demo_val is None or len(demo_val[0]) < args.demo_val):
        t0 = time.perf_counter()
        demo_val = demo_val_set(args, target, held_ids, newline_ids, args.block_size, device)
        log(f"demo-like validation: {len(demo_val[0])} held-out prompts continued greedily in {time.perf_counter() - t0:.1f} s")
        loops = periodic_tail(demo_val[0])
        stats["demo_val_periodic_tail"] = round(loops.float().mean().item(), 4)
    if demo_val is not None:
        demo_val = (demo_val[0][: args.demo_val], demo_val[1][: args.demo_val]) if args.demo_val else None
    if rf is not None and not rf.exists():
        keys = [
            k
            for k in ("rollouts", "rollouts_distinct", "rollout_s", "rollouts_periodic_tail", "demo_val_periodic_tail")
            if k in stats
        ]
        torch.save({"pool": pool, "val": val, "demo_val": demo_val, "stats": {k: stats[k] for k in keys}}, rf)
        log(f"rollouts saved to {rf}")
    if args.periodic_keep < 1.0:  # keep a share of the looping rollouts: the drafter learns loops from few
        loops = periodic_tail(pool)
        pool = pool[~loops | (torch.rand(len(pool), generator=torch.Generator().manual_seed(args.seed + 9)) < args.periodic_keep)]
        stats["rollouts_kept"] = len(pool)
        log(f"rollouts: kept {len(pool)} ({loops.float().mean().item():.1%} loop; --periodic-keep {args.periodic_keep} of those)")
    if args.rollouts_only:
        save_stats()
        return 0
    drafter = train_drafter(args, target, drafter, pool, val, train, device, stats, demo_val)
    save_checkpoint(drafter, out / "draft", dtype=torch.bfloat16)
    stats["draft_config"] = json.loads((out / "draft" / "config.json").read_text())
    stats["total_s"] = round(time.perf_counter() - t_start, 1)
    save_stats()
    log(f"saved drafter to {out / 'draft'}; total {stats['total_s']} s")

    # ---- d. evaluation
    if args.engine_eval:
        engine_eval(out, demo_val, tok, args, stats)
        save_stats()
    if not args.skip_eval:
        del target, pool
        evaluate(out, held_ids, held_names, args, stats)
        save_stats()
    for sub in ("target", "draft"):
        size = (out / sub / "model.safetensors").stat().st_size
        log(f"{sub}/model.safetensors: {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
