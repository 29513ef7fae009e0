"""The package's import graph: no circle (imports inside functions count too), and the plugin part stays on top.

- Nothing outside `sglang_dflash/sglang/plugin/` imports it but the launcher: the SGLang-facing modules never patch,
  so they never need the plugin.
- Only `sglang_dflash/sglang/` imports sglang; nothing outside `plugin/` changes SGLang's classes (no HookRegistry,
  no setattr on an SGLang object; checked by reading the source).
- The leaves `env` and `sglang.names` import nothing of the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

from paths import ROOT

PKG = ROOT / "sglang_dflash"


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p) for p in PKG.rglob("*.py")}


def imports(path: Path) -> set[str]:
    """Package modules `path` imports anywhere in its body (from x import y counts y where y is a module)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("sglang_dflash")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("sglang_dflash"):  # `from package import module` imports the module
                found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names}
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PKG.rglob("*.py")}
    return {m: {i for i in imports(p) if i in files and i != m} for m, p in files.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_circle():
    assert find_cycle(graph()) is None, " -> ".join(find_cycle(graph()))


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_only_the_plugin_and_the_launcher_import_the_plugin():
    """The SGLang-facing modules and the core never import the plugin (they patch nothing); `launch` (the stock
    launch_server behind the plugin's own checks) sits above it."""
    plugin = "sglang_dflash.sglang.plugin"
    users = {m for m, deps in graph().items() if not m.startswith(plugin) and any(i.startswith(plugin) for i in deps)}
    assert users <= {"sglang_dflash.launch"}, users


def test_leaves_import_nothing_of_the_package():
    g = graph()
    assert g["sglang_dflash.env"] == set() and g["sglang_dflash.sglang.names"] == set()


def test_only_the_plugin_changes_sglang():
    for path in PKG.rglob("*.py"):
        if "plugin" in path.relative_to(PKG).parts:
            continue
        text = path.read_text()
        assert "HookRegistry" not in text and "_sglang_dflash_patched" not in text, path
        tree = ast.parse(text)
        sglang_names = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                        for a in n.names if (getattr(n, "module", None) or a.name).startswith("sglang.")}  # fmt: skip
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in sglang_names:
                        raise AssertionError(f"{path}:{node.lineno} assigns to {t.value.id}.{t.attr}")


def test_only_sglang_dflash_sglang_imports_sglang():
    for path in PKG.rglob("*.py"):
        if path.relative_to(PKG).parts[0] == "sglang":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] == "sglang" for a in node.names), path
            elif isinstance(node, ast.ImportFrom) and not node.level:
                assert (node.module or "").split(".")[0] != "sglang", path
