"""Where the Jinja templates live, and their text (part of the build-cache key).

Kept apart from the renderer so that a warm-cache build reads the templates
without importing it (or Jinja).
"""

from __future__ import annotations

from pathlib import Path


def templates_dir() -> Path:
    """Where ``p4gen.templates`` lives (pyproject maps it to the repository's templates/)."""
    from .. import templates

    return Path(templates.__file__).resolve().parent


def template_sources() -> dict[str, str]:
    """Name -> text of every template (part of the build-cache key)."""
    root = templates_dir()
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(root.iterdir(), key=lambda p: p.name)
            if p.name.endswith(".j2")}
