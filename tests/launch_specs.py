"""What a Triton launch compiles, recorded without a GPU: launches intercepted (`intercepted_launches`), `kernel_spec`
of each, and the package imported afresh with the interpreter off (`fresh_package_without_interpreter`), as on a
GPU. Shared by the kernel tests that build (kernels/test_sm86_compile.py) or count builds
(kernels/test_batch_compiles.py) and by benchmarks/kernels."""

from __future__ import annotations

import contextlib
import importlib
import sys
from unittest import mock

import torch
import triton
from triton.runtime.jit import KernelInterface, mangle_type


def kernel_spec(kernel, args, kwargs):
    """What `kernel[grid](*args, **kwargs)` compiles: the signature from the example arguments, the
    constexprs, the multiple-of-16 hints Triton's launcher gives (tensors whose data pointer is a multiple of 16
    bytes, ints not marked do_not_specialize) and the options."""
    values = dict(zip(kernel.arg_names, args)) | {k: v for k, v in kwargs.items() if k in kernel.arg_names}
    signature = {k: "constexpr" if k in kwargs else mangle_type(v) for k, v in values.items()}
    unspecialized = {p.name for p in kernel.params if p.do_not_specialize}
    aligned = [
        i
        for i, (k, v) in enumerate(values.items())
        if k not in kwargs
        and k not in unspecialized
        and (torch.is_tensor(v) and v.data_ptr() % 16 == 0 or type(v) is int and v % 16 == 0)
    ]
    return dict(
        signature=signature,
        constexprs={k: v for k, v in kwargs.items() if k in kernel.arg_names},
        attrs={(i,): [["tt.divisibility", 16]] for i in aligned},
        options={k: v for k, v in kwargs.items() if k not in kernel.arg_names},
    )


@contextlib.contextmanager
def fresh_package_without_interpreter():
    """sglang_dflash imported anew with Triton's interpreter off; the modules and the knob restored after."""
    ours = lambda: [name for name in sys.modules if name.split(".")[0] == "sglang_dflash"]  # noqa: E731
    saved = {name: sys.modules.pop(name) for name in ours()}
    try:
        with triton.knobs.runtime.scope():
            triton.knobs.runtime.interpret = False
            yield importlib.import_module("sglang_dflash.kernels")
    finally:
        for name in ours():
            del sys.modules[name]
        sys.modules.update(saved)


@contextlib.contextmanager
def intercepted_launches():
    """A list that collects (kernel, args, kwargs) of every Triton launch inside the block, instead of launching."""
    seen = []
    with mock.patch.object(KernelInterface, "__getitem__", lambda kernel, grid: lambda *a, **kw: seen.append((kernel, a, kw))):
        yield seen
