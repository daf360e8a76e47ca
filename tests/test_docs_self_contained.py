"""docs/, the README and the messages users see never point at files outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Files of the project's design folder that a user of the package does not have.
OUTSIDE = re.compile(r"\bspec/[\w-]+\.md|\bDESIGN\.md|\bFORMATS\.md|\bshared/|fixtures/karenina|\.\./")


def test_docs_and_readme_stand_alone():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    found = [f"{page.name}:{n}: {line.strip()}" for page in pages
             for n, line in enumerate(page.read_text().splitlines(), 1) if OUTSIDE.search(line)]
    assert not found, "\n".join(found)


def test_messages_in_the_code_stand_alone():
    """String literals (messages, help texts) name no outside file; comments and docstrings may."""
    found = []
    for folder in ("ledger", "stages", "projections", "cli", "src"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if code.strip().startswith(('"""', 'r"""')):
                    continue  # a docstring: for developers reading the code
                for literal in re.findall(r"f?\"([^\"]*)\"|f?'([^']*)'", code):
                    text = "".join(literal)
                    if OUTSIDE.search(text):
                        found.append(f"{path.relative_to(REPO)}:{n}: {text}")
    assert not found, "\n".join(found)
