#!/usr/bin/env python3
"""Write patches/: sglang-dflash as a patch series against SGLang's source, the way an upstream PR would add it.

Everything is generated from the plugin's own code, so the series follows the plugin:

- the SGLang-independent core (`sglang_dflash/{ddtree,dflash}.py`, `kernels/`, `models/`) is copied
  file by file into the new package `python/sglang/srt/speculative/dflash/` (its relative imports
  stay as they are; an import leaving that set stops the generator);
- the SGLang-facing modules (`sglang_dflash/sglang/*.py`) become files under
  `python/sglang/srt/speculative/` and `python/sglang/srt/models/dflash.py`, with their relative
  imports rewritten to absolute `sglang.srt...` ones;
- each runtime hook of `sglang_dflash/sglang/hooks.py` becomes the direct edit of the SGLang file it
  patches, made by exact-text replacement on the pristine file and diffed with difflib. An anchor
  that is not found exactly once stops the generator with a message: that is how an SGLang release
  other than RELEASE shows up.

    python patches/generate.py                      # against the installed sglang (must be RELEASE)
    python patches/generate.py --sglang-src ~/sglang --out /tmp/patches   # against a git checkout
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

RELEASE = "0.5.10.post1"
HERE = Path(__file__).resolve().parent
PKG = HERE.parent / "sglang_dflash"
SRT = "python/sglang/srt"
AUTHOR = "sglang-dflash <sglang-dflash@users.noreply.github.com>"

# The SGLang-independent core, vendored as the package sglang.srt.speculative.dflash.
CORE = ("ddtree.py", "dflash.py", "cuda_graph.py", "kernels", "models")
CORE_PACKAGE = "sglang.srt.speculative.dflash"

# Plugin module -> upstream module, for the SGLang-facing modules that make sense upstream.
FACING = {
    "sglang_dflash.sglang.draft_model": "sglang.srt.models.dflash",
    "sglang_dflash.sglang.hidden_capture": "sglang.srt.speculative.dflash_hidden_capture",
    "sglang_dflash.sglang.verify_io": "sglang.srt.speculative.dflash_verify_io",
    "sglang_dflash.sglang.vocab_parallel": "sglang.srt.speculative.dflash_vocab_parallel",
    "sglang_dflash.sglang.server_args": "sglang.srt.speculative.dflash_server_args",
    "sglang_dflash.sglang.dflash_worker": "sglang.srt.speculative.dflash_worker",
    "sglang_dflash.sglang.tree_gdn_backend": "sglang.srt.speculative.dflash_tree_gdn",
    "sglang_dflash.sglang.memory_plan": "sglang.srt.speculative.dflash_memory_plan",
    "sglang_dflash.sglang.step_profile": "sglang.srt.speculative.dflash_step_profile",
}
# Plugin modules that are not ported (their job is done by the direct edits below), except for the
# constants the ported modules import from them, which the core package's __init__ defines.
CONSTANTS = {
    "sglang_dflash.sglang.algorithm": ("ALGORITHMS",),
    "sglang_dflash.sglang.hooks": ("NUM_REQS_ATTR",),
}
# Plugin-only parts of the ported modules: top-level definitions to leave out, and exact edits.
DROP_DEFS = {
    "sglang_dflash.sglang.server_args": ("SUPPORTED_SGLANG", "sglang_version", "check_sglang_version"),
    "sglang_dflash.sglang.hidden_capture": ("patch_model_runner",),
    "sglang_dflash.sglang.tree_gdn_backend": (
        "patch_hybrid_backend",
        "patch_gdn_backend",
        "patch_memory_pool",
        "plugin_tree_verify",
        "_global_server_args",
    ),
    "sglang_dflash.sglang.memory_plan": ("patch_kv_cache_mixin",),
}
PLUGIN_EDITS = {
    "sglang_dflash.sglang.server_args": (("    check_sglang_version()\n", ""),),
}


class UnsupportedSource(RuntimeError):
    """An anchor was not found: the source is not the release (or the plugin code) this generator knows."""


# ----------------------------------------------------------------------------- text helpers


def edit(text: str, old: str, new: str, where: str) -> str:
    """text with `old` (which must occur exactly once) replaced by `new`."""
    n = text.count(old)
    if n != 1:
        first = old.strip().splitlines()[0] if old.strip() else repr(old)
        raise UnsupportedSource(
            f"{where}: anchor {first!r} found {n} times, expected once. This generator targets SGLang {RELEASE}; "
            "another release (or changed plugin code) needs its anchors updated in patches/generate.py."
        )
    return text.replace(old, new)


def drop_defs(text: str, names, where: str) -> str:
    """text without the top-level functions, classes or assignments `names` (and the blank lines after them)."""
    lines = text.splitlines(keepends=True)
    spans = {}
    for node in ast.parse(text).body:
        targets = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        for name in [getattr(node, "name", None), *targets]:
            if name in names:
                start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
                end = node.end_lineno
                while end < len(lines) and not lines[end].strip():
                    end += 1
                spans[name] = (start, end)
    missing = sorted(set(names) - set(spans))
    if missing:
        raise UnsupportedSource(f"{where}: no top-level {missing} to drop; update DROP_DEFS in patches/generate.py")
    for start, end in sorted(spans.values(), reverse=True):
        del lines[start:end]
    return "".join(lines).rstrip("\n") + "\n"


def resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Absolute name of `from <level dots><name> import ...` inside `module`."""
    base = module.split(".")
    base = base[: len(base) - level + (1 if is_package else 0)]
    return ".".join(base + ([name] if name else []))


def rewrite_imports(text: str, module: str, is_package: bool, upstream) -> str:
    """Rewrite each relative import of `module` by `upstream(target, names, where)`: None keeps it, else the
    new `from X import` head."""
    lines = text.splitlines(keepends=True)
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.level:
            target = resolve(module, is_package, node.level, node.module)
            new = upstream(target, [a.name for a in node.names], f"{module} line {node.lineno}")
            if new is not None:
                i = node.lineno - 1
                head = re.compile(r"from\s+\.+[\w.]*\s+import")
                lines[i] = lines[i][: node.col_offset] + head.sub(f"from {new} import", lines[i][node.col_offset :], 1)
    return "".join(lines)


def literal(path: Path, name: str):
    """The value of the top-level constant `name` of a plugin source file (read, not imported)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise UnsupportedSource(f"{path}: no constant {name}")


def module_name(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts), rel.name == "__init__"


def upstream_path(module: str, is_package: bool = False) -> str:
    return "python/" + module.replace(".", "/") + ("/__init__.py" if is_package else ".py")


# ----------------------------------------------------------------------------- the plugin's files, ported


def core_files() -> dict[str, str]:
    """The core package: every .py file of CORE, copied; relative imports must stay inside it."""
    files = sorted(p for c in CORE for p in ([PKG / c] if c.endswith(".py") else (PKG / c).rglob("*.py")))
    vendored = {module_name(p)[0] for p in files}

    def inside(target, names, where):
        if not (target in vendored or any(f"{target}.{n}" in vendored for n in names)):
            raise UnsupportedSource(f"{where}: import of {target} leaves the vendored core {CORE}; extend CORE")
        return None

    out = {}
    for p in files:
        module, is_package = module_name(p)
        out[upstream_path(CORE_PACKAGE + module.removeprefix("sglang_dflash"), is_package)] = rewrite_imports(
            p.read_text(), module, is_package, inside
        )
    constants = {
        name: literal(PKG / "sglang" / (m.rsplit(".", 1)[1] + ".py"), name) for m, ns in CONSTANTS.items() for name in ns
    }
    out[upstream_path(CORE_PACKAGE, True)] = (
        '"""DFLASH and DDTREE speculative decoding: draft trees, acceptance, Triton kernels and reference models.\n\n'
        "Framework-independent (plain torch and Triton, no SGLang import): the SGLang side lives in\n"
        "`sglang.srt.speculative.dflash_*` and `sglang.srt.models.dflash`.\n"
        '"""\n\n'
        f"ALGORITHMS = {constants['ALGORITHMS']!r}\n\n"
        "# Set by the DFLASH/DDTREE workers on their EagleVerifyInput: the number of real requests in the verify\n"
        "# batch, so that the GDN backend's CUDA-graph replay does not take a length-1 request for padding.\n"
        f"NUM_REQS_ATTR = {constants['NUM_REQS_ATTR']!r}\n"
    )
    return out


def facing_upstream(target, names, where):
    core = "sglang_dflash." + target.removeprefix("sglang_dflash.").split(".")[0]
    if core in {f"sglang_dflash.{c.removesuffix('.py')}" for c in CORE}:
        return CORE_PACKAGE + target.removeprefix("sglang_dflash")
    if target in FACING:
        return FACING[target]
    if target in CONSTANTS and set(names) <= set(CONSTANTS[target]):
        return CORE_PACKAGE
    raise UnsupportedSource(f"{where}: imports {names} from {target}, which has no upstream place; extend FACING or CONSTANTS")


def facing_files() -> dict[str, str]:
    out = {}
    for module, upstream in FACING.items():
        text = (PKG.parent / (module.replace(".", "/") + ".py")).read_text()
        text = drop_defs(text, DROP_DEFS.get(module, ()), module)
        for old, new in PLUGIN_EDITS.get(module, ()):
            text = edit(text, old, new, module)
        out[upstream_path(upstream)] = rewrite_imports(text, module, False, facing_upstream)
    return out


# ----------------------------------------------------------------------------- the hooks, as direct edits

ALGOS = literal(PKG / "sglang" / "algorithm.py", "ALGORITHMS")
SPEC_INFO = f"{SRT}/speculative/spec_info.py"
SERVER_ARGS = f"{SRT}/server_args.py"
MODEL_RUNNER = f"{SRT}/model_executor/model_runner.py"
MAMBA_BACKEND = f"{SRT}/layers/attention/hybrid_linear_attn_backend.py"
GDN_BACKEND = f"{SRT}/layers/attention/linear/gdn_backend.py"
KV_CACHE_MIXIN = f"{SRT}/model_executor/model_runner_kv_cache_mixin.py"

# (file, anchor, replacement), applied in order; each anchor must occur exactly once.
REGISTRATION_EDITS = (
    (SPEC_INFO, "    NGRAM = auto()\n", "    NGRAM = auto()\n" + "".join(f"    {a} = auto()\n" for a in ALGOS)),
    (
        SPEC_INFO,
        "        # NOTE: EAGLE3 is a variant of EAGLE\n"
        "        return self == SpeculativeAlgorithm.EAGLE or self == SpeculativeAlgorithm.EAGLE3\n",
        "        # NOTE: EAGLE3 is a variant of EAGLE. DFLASH and DDTREE verify their drafts through EAGLE's\n"
        "        # target-verify path (TARGET_VERIFY CUDA graphs sized by speculative_num_draft_tokens, the tree\n"
        "        # custom_mask of the attention backends, the hybrid GDN layers' verify metadata).\n"
        "        return self in (\n"
        "            SpeculativeAlgorithm.EAGLE,\n"
        "            SpeculativeAlgorithm.EAGLE3,\n"
        "            SpeculativeAlgorithm.DFLASH,\n"
        "            SpeculativeAlgorithm.DDTREE,\n"
        "        )\n",
    ),
    (
        SPEC_INFO,
        "    def supports_spec_v2(self) -> bool:\n        return self.is_eagle() or self.is_standalone()\n",
        "    def is_dflash(self) -> bool:\n"
        "        return self == SpeculativeAlgorithm.DFLASH\n\n"
        "    def is_ddtree(self) -> bool:\n"
        "        return self == SpeculativeAlgorithm.DDTREE\n\n"
        "    def supports_spec_v2(self) -> bool:\n"
        "        if self.is_dflash() or self.is_ddtree():\n"
        "            return False\n"
        "        return self.is_eagle() or self.is_standalone()\n",
    ),
    (
        SPEC_INFO,
        "        enable_overlap = not server_args.disable_overlap_schedule\n",
        "        if self.is_dflash() or self.is_ddtree():\n"
        "            # Non-overlap scheduler only (the server arguments force it).\n"
        "            from sglang.srt.speculative.dflash_worker import DDTreeWorker, DFlashWorker\n\n"
        "            return DFlashWorker if self.is_dflash() else DDTreeWorker\n\n"
        "        enable_overlap = not server_args.disable_overlap_schedule\n",
    ),
    (
        SERVER_ARGS,
        '            choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"],\n            help="Speculative algorithm.",\n',
        f'            choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", {", ".join(map(repr, ALGOS))}],\n'.replace(
            "'", '"'
        )
        + '            help="Speculative algorithm. DFLASH: a DFlash block drafter verified as a chain; DDTREE: '
        'its best --speculative-num-draft-tokens - 1 prefixes verified as one tree.",\n',
    ),
    (
        SERVER_ARGS,
        "    def _handle_model_specific_adjustments(self):\n",
        "    def _handle_model_specific_adjustments(self):\n"
        "        from sglang.srt.speculative.dflash import ALGORITHMS as DFLASH_ALGORITHMS\n\n"
        "        if str(self.speculative_algorithm).upper() in DFLASH_ALGORITHMS:\n"
        "            from sglang.srt.speculative.dflash_server_args import resolve_radix_cache\n\n"
        "            resolve_radix_cache(self)  # before the hybrid models' radix-cache checks below\n\n",
    ),
    (
        SERVER_ARGS,
        "    def _handle_speculative_decoding(self):\n",
        "    def _handle_speculative_decoding(self):\n"
        "        from sglang.srt.speculative.dflash import ALGORITHMS as DFLASH_ALGORITHMS\n\n"
        "        if str(self.speculative_algorithm).upper() in DFLASH_ALGORITHMS:\n"
        "            from sglang.srt.speculative.dflash_server_args import resolve_speculative_args\n\n"
        "            resolve_speculative_args(self)\n\n",
    ),
)

SCHEDULER = f"{SRT}/managers/scheduler.py"
ADMISSION_EDITS = (
    (
        SCHEDULER,
        "    def _add_request_to_queue(self, req: Req, is_retracted: bool = False):\n",
        "    def _add_request_to_queue(self, req: Req, is_retracted: bool = False):\n"
        "        if (self.spec_algorithm.is_dflash() or self.spec_algorithm.is_ddtree()) and not req.finished():\n"
        "            from sglang.srt.speculative.dflash_worker import fit_to_drafter, request_unsupported\n\n"
        "            # features the workers cannot serve losslessly yet; prompts past the drafter's positions\n"
        "            worker = self.draft_worker\n"
        "            message = request_unsupported(req) or fit_to_drafter(req, worker.max_len, worker.num_nodes)\n"
        "            if message:\n"
        "                req.set_finish_with_abort(message)\n",
    ),
)

CAPTURE_EDITS = (
    (
        MODEL_RUNNER,
        '    def init_device_graphs(self):\n        """Capture device graphs."""\n',
        '    def init_device_graphs(self):\n        """Capture device graphs."""\n'
        "        if (self.spec_algorithm.is_dflash() or self.spec_algorithm.is_ddtree()) and not self.is_draft_worker:\n"
        "            # The drafter reads the target's hidden states at its tapped layers from a static buffer that\n"
        "            # the target's graphs must write: install the capture before they are captured.\n"
        "            from sglang.srt.speculative.dflash_hidden_capture import install_before_graphs\n"
        "            from sglang.srt.speculative.dflash_tree_gdn import install as install_tree_gdn\n\n"
        "            install_before_graphs(self)\n"
        "            install_tree_gdn(self)  # unless SGLANG_DFLASH_TREE_GDN=0\n\n",
    ),
)

REPLAY_EDITS = (
    (
        MAMBA_BACKEND,
        "from sglang.srt.speculative.eagle_info import EagleDraftInput, EagleVerifyInput\n",
        "from sglang.srt.speculative.dflash import NUM_REQS_ATTR\n"
        "from sglang.srt.speculative.eagle_info import EagleDraftInput, EagleVerifyInput\n",
    ),
    (
        MAMBA_BACKEND,
        "        num_padding = torch.count_nonzero(\n"
        "            seq_lens_cpu == self.get_cuda_graph_seq_len_fill_value()\n"
        "        )\n",
        "        # Padding rows have the fill value as their length. A real request can have it too (a\n"
        "        # one-token prompt at its first verify): where the verify input records its number of real\n"
        "        # requests, count only the rows after them.\n"
        "        num_reqs = getattr(spec_info, NUM_REQS_ATTR, None)\n"
        "        padding_lens = seq_lens_cpu if num_reqs is None else seq_lens_cpu[num_reqs:]\n"
        "        num_padding = torch.count_nonzero(\n"
        "            padding_lens == self.get_cuda_graph_seq_len_fill_value()\n"
        "        )\n",
    ),
)


TREE_GDN_EDITS = (
    (
        GDN_BACKEND,
        "        assert isinstance(mixed_qkv, torch.Tensor)\n        seq_len = mixed_qkv.shape[0]\n",
        "        assert isinstance(mixed_qkv, torch.Tensor)\n"
        "        if forward_batch.forward_mode.is_target_verify():\n"
        "            from sglang.srt.speculative.dflash_tree_gdn import workspace\n\n"
        "            tree_verify = workspace()  # DFLASH/DDTREE, unless SGLANG_DFLASH_TREE_GDN=0\n"
        "            if tree_verify is not None:\n"
        "                return tree_verify.verify(self, layer, forward_batch, mixed_qkv, a, b)\n"
        "        seq_len = mixed_qkv.shape[0]\n",
    ),
)

TREE_ATTENTION_EDITS = (
    (
        MAMBA_BACKEND,
        "        if layer_id in self.full_attn_layers:\n            return self.full_attn_backend.forward_extend(\n",
        "        if layer_id in self.full_attn_layers:\n"
        "            if forward_batch.forward_mode.is_target_verify():\n"
        "                from sglang.srt.speculative.dflash_tree_gdn import attention_serves, workspace\n\n"
        "                tree_verify = workspace()  # DFLASH/DDTREE\n"
        "                if (\n"
        "                    tree_verify is not None\n"
        "                    and tree_verify.attention_for(self.full_attn_backend)\n"
        "                    and attention_serves(layer, forward_batch.token_to_kv_pool, q)\n"
        "                ):\n"
        "                    first = layer_id == min(self.full_attn_layers)  # makes the step's mask\n"
        "                    return tree_verify.attention(layer, forward_batch, q, k, v, save_kv_cache, first)\n"
        "            return self.full_attn_backend.forward_extend(\n",
    ),
)

MEMORY_PLAN_EDITS = (
    (
        KV_CACHE_MIXIN,
        "                    (n * k * num_layers * 2 * kv_size) // scale_block_size\n"
        "                )\n"
        "        return cell_size\n",
        "                    (n * k * num_layers * 2 * kv_size) // scale_block_size\n"
        "                )\n"
        "        if (\n"
        "            self.spec_algorithm.is_dflash() or self.spec_algorithm.is_ddtree()\n"
        "        ) and not self.is_draft_worker:\n"
        "            # the drafter's context K/V sits at the target's KV slots: one entry per KV-cache token\n"
        "            cell_size += dflash_draft_bytes(\n"
        "                dflash_draft_config(self.server_args),\n"
        "                self.model_config.dtype,\n"
        "                self.server_args.tp_size,\n"
        "            )[1]\n"
        "        return cell_size\n",
    ),
    (
        KV_CACHE_MIXIN,
        "        assert config is not None\n\n        # reserve the memory for the intermediate mamba states used for spec dec\n",
        "        assert config is not None\n\n"
        "        if self.spec_algorithm.is_dflash() or self.spec_algorithm.is_ddtree():\n"
        "            # the drafter's weights are loaded after this plan\n"
        "            total_rest_memory -= dflash_reserve_gib(server_args, self.model_config.dtype)\n\n"
        "        # reserve the memory for the intermediate mamba states used for spec dec\n",
    ),
    (
        KV_CACHE_MIXIN,
        "                config.mamba2_cache_params.mamba_cache_per_req\n"
        "                * max_running_requests\n"
        "                * server_args.speculative_num_draft_tokens\n",
        "                config.mamba2_cache_params.mamba_cache_per_req\n"
        "                * max(dflash_spec_state_size(server_args, max_running_requests), 1)  # one slot with the tree verify\n"
        "                * server_args.speculative_num_draft_tokens\n",
    ),
    (
        KV_CACHE_MIXIN,
        "                    mamba_spec_state_size=max_num_reqs,\n",
        "                    # no per-node GDN verify states when the tree verify replaces them\n"
        "                    mamba_spec_state_size=dflash_spec_state_size(self.server_args, max_num_reqs),\n",
    ),
    (
        KV_CACHE_MIXIN,
        "from sglang.srt.mem_cache.memory_pool import (\n",
        "from sglang.srt.speculative.dflash_memory_plan import (\n"
        "    draft_bytes as dflash_draft_bytes,\n"
        "    draft_config as dflash_draft_config,\n"
        "    reserve_gib as dflash_reserve_gib,\n"
        ")\n"
        "from sglang.srt.speculative.dflash_tree_gdn import (\n"
        "    spec_state_size as dflash_spec_state_size,\n"
        ")\n"
        "from sglang.srt.mem_cache.memory_pool import (\n",
    ),
)


def apply_edits(read, edits) -> dict[str, str]:
    out = {}
    for path, old, new in edits:
        out[path] = edit(out.get(path, read(path)), old, new, path)
    return out


# ----------------------------------------------------------------------------- the series


@dataclass
class Patch:
    slug: str
    subject: str
    body: str
    files: dict[str, str] = field(default_factory=dict)  # upstream path -> new text
    new: bool = True  # the files are new (else: edits of existing files)


def series(read) -> list[Patch]:
    """The patches, in order. read(path) gives a pristine SGLang file's text ('python/sglang/...')."""
    core, facing = core_files(), facing_files()
    model = upstream_path(FACING["sglang_dflash.sglang.draft_model"])
    return [
        Patch(
            "speculative-add-dflash-ddtree-core",
            "[Speculative] Add the DFLASH/DDTREE core: draft trees, acceptance and tree kernels",
            "Add sglang.srt.speculative.dflash, framework-independent (torch and Triton only):\n"
            "- ddtree.py: DDTree draft trees (exact top-B prefixes of the drafter's per-depth marginals,\n"
            "  built on the GPU without a host round-trip), greedy and lossless sampling acceptance;\n"
            "- dflash.py: a DFlash chain as the degenerate tree, so chain and tree share verify and commit;\n"
            "- kernels/: Triton tree build/walk, vocabulary top-k/argmax, tree Gated DeltaNet verify/commit,\n"
            "  tree causal conv and tree attention, each beside the torch reference it is tested against;\n"
            "- models/: the z-lab DFlash config parsing and target/drafter pair checks, and plain-torch\n"
            "  reference models (drafter, Qwen3.5 hybrid target).\n"
            "Nothing in SGLang uses it yet.",
            core,
        ),
        Patch(
            "models-add-dflash-draft-model",
            "[Model] Add DFlashDraftModel, the z-lab DFlash block drafter",
            'Support `architectures: ["DFlashDraftModel"]` checkpoints (e.g. z-lab/Qwen3.6-27B-DFlash) on\n'
            "SGLang layers: tensor-parallel attention and MLP, ENCODER_ONLY attention over the draft block\n"
            "(sliding layers: DECODER with the window), no embedding or LM head (the target's are used).\n"
            "Registered through EntryClass like every module of sglang.srt.models.",
            {model: facing[model]},
        ),
        Patch(
            "speculative-add-dflash-ddtree-workers",
            "[Speculative] Add DFLASH and DDTREE workers, hidden capture and server-argument resolution",
            "- dflash_worker.py: DFlashWorker (chain) and DDTreeWorker (tree) for the non-overlap scheduler,\n"
            "  verifying through EAGLE's TARGET_VERIFY path and its post-verify bookkeeping;\n"
            "- dflash_hidden_capture.py: the target's hidden states at the drafter's tapped layers, in a\n"
            "  static buffer the target's CUDA graphs write;\n"
            "- dflash_verify_io.py: a draft tree and its acceptance as EagleVerifyInput tensors;\n"
            "- dflash_vocab_parallel.py: top-k / argmax over a vocabulary-parallel LM head, equal on all ranks;\n"
            "- dflash_step_profile.py: per-phase step times when SGLANG_DFLASH_PROFILE names a file;\n"
            "- dflash_server_args.py: defaults for DFLASH/DDTREE and refusals before serving starts\n"
            "  (drafter/target mismatch, DP attention, PP, page size for DDTREE, ...).\n"
            "Not wired in yet.",
            {p: t for p, t in facing.items() if p != model},
        ),
        Patch(
            "speculative-register-dflash-ddtree",
            "[Speculative] Register DFLASH and DDTREE as speculative algorithms",
            "SpeculativeAlgorithm gets DFLASH and DDTREE (is_dflash()/is_ddtree()). Both answer is_eagle(),\n"
            "so the shared code gives their verify pass what EAGLE's gets (TARGET_VERIFY CUDA graphs, tree\n"
            "custom_mask, GDN verify metadata); as for EAGLE, radix-cache keys are bigrams. They do not\n"
            "support spec v2. create_worker returns DFlashWorker / DDTreeWorker;\n"
            "--speculative-algorithm accepts both, and _handle_speculative_decoding resolves their arguments\n"
            "first (dflash_server_args.resolve_speculative_args); _handle_model_specific_adjustments settles the\n"
            "radix cache and the mamba scheduler strategy before the hybrid models' checks.",
            apply_edits(read, REGISTRATION_EDITS),
            new=False,
        ),
        Patch(
            "model-runner-dflash-hidden-capture",
            "[Speculative] Install the DFLASH/DDTREE hidden capture before target graph capture",
            "The drafter is conditioned on the target's hidden states at its tapped layers. The capture\n"
            "copies them into a static buffer, so it must be installed on the target model before\n"
            "ModelRunner.init_device_graphs captures the CUDA graphs (replays run no Python).",
            apply_edits(read, CAPTURE_EDITS),
            new=False,
        ),
        Patch(
            "scheduler-dflash-admission",
            "[Speculative] Abort DFLASH/DDTREE requests the workers cannot serve yet, at admission",
            "Logprobs, grammar, min-p, penalties, logit_bias and custom logit processors are not served\n"
            "losslessly by the DFLASH/DDTREE workers yet. Such a request now finishes at admission with an\n"
            "error naming the feature (as an over-long prompt does), instead of reaching the worker.",
            apply_edits(read, ADMISSION_EDITS),
            new=False,
        ),
        Patch(
            "mamba-graph-replay-padding",
            "[Bugfix] Hybrid GDN graph replay: a length-1 request is not padding",
            "MambaAttnBackendBase._replay_metadata counts CUDA-graph padding as the rows whose seq_lens_cpu\n"
            "equals the fill value (1). A real request of length 1 (a one-token prompt at its first verify)\n"
            "is then taken for padding: the batch's last real request is verified from state slot -1 and\n"
            "emits garbage. Verify inputs that record their number of real requests (NUM_REQS_ATTR, set by\n"
            "the DFLASH/DDTREE workers) now have only the rows after them counted; others are unchanged.",
            apply_edits(read, REPLAY_EDITS),
            new=False,
        ),
        Patch(
            "gdn-backend-tree-verify",
            "[Speculative] GDN TARGET_VERIFY through tree kernels for DFLASH/DDTREE",
            "The GDN layers of a DFLASH/DDTREE verify run the tree conv and\n"
            "tree Gated DeltaNet kernels (outputs for every node, pools untouched, no per-node state), and\n"
            "the worker commits the accepted path of every layer in one launch each, instead of the\n"
            "intermediate_ssm / intermediate_conv_window snapshots and update_mamba_state_after_mtp_verify,\n"
            "which the next patch allocates for one request slot only. SGLANG_DFLASH_TREE_GDN=0 keeps SGLang's\n"
            "own path.",
            apply_edits(read, TREE_GDN_EDITS),
            new=False,
        ),
        Patch(
            "hybrid-backend-tree-attention",
            "[Speculative] Full-attention TARGET_VERIFY through the tree attention kernel",
            "The full-attention layers of a hybrid model's DFLASH/DDTREE verify run the tree attention kernel\n"
            "where it was measured faster than the attention backend (Hopper, against flashinfer and triton;\n"
            "SGLANG_DFLASH_TREE_ATTENTION=1 / 0 forces it on / off): the prefix read from the KV pool through\n"
            "req_to_token, the draft nodes through the tree's ancestor mask, each request's prefix cut into\n"
            "splits by its own length. Layers with a logit cap, a sliding window or an fp8 KV cache keep the\n"
            "attention backend.",
            apply_edits(read, TREE_ATTENTION_EDITS),
            new=False,
        ),
        Patch(
            "memory-plan-dflash-drafter",
            "[Speculative] DFLASH/DDTREE memory plan: the drafter's KV and weights, one slot of GDN states",
            "The DFLASH/DDTREE worker keeps the drafter's context K/V at the target's KV slots (an entry per\n"
            "KV-cache token), so its per-token bytes join the cell size; its weights are loaded after the plan,\n"
            "which now holds them back (dflash_memory_plan.reserve_gib). With the tree GDN verify the\n"
            "per-node GDN verify states are never read, so they are allocated and reserved for one request\n"
            "slot instead of max_running_requests (about 80 GB at Qwen3.6-27B, TP=2, 33 nodes, 32 requests).",
            apply_edits(read, MEMORY_PLAN_EDITS),
            new=False,
        ),
    ]


def unified_diff(path: str, old: str | None, new: str) -> tuple[str, int, int]:
    """A git-style diff of one file (old None: a new file), with its insertion and deletion counts."""

    def lines(text):
        out = text.splitlines(keepends=True)
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n\\ No newline at end of file\n"
        return out

    a, b = lines(old or ""), lines(new)
    head = f"diff --git a/{path} b/{path}\n" + ("new file mode 100644\n" if old is None else "")
    hunks = list(difflib.unified_diff(a, b, "/dev/null" if old is None else f"a/{path}", f"b/{path}", n=3))
    if not hunks:
        raise UnsupportedSource(f"{path}: the patch changes nothing")
    body = "".join(hunks)
    adds = sum(1 for h in hunks[2:] if h.startswith("+"))
    dels = sum(1 for h in hunks[2:] if h.startswith("-"))
    return head + body, adds, dels


def format_patch(p: Patch, number: int, total: int, read) -> str:
    diffs, stat, total_adds, total_dels = [], [], 0, 0
    for path in sorted(p.files):
        old = read(path) if not p.new else None
        if p.new and exists(read, path):
            raise UnsupportedSource(f"{path} already exists in this SGLang source; the patch would add it")
        diff, adds, dels = unified_diff(path, old, p.files[path])
        diffs.append(diff)
        stat.append(f" {path} | {adds + dels} {'+' * min(adds, 40)}{'-' * min(dels, 40)}".rstrip())
        total_adds, total_dels = total_adds + adds, total_dels + dels
    return (
        f"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        f"From: {AUTHOR}\n"
        f"Subject: [PATCH {number}/{total}] {p.subject}\n\n"
        f"{p.body}\n"
        "---\n"
        + "\n".join(stat)
        + f"\n {len(stat)} file{'s' if len(stat) > 1 else ''} changed, {total_adds} insertions(+), {total_dels} deletions(-)\n\n"
        + "".join(diffs)
        + "-- \nsglang-dflash patches/generate.py\n"
    )


def exists(read, path: str) -> bool:
    try:
        read(path)
    except FileNotFoundError:
        return False
    return True


# ----------------------------------------------------------------------------- SGLang sources


def installed_sglang() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("sglang is not installed; pass --sglang-src (a checkout of the SGLang repository)")
    return Path(list(spec.submodule_search_locations)[0])


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sglang")
    except PackageNotFoundError:
        return "unknown"


def make_upstream_tree(dest: Path) -> Path:
    """Copy the installed sglang package to dest/python/sglang (the repository's layout); returns dest."""
    shutil.copytree(installed_sglang(), dest / "python" / "sglang", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def reader(src: Path | None):
    """read(path) for upstream paths 'python/sglang/...', from a checkout or from the installed package."""
    if src is None:
        package = installed_sglang()
        found = installed_version()
        if found != RELEASE:
            raise SystemExit(f"the installed sglang is {found}, not {RELEASE}; pass --sglang-src with a {RELEASE} checkout")

        def read(path: str) -> str:
            return (package / Path(path).relative_to("python/sglang")).read_text()

        return read

    def read(path: str) -> str:
        return (src / path).read_text()

    return read


README = """\
# patches/: sglang-dflash as an SGLang patch series

The plugin's DFLASH and DDTREE speculative decoding as {n} patches against **SGLang {release}**
(the `python/` tree of the `v{release}` tag, or the release's wheel in that layout), written the way
an upstream PR would add them. They are generated from the plugin's code by `generate.py`, and
`tests/test_patches.py` checks that they are up to date and apply cleanly to that release.

## The series

{table}

## Apply

    cd sglang                                   # a checkout of v{release}
    git apply /path/to/patches/*.patch          # in the order of patches/series
    # or: for p in $(cat /path/to/patches/series); do patch -p1 < /path/to/patches/$p; done

(`git am` works too: each patch has a From/Subject header.) Nothing else is needed: the drafter
architecture registers itself through `EntryClass` in `python/sglang/srt/models/dflash.py`, and
`--speculative-algorithm DFLASH|DDTREE` is then a built-in choice.

## Regenerate

    python patches/generate.py                  # against the installed sglang (must be {release})
    python patches/generate.py --sglang-src ~/sglang   # against a checkout

After any change to the plugin's ported modules, rerun it and commit the result (the test fails
until then). An edit whose anchor is no longer found stops the generator with the file and the
line it looked for: that is how a newer SGLang release shows up, and its anchors are in
`generate.py` (`REGISTRATION_EDITS`, `CAPTURE_EDITS`, `ADMISSION_EDITS`, `REPLAY_EDITS`, `TREE_GDN_EDITS`,
`TREE_ATTENTION_EDITS`).

## What maps where

- `sglang_dflash/{{ddtree,dflash,cuda_graph}}.py`, `kernels/`, `models/` -> `python/sglang/srt/speculative/dflash/`
  (copied file by file; their relative imports unchanged)
- `sglang/draft_model.py` -> `python/sglang/srt/models/dflash.py`
- `sglang/{{dflash_worker,hidden_capture,verify_io,vocab_parallel,server_args}}.py` ->
  `python/sglang/srt/speculative/dflash_*.py` (relative imports made absolute), and
  `sglang/tree_gdn_backend.py` -> `python/sglang/srt/speculative/dflash_tree_gdn.py`
- `hooks.patch_spec_info`, `algorithm.DraftTreeAlgorithm` -> `SpeculativeAlgorithm.DFLASH` / `DDTREE`,
  `is_dflash()` / `is_ddtree()`, `create_worker`
- `hooks.patch_server_args` -> the `--speculative-algorithm` choices, `_handle_speculative_decoding`,
  `_handle_model_specific_adjustments`
- `hooks.register_draft_model` -> nothing: `EntryClass` in `models/dflash.py`
- `hooks.patch_model_runner` (`hidden_capture.patch_model_runner`) -> `ModelRunner.init_device_graphs`
- `hooks.patch_scheduler` -> `Scheduler._add_request_to_queue`
- `hooks.patch_mamba_replay` -> `MambaAttnBackendBase._replay_metadata`
- `hooks.patch_gdn_backend` (`tree_gdn_backend.patch_gdn_backend`) -> `GDNAttnBackend.forward_extend`
  (on for DFLASH/DDTREE; `SGLANG_DFLASH_TREE_GDN=0` keeps SGLang's own path, as in the plugin)
- `hooks.patch_hybrid_linear_attn_backend` (`tree_gdn_backend.patch_hybrid_backend`) ->
  `HybridLinearAttnBackend.forward_extend` (on where measured faster, `SGLANG_DFLASH_TREE_ATTENTION=1` / `0` to
  force it, as in the plugin)

## Left out (plugin-only)

- `bootstrap.py`, `plugin.py`, `hooks.py`, `algorithm.py`: the import-time patching and the
  duck-typed algorithm object are replaced by the direct edits; their constants `ALGORITHMS` and
  `NUM_REQS_ATTR` are defined in `speculative/dflash/__init__.py`.
- `worker.py`: upstream, `create_worker` returns the workers directly, and the hidden capture is installed whenever the algorithm
  is DFLASH/DDTREE.
- `server_args.check_sglang_version` (and `SUPPORTED_SGLANG`): inside SGLang there is no other version.
- `hooks.patch_tp_worker`: SGLANG_DFLASH_PROFILE's timing of stock decode forwards (a benchmark aid).
- `engine/`, `generate.py`, `init_draft.py`, `demo.py`, `launch.py`: the standalone engine and CLIs.

Module docstrings are the plugin's, verbatim: they still name plugin files (`hooks`, `worker.py`)
in places.
"""


def write(out: Path, src: Path | None) -> list[str]:
    read = reader(src)
    patches = series(read)
    names = [f"{i:04d}-{p.slug}.patch" for i, p in enumerate(patches, 1)]
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("[0-9][0-9][0-9][0-9]-*.patch"):
        old.unlink()
    for i, (name, p) in enumerate(zip(names, patches), 1):
        (out / name).write_text(format_patch(p, i, len(patches), read))
    (out / "series").write_text("".join(n + "\n" for n in names))
    table = "\n".join(f"{i}. `{n}`: {p.subject}" for i, (n, p) in enumerate(zip(names, patches), 1))
    (out / "README.md").write_text(README.format(n=len(patches), release=RELEASE, table=table))
    return names


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))  # fmt: skip
    ap.add_argument(
        "--sglang-src",
        type=Path,
        default=None,
        help=f"a pristine SGLang {RELEASE} checkout (with python/sglang/srt); default: the installed sglang package",
    )
    ap.add_argument("--out", type=Path, default=HERE, help="where to write the series (default: this directory)")
    args = ap.parse_args(argv)
    try:
        names = write(args.out, args.sglang_src)
    except UnsupportedSource as e:
        sys.exit(f"generate.py: {e}")
    print("\n".join(str(args.out / n) for n in names))


if __name__ == "__main__":
    main()
