"""Target hidden-state capture for the DFlash drafter's taps, on SGLang's Qwen3.5 decoder layers.

SGLang's Qwen3.5 model (0.5.11) has no aux-hidden-state capture; 0.5.23's serves its own DFLASH only. The
drafter's target layer id l means the output of decoder layer l, i.e. `hidden + residual` after
layer l. SGLang's decoder layers hand `(hidden, residual)` to the next layer un-summed, and under
the FlashInfer all-reduce fusion (auto-enabled on SM90/SM100 at TP > 1) `hidden` is even a
pre-all-reduce partial, so summing the layer's own outputs would be wrong there. Instead, as
Qwen3-Next's `prepare_attn_and_capture_last_layer_outputs` does, we read the `residual` that
layer l + 1's `layer_communicator.prepare_attn` returns: that is the fused (all-reduced) sum
`hidden + residual` of layer l, full width on every attention-TP rank. It is copied at once (the
next fused add-RMSNorm updates it in place). SGLang 0.5.23 moved the residual into layer boundaries
(`layer.attn_boundary`, whose `prepare` adds and norms): there the same sum comes through the `capture`
callback of layer l + 1's `attn_boundary.prepare`. Only a tap on the last layer (no next layer; DFlash
taps stop at n - 3) falls back to a forward hook summing the layer's outputs, which is only right
without the all-reduce fusion (refused on 0.5.23, where that sum happens inside the final norm).

The copies go into one static buffer `[capacity, n_taps * hidden]`, so they are part of the
target's captured CUDA graphs: install before `ModelRunner.init_device_graphs` (see
the plugin's `init_device_graphs` hook), or recapture. A forward of more tokens than `capacity` (a large prefill,
never graph-replayed) writes into a buffer allocated for that size instead. `taps(num_tokens)`
reads the rows of the last forward without any Python state set during it (graph replays run no
Python), so it must be called with the forward's real token count before the next target forward.

No SGLang import at module level: the capture works on any module stack shaped like SGLang's.
"""

from __future__ import annotations

import functools
import logging

import torch
from torch import Tensor, nn

from .names import resolved

logger = logging.getLogger(__name__)

_CAPTURE_ATTR = "_sglang_dflash_hidden_capture"


class HiddenCapture:
    """The outputs (hidden + residual) of decoder layers `layer_ids`, concatenated in that order."""

    def __init__(self, layer_ids, hidden_size: int, capacity: int, device, dtype):
        self.layer_ids = [int(i) for i in layer_ids]
        if not self.layer_ids:
            raise ValueError("HiddenCapture needs at least one layer id")
        self.hidden_size, self.capacity = int(hidden_size), int(capacity)
        self.width = len(self.layer_ids) * self.hidden_size
        self.buffer = torch.zeros(self.capacity, self.width, device=device, dtype=dtype)
        self._overflow: Tensor | None = None
        self._handles: list = []
        self.installed = False

    def _rows(self, num_tokens: int) -> Tensor:
        """Where a forward of num_tokens tokens writes (the static buffer unless it is too small)."""
        if num_tokens <= self.capacity:
            return self.buffer[:num_tokens]
        if self._overflow is None or self._overflow.shape[0] != num_tokens:
            self._overflow = torch.empty(num_tokens, self.width, device=self.buffer.device, dtype=self.buffer.dtype)
        return self._overflow

    def _store(self, tap: int, x: Tensor) -> None:
        D = self.hidden_size
        if x.shape[-1] != D:
            raise RuntimeError(f"hidden capture: tap {tap} has width {x.shape[-1]}, expected {D}")
        self._rows(x.shape[0])[:, tap * D : (tap + 1) * D].copy_(x)

    def taps(self, num_tokens: int) -> Tensor:
        """[num_tokens, n_taps * hidden]: the taps of the last target forward's first num_tokens tokens (a view
        into a buffer the next forward overwrites)."""
        if num_tokens <= self.capacity:
            return self.buffer[:num_tokens]
        if self._overflow is None or self._overflow.shape[0] != num_tokens:
            raise RuntimeError(
                f"hidden capture: asked for {num_tokens} tokens, the last forward over {self.capacity} tokens had "
                f"{None if self._overflow is None else self._overflow.shape[0]}"
            )
        return self._overflow

    def install(self, layers) -> None:
        """Hook the decoder layers (an indexable stack, e.g. SGLang's `model.layers`). Idempotent."""
        if self.installed:
            return
        n = len(layers)
        for tap, l in enumerate(self.layer_ids):
            if not 0 <= l < n:
                raise ValueError(f"hidden capture: target layer id {l} out of range for {n} decoder layers")
            after = layers[l + 1] if l + 1 < n else None
            if hasattr(after, "layer_communicator"):
                self._wrap_prepare_attn(after.layer_communicator, tap)
            elif hasattr(after, "attn_boundary"):
                self._wrap_boundary_prepare(after.attn_boundary, tap)
            elif hasattr(layers[l], "attn_boundary"):
                raise ValueError(f"hidden capture: target layer id {l} is the last decoder layer, whose output "
                                 "SGLang's layer boundaries sum only in the final norm; drafters tap earlier layers")  # fmt: skip
            else:
                self._handles.append(layers[l].register_forward_hook(self._output_hook(tap)))
        self.installed = True

    def _wrap_prepare_attn(self, communicator, tap: int) -> None:
        original = communicator.prepare_attn  # bound method; the wrapper shadows it on this instance only

        @functools.wraps(original)
        def prepare_attn(hidden_states, residual, forward_batch, *args, **kwargs):
            hidden_states, residual = original(hidden_states, residual, forward_batch, *args, **kwargs)
            self._store(tap, residual)
            return hidden_states, residual

        communicator.prepare_attn = prepare_attn

    def _wrap_boundary_prepare(self, boundary, tap: int) -> None:
        original = boundary.prepare  # 0.5.23's StageBoundary.prepare; `capture` gets the residual it produces

        @functools.wraps(original)
        def prepare(hidden_states, forward_batch, **call):
            theirs = call.get("capture")

            def capture(value, owned=False):
                self._store(tap, value)
                if theirs is not None:
                    theirs(value, owned=owned)

            return original(hidden_states, forward_batch, **{**call, "capture": capture})

        boundary.prepare = prepare

    def _output_hook(self, tap: int):
        def hook(module: nn.Module, args, output):
            hidden, residual = output
            self._store(tap, hidden if residual is None else hidden + residual)

        return hook


def decoder_layers(model: nn.Module):
    """The decoder-layer stack of an SGLang Qwen3.5 model (CausalLM or ConditionalGeneration wrapper)."""
    for path in ("model.layers", "language_model.layers", "model.language_model.layers", "layers"):
        obj = model
        try:
            for part in path.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        return obj
    raise RuntimeError(f"sglang-dflash: cannot find the decoder layers of {type(model).__name__}")


def install_on_model_runner(model_runner, layer_ids, hidden_size: int, capacity: int) -> HiddenCapture:
    """The capture on a target ModelRunner's model, created once and remembered on the runner."""
    capture = getattr(model_runner, _CAPTURE_ATTR, None)
    if capture is None:
        dtype = model_runner.model_config.dtype
        device = next(model_runner.model.parameters()).device
        capture = HiddenCapture(layer_ids, hidden_size, capacity, device, dtype)
        capture.install(decoder_layers(model_runner.model))
        capture.before_graphs = getattr(model_runner, "graph_runner", None) is None
        setattr(model_runner, _CAPTURE_ATTR, capture)
    elif list(capture.layer_ids) != [int(i) for i in layer_ids]:
        raise RuntimeError(f"hidden capture already installed for layers {capture.layer_ids}, not {list(layer_ids)}")
    return capture


def graph_capacity(server_args) -> int:
    """Static-buffer rows: the most tokens a captured target graph runs (max batch x verify tokens), from the server
    arguments as resolved (on 0.5.23 the fields keep the command line's values; a chain's node count is resolved)."""
    args = resolved(server_args)
    graph_bs = getattr(args, "cuda_graph_max_bs", None) or getattr(args, "cuda_graph_max_bs_decode", None)  # 0.5.23
    bs = max(graph_bs or 0, args.max_running_requests or 0, 1)
    return bs * max(args.speculative_num_draft_tokens or 1, 1)


def install_before_graphs(model_runner) -> HiddenCapture:
    """The capture for the drafter of the runner's server arguments (its config read from
    --speculative-draft-model-path), installed on the target runner; call it before graph capture."""
    from .server_args import draft_config

    args = model_runner.server_args
    draft = draft_config(args)
    return install_on_model_runner(model_runner, draft.target_layer_ids, draft.hidden_size, graph_capacity(args))
