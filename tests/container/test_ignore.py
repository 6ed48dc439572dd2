"""Ignore rules: Docker's `.dockerignore` dialect, gcloud's gitignore dialect, and the always-excluded set."""

from __future__ import annotations

import pytest

from vertexdist.container.ignore import (
    DockerIgnore,
    GitIgnore,
    always_excluded_dir,
    always_excluded_file,
    parse_dockerignore,
    parse_gitignore,
)


def docker(text: str) -> DockerIgnore:
    return DockerIgnore(parse_dockerignore(text))


def gcloud(text: str, includes: dict[str, str] | None = None) -> GitIgnore:
    return GitIgnore(parse_gitignore(text, read_include=(includes or {}).get))


@pytest.mark.parametrize(
    ("patterns", "path", "excluded"),
    [
        ("*.pyc", "a.pyc", True),
        ("*.pyc", "pkg/a.pyc", False),  # Docker: a pattern without ** matches at the root only
        ("**/*.pyc", "pkg/deep/a.pyc", True),
        ("**/*.pyc", "a.pyc", True),  # **/ also matches zero folders
        ("data", "data/x/y.bin", True),  # a folder pattern excludes what is under it
        ("/data/", "data/y.bin", True),  # leading and trailing slashes are cleaned away
        ("./data", "data/y.bin", True),
        ("data/*.csv", "data/a.csv", True),
        ("data/*.csv", "data/sub/a.csv", False),  # * stays inside one path part
        ("docs/**", "docs/a/b.md", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("file[0-9].txt", "file7.txt", True),
        ("file[!0-9].txt", "file7.txt", False),
        ("*.md\n!README.md", "README.md", False),
        ("*.md\n!README.md", "CHANGES.md", True),
        ("!README.md\n*.md", "README.md", True),  # the last matching line wins
        ("data\n!data/keep.txt", "data/keep.txt", False),  # re-included under an excluded folder
        ("# *.py\n", "x.py", False),  # a comment
        ("  *.log  ", "x.log", True),  # surrounding spaces are trimmed
        ("\\#notes", "#notes", True),
    ],
)
def test_dockerignore_follows_docker(patterns: str, path: str, excluded: bool) -> None:
    assert docker(patterns).excluded(path) is excluded


def test_dockerignore_prunes_a_folder_only_when_no_exception_can_reach_inside() -> None:
    rules = docker("data\n!data/keep/*.txt\nlogs\n")
    assert rules.may_reinclude_under("data")
    assert rules.may_reinclude_under("data/keep")
    assert not rules.may_reinclude_under("data/other")
    assert not rules.may_reinclude_under("logs")
    assert docker("x\n!**/keep.txt").may_reinclude_under("x/y/z")


@pytest.mark.parametrize(
    ("patterns", "path", "is_dir", "ignored"),
    [
        ("*.pyc", "pkg/deep/a.pyc", False, True),  # gitignore: no slash means any depth
        ("/top.txt", "top.txt", False, True),
        ("/top.txt", "sub/top.txt", False, False),  # a leading slash anchors to the root
        ("logs/", "logs", True, True),
        ("logs/", "logs", False, False),  # a trailing slash matches folders only
        ("a/b", "a/b", False, True),
        ("a/b", "x/a/b", False, False),  # a slash inside anchors too
        ("**/cache", "x/y/cache", True, True),
        ("a/**/b", "a/b", False, True),
        ("a/**/b", "a/x/y/b", False, True),
        ("out/**", "out/x/y", False, True),
        ("*.log\n!keep.log", "keep.log", False, False),
        ("\\!important", "!important", False, True),
        ("trailing   ", "trailing", False, True),
    ],
)
def test_gcloudignore_follows_gitignore(patterns: str, path: str, is_dir: bool, ignored: bool) -> None:
    assert gcloud(patterns).ignored(path, is_dir=is_dir) is ignored


def test_gcloudignore_cannot_reinclude_under_an_ignored_folder() -> None:
    rules = gcloud("build/\n!build/keep.txt\n")
    assert rules.ignored_path("build/keep.txt")
    assert not rules.ignored_path("src/keep.txt")


def test_gcloudignore_include_directive_reads_the_other_file() -> None:
    rules = gcloud("#!include:.gitignore\n*.tmp\n", {".gitignore": "secrets/\n"})
    assert rules.ignored_path("secrets/a.txt")
    assert rules.ignored_path("x.tmp")
    assert not rules.ignored_path("src/a.py")
    assert not gcloud("#!include:.missing\n").ignored_path("a")


@pytest.mark.parametrize(
    "name", [".git", ".venv", "venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".vertexdist"]
)
def test_always_excluded_folders(name: str) -> None:
    assert always_excluded_dir(name)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        (".env", "secret"),
        (".env.production", "secret"),
        ("prod.env", "secret"),
        ("sa-key.json", "secret"),
        ("credentials.json", "secret"),
        ("credentials-prod.json", "secret"),
        ("application_default_credentials.json", "secret"),
        ("a.pyc", "cache"),
        ("model.py", None),
        ("environment.yaml", None),
        ("keys.json", None),
    ],
)
def test_always_excluded_files(name: str, why: str | None) -> None:
    assert always_excluded_file(name) == why
    assert not always_excluded_dir("src")
