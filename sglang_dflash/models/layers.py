"""Building blocks shared by the target and the drafter: norms, RoPE, MLP, attention, checkpoint I/O."""

from __future__ import annotations

import functools
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from .. import env


def gpu_compiled(fn):
    """fn through `torch.compile` (dynamic shapes) when its first argument is a CUDA tensor, eager
    otherwise. For the small elementwise chains around the GEMMs (norms, gates, RoPE), which cost one
    launch per op uncompiled: fused, a layer's glue is a few kernels. SGLANG_DFLASH_COMPILE=0 keeps
    everything eager. The compiled variant is `call.compiled` once made (a test may set its own, which
    then serves any device). Dynamic shapes still specialise sizes 0 and 1: each new pattern of size-1
    dimensions compiles again (seconds), which the workers' start-up warm-up does ahead of serving."""

    @functools.wraps(fn)
    def call(x: Tensor, *args):
        if call.compiled is None:
            if not x.is_cuda:
                return fn(x, *args)
            call.compiled = fn  # importing torch's compiler takes seconds: only when a GPU needs it
            if env.COMPILE.on():
                call.compiled = torch.compile(fn, dynamic=True)
                # one variant per rank / stride pattern / 0-1 size of the inputs (the default 8 was hit
                # on the 27B shard, and further variants then ran eagerly)
                torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        return call.compiled(x, *args)

    call.compiled = None
    return call


@gpu_compiled
def rms_norm(x: Tensor, weight: Tensor, eps: float, zero_centred: bool) -> Tensor:
    """RMSNorm over the last dim in float32: Qwen3.5's `x * (1 + w)` if zero_centred, else Qwen3's `w * x`."""
    y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    if zero_centred:
        return (y * (1.0 + weight.float())).type_as(x)
    return weight * y.type_as(x)


class RMSNorm(nn.Module):
    """`rms_norm` with its weight. `zero_centred`: weights stored as offsets from 1 (Qwen3.5); otherwise
    plain (the drafter's layers)."""

    def __init__(self, dim: int, eps: float, zero_centred: bool):
        super().__init__()
        self.eps, self.zero_centred = eps, zero_centred
        self.weight = nn.Parameter(torch.zeros(dim) if zero_centred else torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, self.eps, self.zero_centred)


@gpu_compiled
def gated_rms_norm(x: Tensor, gate: Tensor, weight: Tensor, eps: float) -> Tensor:
    """Gated DeltaNet output norm: `w * rmsnorm(x) * silu(gate)` over the last dim (plain weight, not zero-centred)."""
    y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    return (weight * y.to(x.dtype) * F.silu(gate.float())).to(x.dtype)


@gpu_compiled
def rope(x: Tensor, positions: Tensor, dim: int, theta: float) -> Tensor:
    """RoPE (rotate-half) on the first `dim` channels of each head; x [..., T, heads, head_dim],
    positions long [..., T]. Angles in float32 whatever x's dtype."""
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, device=x.device, dtype=torch.float32) / dim)
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat([freqs, freqs], dim=-1)[..., None, :]  # [..., T, 1, dim]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    rot, rest = x[..., :dim], x[..., dim:]
    half = dim // 2
    rotated = torch.cat([-rot[..., half:], rot[..., :half]], dim=-1)
    return torch.cat([rot * cos + rotated * sin, rest], dim=-1)


class Rotary(nn.Module):
    """RoPE on the first `dim` channels of each head (Qwen3.5: partial, a quarter of head_dim;
    text positions make its interleaved M-RoPE the plain one)."""

    def __init__(self, dim: int, theta: float):
        super().__init__()
        self.dim, self.theta = dim, theta

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        """x [..., T, heads, head_dim]; positions long [..., T]."""
        return rope(x, positions, self.dim, self.theta)


@gpu_compiled
def silu_mul(gate: Tensor, up: Tensor) -> Tensor:
    return F.silu(gate) * up


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(silu_mul(self.gate_proj(x), self.up_proj(x)))


def masked_attention(q: Tensor, k: Tensor, v: Tensor, visible: Tensor, scale: float) -> Tensor:
    """q [R, Q, HQ, D], k and v [R, T, HKV, D], visible bool [R, Q, T] -> [R, Q, HQ, D] (GQA by repetition).

    Rows with nothing visible return zeros instead of NaN."""
    group = q.shape[2] // k.shape[2]
    k, v = (t.repeat_interleave(group, dim=2).transpose(1, 2) for t in (k, v))
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, attn_mask=visible[:, None], scale=scale)
    return out.transpose(1, 2).nan_to_num(0.0)


def load_checkpoint(path: str | Path, prefix_map: dict[str, str], skip: tuple[str, ...] = ()) -> dict[str, Tensor]:
    """All tensors of the *.safetensors files in `path`, renamed by the first matching prefix of
    `prefix_map` (old -> new); names starting with one of `skip` are dropped, others kept as they are."""
    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {path}")
    out = {}
    for file in files:
        for name, tensor in load_file(str(file)).items():
            if name.startswith(skip):
                continue
            for old, new in prefix_map.items():
                if name.startswith(old):
                    name = new + name[len(old) :]
                    break
            out[name] = tensor
    return out


def load_into(module: nn.Module, tensors: dict[str, Tensor], what: str) -> None:
    """Copy tensors into module's parameters; missing or unexpected names (or shapes) raise with the names."""
    own = module.state_dict()
    missing = sorted(set(own) - set(tensors))
    unexpected = sorted(set(tensors) - set(own))
    if missing or unexpected:
        raise ValueError(f"{what}: missing tensors {missing[:8]}, unexpected tensors {unexpected[:8]}")
    bad = [f"{n} {list(t.shape)} != {list(own[n].shape)}" for n, t in tensors.items() if t.shape != own[n].shape]
    if bad:
        raise ValueError(f"{what}: shape mismatch: {bad[:8]}")
    module.load_state_dict(tensors)


def save_checkpoint(module: nn.Module, path: str | Path, prefix: str = "", dtype: torch.dtype | None = None) -> None:
    """module's state dict as `path`/model.safetensors (names prefixed)."""
    tensors = {
        prefix + n: (t.to(dtype) if dtype and t.is_floating_point() else t).contiguous() for n, t in module.state_dict().items()
    }
    save_file(tensors, str(Path(path) / "model.safetensors"))
