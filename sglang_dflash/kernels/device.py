"""What the launch heuristics need to know about the GPU."""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

from .. import env

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"  # Triton's interpreter (CPU tests): no 16-bit dots, programs in turn
HOPPER_SHARED = 232_448  # H100/H200 opt-in shared memory per block; A6000 (SM86) has 101,376
# Programmatic dependent launch (`pdl`); SGLANG_DFLASH_PDL=0 turns it off (read once, at import).
PDL = env.PDL.on()


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


def capability(device: torch.device) -> tuple[int, int] | None:
    """A CUDA device's compute capability (9, 0) for an H100/H200, (8, 6) for an A6000; None for other devices."""
    return _cuda_capability(_index(device)) if device.type == "cuda" else None


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


@functools.cache
def _cuda_multiprocessors(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


@functools.cache
def _cuda_shared_memory(index: int) -> int:
    return triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"]


def pdl(device: torch.device) -> bool:
    """Whether kernels on `device` launch with programmatic dependent launch: a kernel's programs are placed while
    the previous kernel in the stream finishes (its launch latency hidden), and wait for it at `pdl_start`. SM90 and
    newer (griddepcontrol), not under the interpreter, and not with `PDL` off. A kernel launched so must call
    `pdl_start` before its first memory access: a fresh buffer may be one the previous kernel still reads."""
    return PDL and not INTERPRET and (capability(device) or (0, 0)) >= (9, 0)


def pdl_launch(device: torch.device) -> dict[str, bool]:
    """A kernel's launch arguments for `pdl`: its PDL constexpr (the wait in `pdl_start`) and Triton's `launch_pdl`
    option, always together (a kernel launched with PDL that did not wait could read what the previous one writes)."""
    on = pdl(device)
    return dict(PDL=on, launch_pdl=on)


@functools.cache
def _cuda_capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


@triton.jit
def pdl_start(PDL: tl.constexpr):
    """A kernel's first step under programmatic dependent launch (PDL, from `pdl`): wait until the previous kernel in
    the stream has finished and its writes are visible, then let the next kernel be placed (once every program of
    this one has got here or exited, so all of them are resident: a barrier among them stays safe); its programs
    wait in turn. Nothing without PDL."""
    if PDL:
        tl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
        tl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
