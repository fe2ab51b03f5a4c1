"""The README is a user's document: short, its first screen says what to run, what you get and what it costs,
and every relative link it (and the docs it sends readers to) holds resolves, anchors included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

LINKED_DOCS = (
    "README.md",
    "docs/measurements.md",
    "docs/troubleshooting.md",
    "docs/related-systems.md",
    "docs/layout.md",
    "docs/interfaces.md",
    "profiles/slurm/README.md",
)


def test_the_readme_is_short_and_its_first_screen_answers_what_to_run_get_and_pay() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move reference material to docs/"
    first = "\n".join(lines[:40])
    assert "make demo" in first and "make test" in first, "the two commands"
    assert "**What you get.**" in first and "results/demo/report/index.html" in first
    assert "**What it costs.**" in first and "GPU-hours" in first


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {_anchor(m) for m in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("doc", LINKED_DOCS)
def test_every_relative_link_resolves_to_a_file_and_its_heading(doc: str) -> None:
    path = REPO / doc
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{doc}: " + "; ".join(broken)
