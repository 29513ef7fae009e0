"""Several layers' tensors handed to one kernel launch by address, instead of stacked into a copy."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class LayerTable:
    """ptrs int64 [layers] on the tensors' device: each layer's data_ptr; `like`: the first of them, whose shape,
    strides and dtype every layer shares (the kernels read those from it). The tensors must outlive every launch
    that reads the table: e.g. a CUDA graph's static outputs, for which one table serves every replay."""

    ptrs: Tensor
    like: Tensor

    @classmethod
    def of(cls, tensors: list[Tensor]) -> LayerTable:
        like = tensors[0]
        for t in tensors:
            if t.shape != like.shape or t.stride() != like.stride() or t.dtype != like.dtype or t.device != like.device:
                raise ValueError(
                    f"a layer table needs one shape, stride, dtype and device: {list(like.shape)} {like.stride()} "
                    f"{like.dtype} vs {list(t.shape)} {t.stride()} {t.dtype}"
                )
        return cls(torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64, device=like.device), like)

    def __len__(self) -> int:
        return self.ptrs.numel()
