"""The build context: exclusions, size limit, and the same bytes and hash whatever the file times."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from vertexdist.container.context import (
    ContextError,
    collect_context,
    content_hash,
    image_tag,
    parse_size,
    write_context_tar,
)
from vertexdist.errors import VertexdistError

Tree = Callable[[Mapping[str, str | bytes]], Path]

BASIC = {
    "Dockerfile": "FROM scratch\nCOPY app/ /app/\n",
    "app/__init__.py": "",
    "app/task.py": "print('hi')\n",
    "app/data/table.csv": "a,b\n1,2\n",
    "README.md": "# app\n",
}


def tar_bytes(root: Path, build_args: Mapping[str, str] | None = None) -> tuple[bytes, str]:
    context = collect_context(root, root / "Dockerfile")
    out = io.BytesIO()
    digest = write_context_tar(context, out, build_args)
    return out.getvalue(), digest


def test_same_files_give_the_same_bytes_and_hash_whatever_the_times_and_modes(tree: Tree) -> None:
    root = tree(BASIC)
    first, first_hash = tar_bytes(root)
    for i, path in enumerate(sorted(root.rglob("*"))):
        os.utime(path, (1_000_000 + i * 7919, 2_000_000_000 - i * 104729))
        if path.is_file():
            path.chmod(0o600 if i % 2 else 0o664)  # another umask; no executable bit either way
    second, second_hash = tar_bytes(root)
    assert first == second
    assert first_hash == second_hash == content_hash(collect_context(root, root / "Dockerfile"))


def test_same_files_in_another_folder_give_the_same_hash(
    tree: Tree, tmp_path: Path, write_files: Callable[[Path, Mapping[str, str | bytes]], Path]
) -> None:
    a = tree(BASIC)
    b = write_files(tmp_path / "elsewhere", {k: BASIC[k] for k in reversed(list(BASIC))})
    assert tar_bytes(a) == tar_bytes(b)


def test_tar_entries_are_normalised(tree: Tree) -> None:
    root = tree({**BASIC, "run.sh": "#!/bin/sh\necho hi\n"})
    (root / "run.sh").chmod(0o700)
    data, _ = tar_bytes(root)
    assert data[4:8] == b"\x00\x00\x00\x00"  # gzip header mtime 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}
    modes = {m.name: m.mode for m in members}
    assert modes["run.sh"] == 0o755
    assert modes["app/task.py"] == 0o644


@pytest.mark.parametrize(
    "change",
    [
        lambda root: (root / "app/task.py").write_text("print('changed')\n"),
        lambda root: (root / "app/new.py").write_text(""),
        lambda root: (root / "app/task.py").rename(root / "app/main.py"),
        lambda root: (root / "app/task.py").chmod(0o755),
    ],
    ids=["content", "new file", "rename", "executable bit"],
)
def test_any_real_change_changes_the_hash(tree: Tree, change: Callable[[Path], object]) -> None:
    root = tree(BASIC)
    before = tar_bytes(root)[1]
    change(root)
    assert tar_bytes(root)[1] != before


def test_build_args_and_dockerfile_path_are_part_of_the_hash(tree: Tree) -> None:
    root = tree({**BASIC, "docker/Dockerfile": "FROM scratch\n"})
    plain = collect_context(root, root / "Dockerfile")
    assert content_hash(plain) != content_hash(plain, {"BASE_IMAGE": "x"})
    assert content_hash(plain, {"A": "1", "B": "2"}) == content_hash(plain, {"B": "2", "A": "1"})
    other = collect_context(root, root / "docker/Dockerfile")
    assert content_hash(plain) != content_hash(other)


def test_image_tag_is_a_valid_docker_tag() -> None:
    tag = image_tag(hashlib.sha256(b"x").hexdigest())
    assert tag.startswith("ctx-") and len(tag) == 24 and tag[4:].isalnum()


def test_secrets_virtualenvs_git_and_caches_are_never_included(tree: Tree) -> None:
    root = tree(
        {
            **BASIC,
            ".git/config": "[core]\n",
            ".venv/bin/python": "",
            "venv/lib/x.py": "",
            "envs/py311/pyvenv.cfg": "home = /usr/bin\n",
            "envs/py311/lib/site.py": "",
            ".env": "TOKEN=secret\n",
            "config/.env.production": "TOKEN=secret\n",
            "keys/sa-key.json": "{}",
            "credentials.json": "{}",
            "app/__pycache__/task.cpython-311.pyc": b"\x00",
            "app/stale.pyc": b"\x00",
            ".pytest_cache/v/cache": "",
            ".vertexdist/runs/x.log": "",
            # An exception in .dockerignore cannot bring a secret or a virtualenv back.
            ".dockerignore": "!.env\n!credentials.json\n!.venv\n",
        }
    )
    paths = set(collect_context(root, root / "Dockerfile").paths())
    assert paths == {".dockerignore", "Dockerfile", "README.md", *(k for k in BASIC if k.startswith("app/"))}


def test_dockerignore_and_gcloudignore_are_honoured(tree: Tree) -> None:
    root = tree(
        {
            **BASIC,
            "notes/todo.md": "",
            "app/big.bin": b"\x00" * 10,
            "app/keep.bin": b"\x01",
            ".dockerignore": "notes\n**/*.bin\n!app/keep.bin\nDockerfile\n.dockerignore\n",
            ".gcloudignore": "README.md\ndata/\n",
        }
    )
    context = collect_context(root, root / "Dockerfile")
    paths = context.paths()
    # The Dockerfile and the ignore files are always sent: the builder reads them.
    assert paths == [
        ".dockerignore",
        ".gcloudignore",
        "Dockerfile",
        "app/__init__.py",
        "app/keep.bin",
        "app/task.py",
    ]
    reasons = {x.path: x.reason for x in context.excluded}
    assert reasons["notes/"] == ".dockerignore"
    assert reasons["README.md"] == ".gcloudignore"
    assert reasons["app/data/"] == ".gcloudignore"


def test_without_gcloudignore_gitignore_applies_like_gcloud(tree: Tree) -> None:
    root = tree({**BASIC, ".gitignore": "*.egg-info/\nREADME.md\n", "pkg.egg-info/PKG-INFO": ""})
    paths = collect_context(root, root / "Dockerfile").paths()
    assert ".gitignore" not in paths and "README.md" not in paths
    assert not any(p.startswith("pkg.egg-info") for p in paths)


def test_symlinks_are_sent_as_links(tree: Tree) -> None:
    root = tree(BASIC)
    (root / "app/latest.csv").symlink_to("data/table.csv")
    context = collect_context(root, root / "Dockerfile")
    link = next(e for e in context.entries if e.path == "app/latest.csv")
    assert link.link_target == "data/table.csv"
    data, _ = tar_bytes(root)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        member = tar.getmember("app/latest.csv")
    assert member.issym() and member.linkname == "data/table.csv"


def test_a_context_over_the_limit_is_refused_with_its_largest_files_named(tree: Tree) -> None:
    root = tree({**BASIC, "data/huge.bin": b"\x00" * 5000, "data/big.bin": b"\x00" * 3000})
    with pytest.raises(ContextError) as info:
        collect_context(root, root / "Dockerfile", max_bytes=4096)
    message = info.value.message
    assert "over the limit of 4.0 KiB" in message
    assert message.index("data/huge.bin (4.9 KiB)") < message.index("data/big.bin (2.9 KiB)")
    assert ".dockerignore" in (info.value.hint or "")
    assert collect_context(root, root / "Dockerfile", max_bytes=10_000).total_bytes > 8000


def test_a_dockerfile_outside_the_context_is_refused(tree: Tree, tmp_path: Path) -> None:
    root = tree(BASIC)
    outside = tmp_path / "Dockerfile.other"
    outside.write_text("FROM scratch\n")
    with pytest.raises(ContextError, match="outside the build context"):
        collect_context(root, outside)


@pytest.mark.parametrize(
    ("text", "size"), [("512M", 512 * 2**20), ("1G", 2**30), ("300MiB", 300 * 2**20), ("4096", 4096)]
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_parse_size_rejects_nonsense() -> None:
    with pytest.raises(VertexdistError, match="not a size"):
        parse_size("lots")


def test_gzip_stream_decompresses_to_a_tar_with_the_files(tree: Tree) -> None:
    root = tree(BASIC)
    data, _ = tar_bytes(root)
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data)), mode="r:") as tar:
        task = tar.extractfile("app/task.py")
        assert task is not None and task.read() == b"print('hi')\n"


def test_the_stdlib_entry_point_prints_the_same_tag(tree: Tree) -> None:
    """cloudbuild.yaml computes the tag with `python -m vertexdist.container tag` on a bare image."""
    root = tree(BASIC)
    result = subprocess.run(
        [sys.executable, "-m", "vertexdist.container", "tag", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == image_tag(content_hash(collect_context(root, root / "Dockerfile")))
