"""What the launch heuristics need to know about the GPU."""

from __future__ import annotations

import functools
import os

import torch

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"  # Triton's interpreter (CPU tests): no 16-bit dots, programs in turn
HOPPER_SHARED = 232_448  # H100/H200 opt-in shared memory per block; A6000 (SM86) has 101,376


def shared_memory_per_block(device: torch.device) -> int:
    """Opt-in shared memory per block (bytes) of a CUDA device, as Triton checks it at launch; Hopper's
    amount elsewhere (CPU tensors under the interpreter take the GPU's default configurations)."""
    if device.type != "cuda":
        return HOPPER_SHARED
    return _cuda_shared_memory(_index(device))


def multiprocessor_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device; an H200's 132 elsewhere (CPU tensors under the interpreter plan
    as on one, as `shared_memory_per_block`)."""
    if device.type != "cuda":
        return 132
    return _cuda_multiprocessors(_index(device))


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


@functools.cache
def _cuda_multiprocessors(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


@functools.cache
def _cuda_shared_memory(index: int) -> int:
    import triton

    return triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"]
