"""The import graph of the installed package: no cycle (imports inside functions count), and the rooms
import one way: the compiler (``p4gen/``) never imports the controller, the switch runtime and the host
side never import each other, and ``controller/`` reaches the rest of p4gen by absolute imports only.

The graph is read from the source with :mod:`ast` (every ``import`` statement anywhere in a module), so
a lazy import inside a function is an edge like any other.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the installed package's folders (pyproject's package-dir)
FOLDERS = {"p4gen": "p4gen", "p4gen.verify": "verify", "p4gen.controller": "controller",
           "p4gen.testbed": "testbed", "p4gen.templates": "templates"}


def modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([pkg] + parts)
            if pkg == "p4gen" and parts and f"p4gen.{parts[0]}" in FOLDERS:
                continue
            out[name] = path
    return out


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for every test here."""
    return ast.parse(path.read_text(), str(path))


def _targets(mod: str, path: Path, node: ast.AST, mods: dict[str, Path]) -> list[str]:
    """The modules an import statement names (the most specific one that exists)."""
    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    if isinstance(node, ast.ImportFrom):
        base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else [])) \
            if node.level else node.module or ""
        names = [f"{base}.{a.name}" for a in node.names]
    else:
        names = [a.name for a in node.names]
    out = []
    for name in names:
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            cand = ".".join(parts[:i])
            if cand in mods:
                out.append(cand)
                break
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    edges: dict[str, set[str]] = {}
    for mod, path in mods.items():
        found = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update(t for t in _targets(mod, path, node, mods) if t != mod)
        edges[mod] = found
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _in(mod: str, *pkgs: str) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in pkgs)


def test_the_compiler_never_imports_the_controller():
    edges = graph()
    outside = ("p4gen.controller", "p4gen.verify", "p4gen.testbed", "p4gen.templates")
    bad = sorted((m, t) for m, ts in edges.items() if not _in(m, *outside)
                 for t in ts if _in(t, "p4gen.controller"))
    assert bad == []


def test_switch_and_host_never_import_each_other():
    edges = graph()
    bad = sorted((m, t) for m, ts in edges.items() for t in ts
                 if (_in(m, "p4gen.switch") and _in(t, "p4gen.host")) or (_in(m, "p4gen.host") and _in(t, "p4gen.switch")))
    assert bad == []


def test_the_controller_imports_the_rest_of_p4gen_absolutely():
    relative_up = []
    for path in sorted((ROOT / "controller").glob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.level > 1:
                relative_up.append(f"{path.name}:{node.lineno}")
    assert relative_up == []


def test_no_module_imports_a_private_name_of_another():
    borrowed = []
    mods = modules()
    for mod, path in mods.items():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                borrowed += [f"{mod}: {a.name} from {node.module or '.'}" for a in node.names
                             if a.name.startswith("_") and not a.name.startswith("__")]
    assert borrowed == []


def test_no_module_reaches_into_a_private_name_of_another():
    # ``from m import _x`` above; here ``m._x``, on a module or class of the package a module imported
    reached = []
    for mod, path in modules().items():
        tree = _tree(path)
        ours = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("p4gen")):
                ours.update(a.asname or a.name for a in node.names)
            elif isinstance(node, ast.Import):
                ours.update(a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("p4gen"))
        reached += [f"{mod}:{n.lineno}: {n.value.id}.{n.attr}" for n in ast.walk(tree)
                    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ours
                    and n.attr.startswith("_") and not n.attr.startswith("__")]
    assert reached == []
