"""Documents travel with the code (docs/architecture.md, "Documentation").

Every document a docstring or comment names is in the repository; nothing points outside it at the notes the
project was started from; the README stays a landing page; the template pages list every template field.
The site itself is checked by `mkdocs build --strict` in `make test` (links, anchors, nav).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from vertexdist.spec.model_upload import ModelUploadSpec
from vertexdist.spec.models import BuildSpec, JobTemplate, TrainerSpec
from vertexdist.spec.recovery import RecoverySpec
from vertexdist.spec.tuning import ParameterSpec, TuningSpec

REPO = Path(__file__).resolve().parents[1]
CODE_ROOTS = ("vertexdist", "trainer_pkg", "tests", "bench", "examples")
# Files outside the code roots whose `#` comments may cite documents.
COMMENTED_FILES = (
    "Dockerfile",
    "Makefile",
    "cloudbuild.yaml",
    ".dockerignore",
    "pyproject.toml",
    "mkdocs.yml",
)
URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
DOCUMENT = re.compile(r"(?<![\w.-])(?:[\w.-]+/)*[\w.-]+\.md\b")
# Spelled in two pieces so that this file does not name what it forbids.
OUTSIDE = ("../" + "shared/", "shared/" + "reference")
README_MAX_LINES = 400


def named_documents(text: str) -> set[str]:
    """The `.md` paths a piece of prose names, URLs left out (they point outside on purpose)."""
    return set(DOCUMENT.findall(URL.sub(" ", text)))


def _python_prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python file."""
    source = path.read_text()
    if ".md" not in source:
        return
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                yield node.body[0].lineno, docstring


def _hash_comments(path: Path) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if "#" in line:
            yield number, line[line.index("#") :]


def _prose_of_the_repository() -> Iterator[tuple[str, int, str]]:
    for root in CODE_ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            for number, text in _python_prose(path):
                yield path.relative_to(REPO).as_posix(), number, text
    yaml_files = [
        *sorted((REPO / "job_templates").glob("*.yaml")),
        *sorted((REPO / "examples").rglob("*.yaml")),
    ]
    for path in [*(REPO / name for name in COMMENTED_FILES), *yaml_files]:
        if path.is_file():
            for number, text in _hash_comments(path):
                yield path.relative_to(REPO).as_posix(), number, text


def test_the_scanner_finds_document_names_and_skips_urls() -> None:
    text = (
        "see design.md, reference/vertex.md §2 and docs/reference/vertex.md §1.1; not"
        " https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md"
    )
    assert named_documents(text) == {"design.md", "reference/vertex.md", "docs/reference/vertex.md"}


def test_every_document_a_docstring_or_comment_names_is_in_the_repository() -> None:
    missing = [
        f"{rel}:{number}: names {name}, which is not in the repository"
        " (cite a page of docs/, e.g. docs/reference/vertex.md §2.2)"
        for rel, number, text in _prose_of_the_repository()
        for name in sorted(named_documents(text))
        if not (REPO / name).is_file()
    ]
    assert not missing, "\n".join(missing)


def _tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=False)
    if listed.returncode == 0 and listed.stdout.strip():
        return [REPO / line for line in listed.stdout.splitlines()]
    skip = {
        ".git",
        ".venv",
        "site",
        ".vertexdist",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
    }
    return [p for p in REPO.rglob("*") if p.is_file() and not skip & set(p.relative_to(REPO).parts)]


def test_no_file_points_outside_the_repository_at_the_reference_notes() -> None:
    pointing = []
    for path in _tracked_files():
        if not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if any(needle in line for needle in OUTSIDE):
                pointing.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:100]}")
    assert not pointing, "facts go into docs/reference/ in our words, with their sources:\n" + "\n".join(
        pointing
    )


def test_the_readme_is_a_landing_page() -> None:
    readme = (REPO / "README.md").read_text()
    lines = readme.count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines: the guide goes into docs/, the README links to it"
    )
    assert "make demo" in readme and "make test" in readme


def test_the_readmes_links_lead_to_files_of_the_repository() -> None:
    readme = (REPO / "README.md").read_text()
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)]+)\)", readme) if "://" not in t]
    assert targets, "the README links into the docs"
    assert not [t for t in targets if not (REPO / t).exists()]
    assert "docs/getting-started.md" in targets


def _field_names(model: type) -> set[str]:
    return {info.alias or name for name, info in model.model_fields.items()}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("model", "page"),
    [
        (JobTemplate, "templates.md"),
        (TrainerSpec, "templates.md"),
        (BuildSpec, "templates.md"),
        (RecoverySpec, "templates.md"),
        (ModelUploadSpec, "templates.md"),
    ],
)
def test_the_template_page_has_a_row_for_every_field(model: type, page: str) -> None:
    text = (REPO / "docs" / page).read_text()
    rows = set(re.findall(r"^\| `([\w-]+)` \|", text, flags=re.M))
    missing = sorted(_field_names(model) - rows)
    assert not missing, (
        f"docs/{page} has no row for {missing}: add one to its table of {model.__name__}'s fields"
    )


@pytest.mark.parametrize("model", [TuningSpec, ParameterSpec])
def test_the_tuning_fields_are_named_in_the_docs(model: type) -> None:
    text = (REPO / "docs" / "templates.md").read_text() + (REPO / "docs" / "tuning.md").read_text()
    missing = sorted(
        name for name in _field_names(model) if f"`{name}`" not in text and f"{name}:" not in text
    )
    assert not missing, f"docs/templates.md and docs/tuning.md do not name {missing}"
