#!/usr/bin/env python3
"""Write patches/<release>/: sglang-dflash as a patch series against the newest supported SGLang release's source
(0.5.23, `TARGETS`), the way an upstream PR would add it; older releases run the plugin.

Everything is generated from the plugin's own code, so the series follows the plugin:

- the SGLang-independent core (`sglang_dflash/{ddtree,dflash,cuda_graph,env}.py`, `kernels/`, `models/`) is
  copied file by file into a new package `python/sglang/srt/speculative/<prefix>/` (its relative imports stay as
  they are; an import leaving that set stops the generator);
- the SGLang-facing modules (`sglang_dflash/sglang/*.py` but `algorithm.py` and the worker on 0.5.11's schema)
  become files `python/sglang/srt/speculative/<prefix>_*.py`, with their relative imports rewritten to absolute
  `sglang.srt...` ones;
- each hook of `sglang_dflash/sglang/plugin/patches.py` that the release's table (`plugin/versions.py`) applies
  becomes a direct edit of the SGLang function it goes around (what `algorithm.registered_spec_class` registers
  becomes members of SGLang's `SpeculativeAlgorithm`), made by exact-text replacement on the pristine file and
  diffed with difflib. An anchor that is not found exactly once, or not inside the function the table names, stops
  the generator with a message: that is how another SGLang release (or changed plugin code) shows up. The plugin
  package itself is not ported: upstream needs no plugin.

    python patches/generate.py                                   # the installed sglang's release
    python patches/generate.py --release 0.5.23 --sglang-src DIR  # DIR: a checkout, or an unpacked wheel
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import shutil
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
PKG = HERE.parent / "sglang_dflash"
sys.path.insert(0, str(PKG.parent))
from sglang_dflash.sglang.names import ALGORITHMS, DDTREE, DFLASH, DFLASH_CHAIN  # noqa: E402
from sglang_dflash.sglang.plugin import versions  # noqa: E402
from sglang_dflash.sglang.plugin.activate import installed_version  # noqa: E402

AUTHOR = "sglang-dflash <sglang-dflash@users.noreply.github.com>"

# The SGLang-independent core, vendored as the package sglang.srt.speculative.<prefix>.
CORE = ("ddtree.py", "dflash.py", "proposal.py", "conditional_tree.py", "budget.py", "cuda_graph.py", "env.py",
        "kernels", "models")  # fmt: skip

# Plugin module -> upstream module name after sglang.srt.speculative.<prefix>_.
FACING = {
    "sglang_dflash.sglang.names": "names",
    "sglang_dflash.sglang.hidden_capture": "hidden_capture",
    "sglang_dflash.sglang.verify_io": "verify_io",
    "sglang_dflash.sglang.vocab_parallel": "vocab_parallel",
    "sglang_dflash.sglang.server_args": "server_args",
    "sglang_dflash.sglang.worker_common": "worker_common",
    "sglang_dflash.sglang.tree_gdn_backend": "tree_gdn",
    "sglang_dflash.sglang.memory_plan": "memory_plan",
    "sglang_dflash.sglang.graph_memory": "graph_memory",
    "sglang_dflash.sglang.step_profile": "step_profile",
    "sglang_dflash.sglang.width_control": "width_control",
}
# Plugin modules beside them that are not ported: the enum members and the edits replace them; and the spec-v2 worker
# on 0.5.11's schema, a release with no series.
NOT_PORTED = ("sglang_dflash.sglang", "sglang_dflash.sglang.algorithm", "sglang_dflash.sglang.ddtree_worker_v2_0511")
# Our CPU tests ported with the series (their oracles are brute force, transformers and hand-worked cases, no GPU and no
# SGLang runtime), as test/registered/unit/spec/<prefix>/<name>; the helpers go beside them.
PORTED_TESTS = {
    "tests/test_ddtree.py": "test_ddtree_trees.py",
    "tests/kernels/test_kernel_refs.py": "test_ddtree_kernel_refs.py",
    "tests/sglang/test_verify_io.py": "test_ddtree_verify_io.py",
    "tests/tree_helpers.py": "tree_helpers.py",
    "tests/reference_heap.py": "reference_heap.py",
}
CPU_SUITE = 'register_cpu_ci(est_time=30, suite="base-a-test-cpu")'  # 0.5.23's CPU suite (sglang.test.ci.ci_register)
# The worker (spec v2: the release has no spec v1), upstream as <prefix>_worker_v2.
WORKER = "sglang_dflash.sglang.ddtree_worker_v2"
# The one function of algorithm.py the ported modules import, upstream in the names module (SGLang's enum holds the
# algorithm itself, so only server arguments are asked).
IS_OURS = f'''

def is_ours(server_args) -> bool:
    """The server arguments (their algorithm name made canonical by `resolve_speculative_args`) are served by the
    {DFLASH_CHAIN} / {DDTREE} workers."""
    return getattr(server_args, "speculative_algorithm", None) in ALGORITHMS
'''
# Plugin hooks with no upstream edit.
PLUGIN_ONLY = {
    "scheduler_init": "turns the runtime hooks on in a scheduler that serves ours (upstream, the edits are there)",
    "acceptance_histogram": "0.5.11's spec-v2 path, a release with no series",
    "check_finished": "a fix of SGLang's spec-v2 stop-string check (any multi-token step), apart from this port",
}


@dataclass(frozen=True)
class Target:
    """One supported SGLang release and where the port goes in it."""

    release: str
    prefix: str  # upstream names: speculative/<prefix>/, speculative/<prefix>_*.py
    slug: str  # the algorithms in patch file names
    why: str

    @property
    def table(self) -> versions.Release:
        table = versions.release(self.release)
        if table is None:
            raise UnsupportedSource(f"plugin/versions.py has no table for SGLang {self.release}")
        return table

    @property
    def core(self) -> str:
        return f"sglang.srt.speculative.{self.prefix}"

    def module(self, name: str) -> str:
        """The upstream module of FACING's `name` (e.g. "worker_v2": sglang.srt.speculative.ddtree_worker_v2)."""
        return f"sglang.srt.speculative.{self.prefix}_{name}"

    @property
    def facing(self) -> dict[str, str]:
        return {**{m: self.module(n) for m, n in FACING.items()}, WORKER: self.module("worker_v2")}


TARGETS = {
    t.release: t
    for t in (
        Target(
            "0.5.23",
            "ddtree",
            "ddtree-dflash-chain",
            "This release has no spec v1: ours run as `DDTreeWorkerV2` on the spec-v2 schema (under SGLang's scheduler "
            "choice, overlap by default), built in as `SpeculativeAlgorithm` members with the "
            "answers the plugin registers through `SpeculativeAlgorithm.register`. SGLang's own DFLASH "
            "(`dflash_worker_v2.py`, `models/dflash.py`) stays as it is: ours go by DDTREE and DFLASH_CHAIN, under "
            "`speculative/ddtree*`.",
        ),
    )
}


class UnsupportedSource(RuntimeError):
    """An anchor was not found: the source is not the release (or the plugin code) this generator knows."""


# ----------------------------------------------------------------------------- text helpers


@dataclass(frozen=True)
class Edit:
    path: str  # upstream file
    within: str | None  # "Class" or "Class.function" the anchor must start in (None: anywhere, e.g. imports)
    old: str
    new: str


def edit(text: str, old: str, new: str, where: str) -> str:
    """text with `old` (which must occur exactly once) replaced by `new`."""
    n = text.count(old)
    if n != 1:
        first = old.strip().splitlines()[0] if old.strip() else repr(old)
        raise UnsupportedSource(
            f"{where}: anchor {first!r} found {n} times, expected once. This release's source (or the plugin's "
            "code) is not what patches/generate.py knows: update its anchors."
        )
    return text.replace(old, new)


def check_within(text: str, e: Edit) -> None:
    """The anchor starts inside the class or function e.within of `text`."""
    if e.within is None:
        return
    line = text[: text.index(e.old)].count("\n") + 1
    nodes = ast.parse(text).body
    for name in e.within.split("."):
        node = next((n for n in nodes if getattr(n, "name", None) == name), None)
        if node is None:
            raise UnsupportedSource(f"{e.path}: no {e.within}")
        nodes = node.body
    if not node.lineno <= line <= node.end_lineno:
        raise UnsupportedSource(f"{e.path}: anchor at line {line} is outside {e.within}")


def resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Absolute name of `from <level dots><name> import ...` inside `module`."""
    base = module.split(".")
    base = base[: len(base) - level + (1 if is_package else 0)]
    return ".".join(base + ([name] if name else []))


def rewrite_imports(text: str, module: str, is_package: bool, upstream) -> str:
    """Rewrite each relative import of `module` by `upstream(target, names, where)`: None keeps it, else (the new
    `from X import` module, the names to keep); a statement left with no names goes."""
    lines = text.splitlines(keepends=True)
    for node in sorted(ast.walk(ast.parse(text)), key=lambda n: -getattr(n, "lineno", 0)):
        if not (isinstance(node, ast.ImportFrom) and node.level):
            continue
        target = resolve(module, is_package, node.level, node.module)
        new = upstream(target, [a.name for a in node.names], f"{module} line {node.lineno}")
        if new is None:
            continue
        head, keep = new
        first, last = node.lineno - 1, node.end_lineno
        indent = lines[first][: node.col_offset]
        kept = [a for a in node.names if a.name in keep]
        if len(kept) == len(node.names):  # the names as they were: only the module changes
            pattern = re.compile(r"from\s+\.+[\w.]*\s+import")
            lines[first] = indent + pattern.sub(f"from {head} import", lines[first][node.col_offset :], 1)
        elif kept:
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in kept)
            lines[first:last] = [f"{indent}from {head} import {names}\n"]
        else:
            lines[first:last] = []
    return "".join(lines)


def module_name(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts), rel.name == "__init__"


def upstream_path(module: str, is_package: bool = False) -> str:
    return "python/" + module.replace(".", "/") + ("/__init__.py" if is_package else ".py")


# ----------------------------------------------------------------------------- the plugin's files, ported


def core_files(t: Target) -> dict[str, str]:
    """The core package: every .py file of CORE, copied; relative imports must stay inside it."""
    files = sorted(p for c in CORE for p in ([PKG / c] if c.endswith(".py") else (PKG / c).rglob("*.py")))
    vendored = {module_name(p)[0] for p in files}

    def inside(target, names, where):
        if not (target in vendored or all(f"{target}.{n}" in vendored for n in names)):
            raise UnsupportedSource(f"{where}: import of {target} leaves the vendored core {CORE}; extend CORE")
        return None

    out = {}
    for p in files:
        module, is_package = module_name(p)
        out[upstream_path(t.core + module.removeprefix("sglang_dflash"), is_package)] = rewrite_imports(
            p.read_text(), module, is_package, inside
        )
    out[upstream_path(t.core, True)] = (
        f'"""{DDTREE} and {DFLASH_CHAIN} speculative decoding: draft trees, acceptance, Triton kernels and reference '
        "models.\n\n"
        "Framework-independent (plain torch and Triton, no SGLang import): the SGLang side lives in\n"
        f"`{t.module('*')}`. `env` holds the\n"
        "SGLANG_DFLASH_* switches.\n"
        '"""\n'
    )
    return out


def plugin_modules() -> list[str]:
    return sorted(module_name(p)[0] for p in (PKG / "sglang").glob("*.py"))


def facing_files(t: Target) -> dict[str, str]:
    """The SGLang-facing modules, with absolute imports and `is_ours` in the names module."""
    facing = t.facing
    unknown = sorted(set(plugin_modules()) - set(facing) - set(NOT_PORTED))
    if unknown:
        raise UnsupportedSource(f"plugin modules {unknown} have no upstream place; extend FACING or NOT_PORTED")
    core = {c.removesuffix(".py") for c in CORE}
    names_module = facing["sglang_dflash.sglang.names"]

    def upstream(target, names, where):
        if target == "sglang_dflash" and all(n in core for n in names):
            return t.core, names
        if target.split(".")[1:2] and target.split(".")[1] in core:
            return t.core + target.removeprefix("sglang_dflash"), names
        if target in facing:
            return facing[target], names
        if target == "sglang_dflash.sglang.algorithm" and names == ["is_ours"]:
            return names_module, names
        raise UnsupportedSource(f"{where}: imports {names} from {target}, which has no upstream place; extend FACING")

    out = {}
    for module, dest in facing.items():
        text = (PKG.parent / (module.replace(".", "/") + ".py")).read_text()
        if module == "sglang_dflash.sglang.names":
            text += IS_OURS
        out[upstream_path(dest)] = rewrite_imports(text, module, False, upstream)
    return out


def test_files(t: Target) -> dict[str, str]:
    """PORTED_TESTS with their `from sglang_dflash... import` lines pointing at the ported modules; each test file
    registers for SGLang's CPU CI and runs under pytest as a script, as upstream's registered tests do."""
    facing = t.facing
    pattern = re.compile(r"^(\s*from )(sglang_dflash[\w.]*)( import)", re.M)

    def upstream(match):
        target = match.group(2)
        if target in facing:
            return match.group(1) + facing[target] + match.group(3)
        if target.split(".")[1:2] and f"{target.split('.')[1]}.py" in CORE or target.split(".")[1:2] in (["kernels"], ["models"]):
            return match.group(1) + t.core + target.removeprefix("sglang_dflash") + match.group(3)
        raise UnsupportedSource(f"a ported test imports from {target}, which has no upstream place")

    out = {}
    for src, name in PORTED_TESTS.items():
        text = pattern.sub(upstream, (PKG.parent / src).read_text())
        if name.startswith("test_"):
            imports = [n for n in ast.parse(text).body if isinstance(n, (ast.Import, ast.ImportFrom))]
            imports = [n for n in imports if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
            lines = text.splitlines(keepends=True)
            lines.insert(imports[-1].end_lineno, f"from sglang.test.ci.ci_register import register_cpu_ci\n\n{CPU_SUITE}\n")
            missing = [m for m in ("sys", "pytest") if f"import {m}\n" not in text]  # the script entry below uses them
            lines.insert(imports[0].lineno - 1, "".join(f"import {m}\n" for m in missing))
            text = "".join(lines) + '\n\nif __name__ == "__main__":\n    sys.exit(pytest.main([__file__]))\n'
        out[f"test/registered/unit/spec/{t.prefix}/{name}"] = text
    return out


# ----------------------------------------------------------------------------- the hooks, as direct edits


WIDTH = 88  # SGLang's black line length: the added lines keep to it


def imports(indent: int, module: str, names: str) -> str:
    """`from module import names` at `indent`, wrapped as black wraps it."""
    pad = " " * indent
    line = f"{pad}from {module} import {names}\n"
    if len(line) <= WIDTH + 1:
        return line
    return f"{pad}from {module} import (\n" + "".join(f"{pad}    {n},\n" for n in names.split(", ")) + f"{pad})\n"


def comment(indent: int, text: str) -> str:
    """`text` as comment lines at `indent`, filled to WIDTH."""
    pad = " " * indent + "# "
    return textwrap.fill(text, WIDTH, initial_indent=pad, subsequent_indent=pad) + "\n"


def if_ours(indent: int, algorithm: str, also: str = "") -> str:
    """The `if` line(s) testing that the SpeculativeAlgorithm `algorithm` is one of ours (and `also`)."""
    pad, test = " " * indent, f"{algorithm}.is_dflash_chain() or {algorithm}.is_ddtree()"
    line = f"{pad}if ({test}) and {also}:\n" if also else f"{pad}if {test}:\n"
    if len(line) <= WIDTH + 1:
        return line
    return f"{pad}if (\n{operands(indent + 4, test)}{pad}){f' and {also}' if also else ''}:\n"


def operands(indent: int, test: str) -> str:
    """The `a or b` test at `indent` inside parentheses: one line, or one operand a line as black splits it."""
    pad = " " * indent
    if len(pad) + len(test) <= WIDTH:
        return f"{pad}{test}\n"
    first, second = test.split(" or ")
    return f"{pad}{first}\n{pad}or {second}\n"


def enum_members(spec_info: str, enum: str) -> Edit:
    """Our names as members of SGLang's SpeculativeAlgorithm enum, after NGRAM."""
    members = "".join(f"    {a} = auto()\n" for a in ALGORITHMS)
    return Edit(spec_info, enum, "    NGRAM = auto()\n", "    NGRAM = auto()\n" + members)


def enum_predicates(enum: str) -> str:
    """The enum's is_dflash_chain() / is_ddtree() methods."""
    return (
        "    def is_dflash_chain(self) -> bool:\n"
        f"        return self == {enum}.{DFLASH_CHAIN}\n\n"
        "    def is_ddtree(self) -> bool:\n"
        f"        return self == {enum}.{DDTREE}\n"
    )


SPEC_HOOK = "python/sglang/srt/arg_groups/speculative_hook.py"


def algorithm_edits(t: Target) -> list[Edit]:
    """`algorithm.registered_spec_class` as members of SGLang's enum (is_eagle() False, no draft KV of SGLang's), the
    server arguments resolved as the registry's `validate_server_args` resolves them, and create_worker returning the
    spec-v2 worker."""
    spec_info, enum = upstream_path(versions.SPEC_INFO), "SpeculativeAlgorithm"
    return [
        enum_members(spec_info, enum),
        Edit(
            spec_info,
            f"{enum}.is_ngram",
            f"    def is_ngram(self) -> bool:\n        return self == {enum}.NGRAM\n",
            f"    def is_ngram(self) -> bool:\n        return self == {enum}.NGRAM\n\n" + enum_predicates(enum),
        ),
        Edit(
            upstream_path("sglang.srt.speculative.spec_registry"),
            "CustomSpecAlgo.is_ngram",
            "    def is_ngram(self) -> bool:\n        return False\n",
            "    def is_ngram(self) -> bool:\n        return False\n\n"
            "    def is_dflash_chain(self) -> bool:\n        return False\n\n"
            "    def is_ddtree(self) -> bool:\n        return False\n",
        ),
        Edit(
            spec_info,
            f"{enum}.has_draft_kv",
            "        return not self.is_ngram()\n",
            if_ours(8, "self") + "            # the drafter's context K/V is counted per KV-cache token (the pool\n"
            "            # configurator's cell size), not per decode step\n"
            "            return False\n"
            "        return not self.is_ngram()\n",
        ),
        Edit(
            spec_info,
            f"{enum}.handle_server_args",
            "            _handle_dflash,\n",
            "            _handle_ddtree,\n            _handle_dflash,\n",
        ),
        Edit(
            spec_info,
            f"{enum}.handle_server_args",
            "        if self.is_dflash():\n            _handle_dflash(server_args)\n",
            "        if self.is_dflash():\n            _handle_dflash(server_args)\n"
            "        elif self.is_dflash_chain() or self.is_ddtree():\n"
            "            _handle_ddtree(server_args)\n",
        ),
        Edit(
            spec_info,
            f"{enum}.create_worker",
            "        if self.is_dflash():\n            # V2 worker drives both overlap",
            if_ours(8, "self") + imports(12, t.module("worker_v2"), "DDTreeWorkerV2") + "\n            return DDTreeWorkerV2\n\n"
            "        if self.is_dflash():\n            # V2 worker drives both overlap",
        ),
        Edit(
            SPEC_HOOK,
            None,
            "def _handle_dflash(server_args: ServerArgs) -> None:\n",
            "def _handle_ddtree(server_args: ServerArgs) -> None:\n"
            + imports(4, t.module("server_args"), "resolve_speculative_args")
            + "\n"
            f"    # {DDTREE} / {DFLASH_CHAIN} defaults and refusals. They assign fields, so they run on\n"
            "    # the recorder that declares what they write.\n"
            "    record_foreign_defaults(\n"
            "        server_args,\n"
            '        "handle_speculative_decoding.ddtree",\n'
            "        resolve_speculative_args,\n"
            "    )\n\n\n"
            "def _handle_dflash(server_args: ServerArgs) -> None:\n",
        ),
    ]


def hook_edits(t: Target, hook: versions.Patch) -> list[Edit]:
    """The direct edits that stand for one hook of the release's table (it goes around hook.target)."""
    path, within, name = upstream_path(hook.module), ".".join(hook.path), hook.hook
    if name == "add_request_to_queue":
        head = "    def _add_request_to_queue(self, req: Req, is_retracted: bool = False):\n"
        return [
            Edit(
                path,
                within,
                head,
                head
                + if_ours(8, "self.spec_algorithm", "not req.finished()")
                + imports(12, t.module("worker_common"), "fit_to_drafter, request_unsupported")
                + "\n"
                "            # features the workers cannot serve losslessly yet; prompts past the\n"
                "            # drafter's positions (the overlap scheduler runs one more step after a\n"
                "            # request's last: its verify starts up to N tokens further)\n"
                "            worker = self.draft_worker\n"
                "            reach = worker.num_nodes * (2 if self.enable_overlap else 1)\n"
                "            message = request_unsupported(req) or fit_to_drafter(\n"
                "                req, worker.max_len, reach\n"
                "            )\n"
                "            if message:\n"
                "                req.set_finish_with_abort(message)\n\n",
            )
        ]
    if name == "replay_metadata":
        # counted inside `if num_padding is None:` / `else:`, against a cached fill value
        pad, fill = " " * 16, "self._graph_seq_len_fill_value"
        lens = "seq_lens_cpu if num_reqs is None else seq_lens_cpu[num_reqs:]"
        return [
            Edit(
                path,
                None,
                "from sglang.srt.speculative.eagle_info import EagleDraftInput, EagleVerifyInput\n",
                imports(0, t.module("names"), "NUM_REQS_ATTR")
                + "from sglang.srt.speculative.eagle_info import EagleDraftInput, EagleVerifyInput\n",
            ),
            Edit(
                path,
                within,
                f"{pad}num_padding = torch.count_nonzero(\n{pad}    seq_lens_cpu == {fill}\n{pad})\n",
                comment(
                    len(pad),
                    "Padding rows have the fill value as their length. A real request can have it too (a one-token "
                    "prompt at its first verify): where the verify input records its number of real requests, count "
                    "only the rows after them.",
                )
                + f"{pad}num_reqs = getattr(spec_info, NUM_REQS_ATTR, None)\n"
                + (
                    f"{pad}padding_lens = {lens}\n"
                    if len(pad) + 15 + len(lens) <= WIDTH
                    else f"{pad}padding_lens = (\n{pad}    {lens}\n{pad})\n"
                )
                + f"{pad}num_padding = torch.count_nonzero(\n{pad}    padding_lens == {fill}\n{pad})\n",
            ),
        ]
    if name == "hybrid_forward_extend":
        head = '        if self._is_full_attn(layer, kwargs.get("layer_id")):\n'
        return [
            Edit(
                path,
                within,
                head + "            return self.full_attn_backend.forward_extend(\n",
                head
                + "            if forward_batch.forward_mode.is_target_verify() and layer is not None:\n"
                + imports(16, t.module("tree_gdn"), "attention_serves, forward_pools, workspace")
                + "\n"
                f"                tree_verify = workspace()  # {DFLASH_CHAIN}/{DDTREE}\n"
                "                pools = forward_pools(forward_batch, self.full_attn_backend)\n"
                "                if (\n"
                "                    tree_verify is not None\n"
                "                    and tree_verify.attention_for(self.full_attn_backend)\n"
                "                    and attention_serves(layer, pools[1], q)\n"
                "                ):\n"
                "                    # the first full-attention layer makes the step's mask\n"
                "                    first = layer.layer_id == min(self.full_attn_layers)\n"
                "                    return tree_verify.attention(\n"
                "                        layer, forward_batch, pools, q, k, v, save_kv_cache, first\n"
                "                    )\n"
                "            return self.full_attn_backend.forward_extend(\n",
            )
        ]
    if name == "gdn_forward_extend":
        return [
            Edit(
                path,
                within,
                "        assert isinstance(mixed_qkv, torch.Tensor)\n        seq_len = mixed_qkv.shape[0]\n",
                "        assert isinstance(mixed_qkv, torch.Tensor)\n"
                "        if forward_batch.forward_mode.is_target_verify():\n"
                + imports(12, t.module("tree_gdn"), "workspace")
                + "\n"
                f"            # {DFLASH_CHAIN}/{DDTREE}, unless SGLANG_DFLASH_TREE_GDN=0\n"
                "            tree_verify = workspace()\n"
                "            if tree_verify is not None:\n"
                "                return tree_verify.verify(self, layer, forward_batch, mixed_qkv, a, b)\n"
                "        seq_len = mixed_qkv.shape[0]\n",
            )
        ]
    if name == "req_to_token_pool_init":  # at its caller, which knows the algorithm
        caller, within = upstream_path(versions.KV_CONFIGURATOR), "KVCacheConfigurator._build_hybrid_req_pool"
        call = "        req_to_token_pool = HybridReqToTokenPool(\n"
        return [
            Edit(
                caller,
                within,
                call,
                imports(8, t.module("tree_gdn"), "enabled as tree_gdn_enabled")
                + "\n"
                + comment(
                    8,
                    f"one request slot of per-node GDN verify states where the {DFLASH_CHAIN}/{DDTREE} tree verify "
                    "replaces them (it never reads them)",
                )
                + "        tree_verify = tree_gdn_enabled() and (\n"
                + operands(12, "self.spec_algorithm.is_dflash_chain() or self.spec_algorithm.is_ddtree()")
                + "        )\n"
                + call,
            ),
            Edit(
                caller,
                within,
                "            mamba_spec_state_size=max_num_reqs,\n",
                "            mamba_spec_state_size=0 if tree_verify else max_num_reqs,\n",
            ),
        ]
    if name in ("graph_spec_info", "dummy_verify_input"):
        if name == "graph_spec_info":
            runner, mask, width = "self.model_runner", "self.buffers.custom_mask", "self.speculative_num_draft_tokens"
            anchor = "        elif self.model_runner.spec_algorithm.is_dflash_family():\n"
        else:  # upstream: the function itself (the plugin patches the name the graph runners imported)
            path, within = upstream_path(versions.SPEC_INFO), "create_dummy_verify_input"
            runner, mask, width = None, "custom_mask", "num_tokens_per_req"
            anchor = "    elif spec_algorithm.is_dflash_family():\n"
        algorithm = f"{runner}.spec_algorithm" if runner else "spec_algorithm"
        pad = " " * (len(anchor) - len(anchor.lstrip()))
        test = if_ours(len(pad), algorithm).replace(f"{pad}if ", f"{pad}elif ", 1)
        return [
            Edit(
                path,
                within,
                anchor,
                test
                + f"{pad}    # EAGLE's verify input with the tree's custom mask and our steps / topk\n"
                + imports(len(pad) + 4, t.module("worker_v2"), "dummy_verify_input")
                + "\n"
                + (
                    f"{pad}    spec_info = dummy_verify_input({mask}, {width})\n"
                    if len(pad) + 36 + len(mask) + len(width) <= WIDTH
                    else f"{pad}    spec_info = dummy_verify_input(\n{pad}        {mask}, {width}\n{pad}    )\n"
                )
                + anchor,
            )
        ]
    if name == "plan_mamba_states":  # the reservation of per-node GDN states, one slot's where the tree verify runs
        reserves = (
            "        reserves_spec_state = (\n"
            "            has_spec_dec\n"
            "            and not replayssm_active\n"
            "            and not _pd_prefill_skips_mamba_spec_state()\n"
        )
        ret = "        return total_rest_memory - mamba_state_memory\n"
        return [
            Edit(
                path,
                within,
                reserves,
                imports(8, t.module("memory_plan"), "one_slot_states_gib")
                + imports(8, t.module("tree_gdn"), "enabled as tree_gdn_enabled")
                + "\n"
                + comment(
                    8,
                    f"the {DFLASH_CHAIN}/{DDTREE} tree verify never reads the per-node GDN states: the pool "
                    "keeps them for one slot (_build_hybrid_req_pool), added to the state memory below",
                )
                + "        one_slot_spec_state = (\n"
                "            not self.is_draft_worker\n"
                "            and tree_gdn_enabled()\n"
                "            and (\n"
                + operands(16, "self.spec_algorithm.is_dflash_chain() or self.spec_algorithm.is_ddtree()")
                + "            )\n"
                "        )\n" + reserves + "            and not one_slot_spec_state\n",
            ),
            Edit(
                path,
                within,
                ret,
                "        if one_slot_spec_state:\n            mamba_state_memory += one_slot_states_gib(self)\n" + ret,
            ),
        ]
    if name == "compute_cell_size":
        tail = (
            "        cell_size += self._compute_qsa_cell_size(\n"
            "            hf_config=model_config.hf_config, num_layers=num_layers\n"
            "        )\n"
        )
        return [
            Edit(
                path,
                within,
                tail + "        return cell_size\n",
                tail
                + if_ours(8, "kvc.spec_algorithm", "not kvc.is_draft_worker")
                + imports(12, t.module("memory_plan"), "draft_cell_bytes")
                + "\n"
                "            # the drafter's context K/V sits at the target's KV slots: one entry per\n"
                "            # KV-cache token\n"
                "            cell_size += draft_cell_bytes(kvc)\n"
                "        return cell_size\n",
            )
        ]
    raise UnsupportedSource(f"hook {name} ({hook.target}) has no upstream edit in patches/generate.py; add one")


def apply_edits(read, edits: list[Edit]) -> dict[str, str]:
    out = {}
    for e in edits:
        if e.path not in out and not exists(read, e.path):
            raise UnsupportedSource(f"{e.path}: not in this source, which is not the release patches/generate.py knows")
        text = out.get(e.path) or read(e.path)
        out[e.path] = edit(text, e.old, e.new, e.path)
        check_within(text, e)
    return out


# ----------------------------------------------------------------------------- the series


@dataclass
class Patch:
    slug: str
    subject: str
    body: str
    files: dict[str, str] = field(default_factory=dict)  # upstream path -> new text
    new: bool = True  # the files are new (else: edits of existing files)
    hooks: tuple[str, ...] = ()  # the plugin hooks it stands for (edits)


def edit_patches(t: Target) -> list[tuple[str, str, str, tuple[str, ...], list[Edit]]]:
    """(slug, subject, body, hooks, other edits) of each patch that edits SGLang, in order; every hook of the
    release's table but PLUGIN_ONLY's is in exactly one."""
    both = f"{DFLASH_CHAIN} and {DDTREE}"
    cell = f"{versions.POOL_CONFIGURATOR.rsplit('.', 1)[1]}'s"
    register = (
        f"SpeculativeAlgorithm gets {DFLASH_CHAIN} and {DDTREE} (is_dflash_chain()/is_ddtree()). Spec v1 is gone,\n"
        "so create_worker returns the spec-v2 DDTreeWorkerV2 for both, under either scheduler (the worker reads\n"
        "nothing back from the GPU in a step). They answer is_eagle() False (EAGLE's draft model, draft KV pool\n"
        "and MTP sizing hang on it) and has_draft_kv() False (the drafter's context K/V is counted per KV-cache\n"
        "token); their verify input for the captured TARGET_VERIFY graphs is a later patch. CustomSpecAlgo\n"
        "gets the two predicates too (False): a registered plugin must answer every enum predicate.\n"
        "handle_server_args resolves their arguments (_handle_ddtree: resolve_speculative_args, run on the\n"
        f"recorder that declares the fields it writes).\nSGLang's own {DFLASH} is unchanged.\n"
    )
    return [
        (
            f"speculative-register-{t.slug}",
            f"[Speculative] Register {both} as speculative algorithms",
            register,
            (),
            algorithm_edits(t),
        ),
        (
            f"scheduler-{t.prefix}-admission",
            f"[Speculative] Abort {DFLASH_CHAIN}/{DDTREE} requests the workers cannot serve yet, at admission",
            "Logprobs, grammar, min-p, penalties, logit_bias, custom logit processors, min_new_tokens, a\n"
            f"sampling seed, beam search and watermarking are not served losslessly by the {both} workers\n"
            "yet. Such a request now finishes at admission with an error naming the feature (as a prompt past the\n"
            "drafter's positions does, counting the overlap scheduler's extra step), instead of reaching the worker.",
            ("add_request_to_queue",),
            [],
        ),
        (
            "mamba-graph-replay-padding",
            "[Bugfix] Hybrid GDN graph replay: a length-1 request is not padding",
            "MambaAttnBackendBase._replay_metadata counts CUDA-graph padding as the rows whose seq_lens_cpu\n"
            "equals the fill value (1). A real request of length 1 (a one-token prompt at its first verify)\n"
            "is then taken for padding: the batch's last real request is verified from state slot -1 and\n"
            "emits garbage. Verify inputs that record their number of real requests (NUM_REQS_ATTR, set by\n"
            f"the {both} workers) now have only the rows after them counted; others are unchanged.",
            ("replay_metadata",),
            [],
        ),
        (
            "gdn-backend-tree-verify",
            f"[Speculative] GDN TARGET_VERIFY through tree kernels for {both}",
            f"The GDN layers of a {DFLASH_CHAIN}/{DDTREE} verify run the tree conv and tree Gated DeltaNet kernels\n"
            "(outputs for every node, pools untouched, no per-node state), and the worker commits the accepted\n"
            "path of every layer in one launch each, instead of the intermediate_ssm / intermediate_conv_window\n"
            "snapshots and update_mamba_state_after_mtp_verify, which the last patch allocates for one request\n"
            "slot only. SGLANG_DFLASH_TREE_GDN=0 keeps SGLang's own path.",
            ("gdn_forward_extend",),
            [],
        ),
        (
            "hybrid-backend-tree-attention",
            "[Speculative] Full-attention TARGET_VERIFY through the tree attention kernel",
            f"The full-attention layers of a hybrid model's {DFLASH_CHAIN}/{DDTREE} verify run the tree attention\n"
            "kernel where it was measured faster than the attention backend (Hopper, against flashinfer and\n"
            "triton; SGLANG_DFLASH_TREE_ATTENTION=1 / 0 forces it on / off): the prefix read from the KV pool\n"
            "through req_to_token, the draft nodes through the tree's ancestor mask, each request's prefix cut\n"
            "into splits by its own length. Layers with a logit cap, a sliding window or an fp8 KV cache keep the\n"
            "attention backend.",
            ("hybrid_forward_extend",),
            [],
        ),
        (
            f"memory-plan-{t.prefix}-drafter",
            f"[Speculative] {DFLASH_CHAIN}/{DDTREE} memory plan: the drafter's KV and weights, one slot of GDN states",
            f"The {DFLASH_CHAIN}/{DDTREE} worker keeps the drafter's context K/V at the target's KV slots (an entry\n"
            f"per KV-cache token), so its per-token bytes join {cell} cell size; the scheduler counts its weights\n"
            "(the worker's preloaded_weights_bytes). With the tree GDN verify the per-node GDN verify states\n"
            "are never read, so they are allocated and reserved for one request slot instead of\n"
            "max_running_requests (about 80 GB at Qwen3.6-27B, TP=2, 33 nodes, 32 requests).",
            ("req_to_token_pool_init", "plan_mamba_states", "compute_cell_size"),
            [],
        ),
        (
            f"cuda-graph-{t.prefix}-verify-input",
            f"[Speculative] {DFLASH_CHAIN}/{DDTREE} verify input for the captured TARGET_VERIFY graphs",
            "The decode graph runner and the shared capture path build a dummy verify input per algorithm.\n"
            f"{both} verify through EAGLE's TARGET_VERIFY path with a tree custom mask, so theirs is\n"
            "EagleVerifyInput with the graph's custom-mask buffer and their speculative steps / topk.",
            ("graph_spec_info", "dummy_verify_input"),
            [],
        ),
    ]


def series(t: Target, read) -> list[Patch]:
    """The patches of release t, in order. read(path) gives a pristine SGLang file's text ('python/sglang/...')."""
    table = t.table
    hooks = {h.hook: h for h in (*table.stock, *table.runtime)}
    groups = edit_patches(t)
    grouped = [h for _, _, _, names, _ in groups for h in names]
    missing, unknown = sorted(set(hooks) - set(grouped) - set(PLUGIN_ONLY)), sorted(set(grouped) - set(hooks))
    if missing or unknown or len(grouped) != len(set(grouped)):
        raise UnsupportedSource(
            f"edit_patches must name each hook of SGLang {t.release}'s table once: {missing} have no patch, "
            f"{unknown} are not in the table"
        )
    core, facing = core_files(t), facing_files(t)
    both = f"{DFLASH_CHAIN} and {DDTREE}"
    out = [
        Patch(
            f"speculative-add-{t.slug}-core",
            f"[Speculative] Add the {both} core: draft trees, acceptance and tree kernels",
            f"Add {t.core}, framework-independent (torch and Triton only):\n"
            "- ddtree.py: DDTree draft trees (exact top-B prefixes of the drafter's per-depth marginals,\n"
            "  built on the GPU without a host round-trip), greedy and lossless sampling acceptance;\n"
            "- dflash.py: a DFlash chain as the degenerate tree, so chain and tree share verify and commit;\n"
            "- kernels/: Triton tree build/walk, vocabulary top-k/argmax, tree Gated DeltaNet verify/commit,\n"
            "  tree causal conv and tree attention, each beside the torch reference it is tested against;\n"
            "- models/: the z-lab DFlash config parsing and target/drafter pair checks, and plain-torch\n"
            "  reference models (drafter, Qwen3.5 hybrid target);\n"
            "- env.py: the SGLANG_DFLASH_* switches.\n"
            "Nothing in SGLang uses it yet.",
            core,
        )
    ]
    out.append(
        Patch(
            f"speculative-add-{t.slug}-workers",
            f"[Speculative] Add {both} workers, hidden capture and server-argument resolution",
            f"- {t.prefix}_worker_v2.py: DDTreeWorkerV2, {DDTREE} and {DFLASH_CHAIN} on the spec-v2 schema: the phases\n"
            "  (drafter, tree, accept, GDN commit, drafter context), SGLang's v2 bookkeeping (the scheduler maps the\n"
            "  KV slots and appends the returned tokens);\n"
            f"- {t.prefix}_worker_common.py: the worker's schema-independent part: the drafter, its context and graphs,\n"
            "  the draft (chain or tree), the verify input and the per-request checks of a step;\n"
            f"- {t.prefix}_hidden_capture.py: the target's hidden states at the drafter's tapped layers, in a\n"
            "  static buffer the target's CUDA graphs write;\n"
            f"- {t.prefix}_verify_io.py: a draft tree and its acceptance as EagleVerifyInput tensors;\n"
            f"- {t.prefix}_vocab_parallel.py: top-k / argmax over a vocabulary-parallel LM head, equal on all ranks;\n"
            f"- {t.prefix}_tree_gdn.py: the tree verify of the GDN and full-attention layers, and its commit;\n"
            f"- {t.prefix}_memory_plan.py: the drafter's weights and per-token K/V in SGLang's memory plan;\n"
            f"- {t.prefix}_graph_memory.py: the verify graphs' memory, estimated before capture (a start-up warning);\n"
            f"- {t.prefix}_step_profile.py: per-phase step times when SGLANG_DFLASH_PROFILE names a file;\n"
            f"- {t.prefix}_server_args.py: defaults for {both} and refusals before serving starts\n"
            "  (drafter/target mismatch, DP attention, PP, page size for DDTREE, ...);\n"
            f"- {t.prefix}_names.py: the algorithms' names.\n"
            "Not wired in yet.",
            facing,
        )
    )
    for slug, subject, body, names, edits in groups:
        edits = edits + [e for n in names for e in hook_edits(t, hooks[n])]
        out.append(Patch(slug, subject, body, apply_edits(read, edits), new=False, hooks=names))
    out.append(
        Patch(
            f"test-{t.slug}-unit",
            f"[Test] {both} unit tests on CPU: trees, GDN and conv references, verify tensors",
            f"test/registered/unit/spec/{t.prefix}/, in SGLang's CPU CI ({CPU_SUITE.split('(')[1].rstrip(')')}):\n"
            "- test_ddtree_trees.py: the GPU-free tree build against brute force over every prefix set (and a\n"
            "  best-first heap), greedy acceptance against a brute-force walk, the chain's cumulative-product rule;\n"
            "- test_ddtree_kernel_refs.py: along each node's root path, the tree GDN reference against transformers'\n"
            "  own Qwen3.5 recurrence and the tree conv reference against torch's depthwise conv1d;\n"
            "- test_ddtree_verify_io.py: a tree and its acceptance as EagleVerifyInput tensors, and the KV window's\n"
            "  commit, on hand-worked and random trees.\n"
            "The Triton kernels are tested against those references where a GPU (or TRITON_INTERPRET=1) runs them.",
            test_files(t),
        )
    )
    return out


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
    if not path.startswith("python/sglang/"):  # the tests' tree: not in a wheel, so new as far as it can tell
        return False
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
        raise SystemExit("sglang is not installed; pass --sglang-src (a checkout or an unpacked wheel)")
    return Path(list(spec.submodule_search_locations)[0])


def make_upstream_tree(dest: Path) -> Path:
    """Copy the installed sglang package to dest/python/sglang (the repository's layout); returns dest."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(installed_sglang(), dest / "python" / "sglang", ignore=ignore)
    return dest


def source_package(src: Path | None, release: str) -> Path:
    """The sglang package to read: src/python/sglang (a checkout), src/sglang (an unpacked wheel) or, without src,
    the installed one, which must be `release`."""
    if src is None:
        found = installed_version()
        if found != release:
            raise SystemExit(f"the installed sglang is {found}, not {release}; pass --sglang-src with {release}'s source")
        return installed_sglang()
    for package in (src / "python" / "sglang", src / "sglang"):
        if (package / "srt").is_dir():
            stamp = package / "_version.py"  # a wheel has it; a checkout has it once built
            found = re.search(r"__version__ = version = '([^']+)'", stamp.read_text()) if stamp.is_file() else None
            if found and found.group(1) != release:
                raise SystemExit(f"{package} is SGLang {found.group(1)}, not {release}")
            return package
    raise SystemExit(f"{src} has neither python/sglang/srt (a checkout) nor sglang/srt (an unpacked wheel)")


def reader(package: Path):
    """read(path) for upstream paths 'python/sglang/...' from an sglang package directory."""

    def read(path: str) -> str:
        return (package / Path(path).relative_to("python/sglang")).read_text()

    return read


def readme(t: Target, names: list[str], patches: list[Patch]) -> str:
    """patches/<release>/README.md: the series, how to apply it, what of the plugin maps where."""
    table = "\n".join(f"{i}. `{n}`: {p.subject}" for i, (n, p) in enumerate(zip(names, patches), 1))
    hooks = {h.hook: h for h in (*t.table.stock, *t.table.runtime)}
    edits = "\n".join(
        f"  - `{h}` -> `{hooks[h].module}.{'.'.join(hooks[h].path)}`: {n[:4]}" for n, p in zip(names, patches) for h in p.hooks
    )
    plugin_only = "".join(f"  - `{h}`: {why}\n" for h, why in PLUGIN_ONLY.items())
    ported = ", ".join(f"`{src}`" for src in PORTED_TESTS)
    renamed = ", ".join(f"`{m.rsplit('.', 1)[1]}` -> `{t.prefix}_{n}`" for m, n in FACING.items() if m.rsplit(".", 1)[1] != n)
    return f"""\
# patches/{t.release}/: sglang-dflash as an SGLang {t.release} patch series

{len(patches)} patches against **SGLang {t.release}** (the `python/` tree of the `v{t.release}` tag, or the release's
wheel in that layout), written the way an upstream PR would add them, generated from the plugin's code by
`patches/generate.py --release {t.release}` and checked by `tests/test_patches.py`.

{textwrap.fill(t.why, 120)}

## The series

{table}

## Apply

    cd sglang                                   # a checkout of v{t.release}
    for p in $(cat /path/to/patches/{t.release}/series); do git apply /path/to/patches/{t.release}/$p; done
    # or patch -p1 < each in that order, or git am

`--speculative-algorithm {DDTREE}` / `{DFLASH_CHAIN}` is then a built-in choice.

## What maps where

- `sglang_dflash/{{ddtree,dflash,cuda_graph,env}}.py`, `kernels/`, `models/` ->
  `python/sglang/srt/speculative/{t.prefix}/` (copied file by file; their relative imports unchanged)
- `sglang_dflash/sglang/<module>.py` -> `python/sglang/srt/speculative/{t.prefix}_<module>.py` ({renamed}),
  relative imports made absolute;
  `algorithm.is_ours` joins `{t.prefix}_names.py`
- `algorithm.registered_spec_class` (what the plugin registers through `SpeculativeAlgorithm.register`) ->
  `SpeculativeAlgorithm.{DFLASH_CHAIN}` / `{DDTREE}`, `is_dflash_chain()` / `is_ddtree()`, `has_draft_kv()`,
  `handle_server_args` (`arg_groups/speculative_hook._handle_ddtree`), `create_worker` (`DDTreeWorkerV2`)
- each hook of `plugin/patches.py` that `plugin/versions.py` applies on {t.release} -> an edit of the function it goes
  around, in the patch numbered after it:
{edits}
  (`req_to_token_pool_init` edits its caller, `KVCacheConfigurator._build_hybrid_req_pool`, which knows the
  algorithm; `dummy_verify_input` edits `spec_info.create_dummy_verify_input`, which `base_runner` imports by name:
  the plugin patches that name)
- {ported} -> `test/registered/unit/spec/{t.prefix}/` (imports pointed at the ported modules, registered for
  SGLang's CPU CI; `tests/test_patches.py` runs them on the patched tree)

## Left out (plugin-only)

- `sglang_dflash/sglang/plugin/`: upstream needs no plugin.
{plugin_only}  - `profile_decode` (SGLANG_DFLASH_PROFILE's timing of stock decode steps): a benchmark aid.
- `sglang_dflash/sglang/ddtree_worker_v2_0511.py`: the worker on SGLang 0.5.11's schema, a release with no series.
- `engine/`, `generate.py`, `init_draft.py`, `demo.py`, `launch.py`: the standalone engine and CLIs.

Module docstrings are the plugin's, verbatim: they name plugin files and hooks in places.
"""


def write(out: Path, release: str, src: Path | None = None) -> list[str]:
    t = TARGETS.get(release)
    if t is None:
        raise SystemExit(f"no series for SGLang {release} (have {', '.join(TARGETS)})")
    read = reader(source_package(src, release))
    patches = series(t, read)
    names = [f"{i:04d}-{p.slug}.patch" for i, p in enumerate(patches, 1)]
    texts = [format_patch(p, i, len(patches), read) for i, p in enumerate(patches, 1)]
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("[0-9][0-9][0-9][0-9]-*.patch"):
        old.unlink()
    for name, text in zip(names, texts):
        (out / name).write_text(text)
    (out / "series").write_text("".join(n + "\n" for n in names))
    (out / "README.md").write_text(readme(t, names, patches))
    return names


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))  # fmt: skip
    ap.add_argument("--release", choices=list(TARGETS), default=None, help="default: the installed sglang's")
    ap.add_argument("--sglang-src", type=Path, default=None,
                    help="the release's source: a checkout (python/sglang/srt) or an unpacked wheel (sglang/srt); "
                         "default: the installed sglang package")  # fmt: skip
    ap.add_argument("--out", type=Path, default=None, help="where to write the series (default: patches/<release>)")
    args = ap.parse_args(argv)
    release = args.release or installed_version()
    if release not in TARGETS:
        ap.error(f"--release is needed: the installed sglang is {release}, not one of {', '.join(TARGETS)}")
    out = args.out or HERE / release
    try:
        names = write(out, release, args.sglang_src)
    except UnsupportedSource as e:
        sys.exit(f"generate.py: {e}")
    print("\n".join(str(out / n) for n in names))


if __name__ == "__main__":
    main()
