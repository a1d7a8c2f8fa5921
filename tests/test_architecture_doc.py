"""docs/architecture.md names a folder for each of the compiler's 13 concepts, and every path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"


def _section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def _paths(text: str) -> list[str]:
    """The backticked names that are paths: a slash and no space (a folder, a file or a glob)."""
    return sorted({t for t in re.findall(r"`([^`\s]+)`", text) if "/" in t and not t.startswith("p4gen.")})


def _exists(path: str) -> bool:
    # paths inside the package are also named from p4gen/ (``emit/p4ops.py``, ``switch/kernels.py``); a
    # placeholder (``p4gen/target/<name>.toml``) stands for any name
    pattern = re.sub(r"<[^>]+>", "*", path.rstrip("/"))
    return any(any(base.glob(pattern)) for base in (ROOT, ROOT / "p4gen"))


def test_every_path_the_architecture_page_names_exists():
    paths = _paths(DOC.read_text())
    assert len(paths) > 40
    missing = [p for p in paths if not _exists(p)]
    assert missing == []


def test_each_of_the_13_concepts_has_its_folder():
    rows = [line for line in _section("Where each concept lives").splitlines()
            if line.startswith("| ") and not line.startswith(("| concept", "| pass"))]
    concepts = rows[:rows.index(next(r for r in rows if r.startswith("| `choose_variant`")))]
    assert len(concepts) == 13
    for row in concepts:
        folder = row.split("|")[2].strip().strip("`")
        assert (ROOT / folder).exists(), row
    # the planner's passes: each one's module, in the order PASSES lists them
    from p4gen import planner

    passes = [r.split("|")[1].strip().strip("`") for r in rows[len(concepts):]]
    assert passes == [p.__name__ for p in planner.PASSES]
    assert len(rows) == len(concepts) + len(passes)


def test_the_passes_after_the_first_read_the_variant_from_the_fit():
    import inspect

    from p4gen import planner

    for p in planner.PASSES[1:]:
        assert "protocols." not in inspect.getsource(p), p.__name__
    assert "protocols." in inspect.getsource(planner.PASSES[0])


def test_of_the_planners_modules_only_the_first_pass_imports_the_registry():
    import ast

    readers = []
    for path in sorted((ROOT / "p4gen" / "planner").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (
                    node.module == "protocols" or any(a.name == "protocols" for a in node.names)):
                readers.append(path.name)
    assert readers == ["variant.py"]
