"""What the launch heuristics need to know about the GPU."""

from __future__ import annotations

import torch

HOPPER_SHARED = 232_448  # H100/H200 opt-in shared memory per block; A6000 (SM86) has 101,376


def shared_memory_per_block(device: torch.device) -> int:
    """Opt-in shared memory per block (bytes) of a CUDA device, as Triton checks it at launch; Hopper's
    amount elsewhere (CPU tensors under the interpreter take the GPU's default configurations)."""
    if device.type != "cuda":
        return HOPPER_SHARED
    import triton

    return triton.runtime.driver.active.utils.get_device_properties(device.index or 0)["max_shared_mem"]
