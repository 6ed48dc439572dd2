"""Which files of a build context are sent: `.dockerignore`, `.gcloudignore` and the always-excluded set.

Pure: every function here takes text and relative POSIX paths, never the file system.

- `.dockerignore` follows Docker (moby `patternmatcher`): patterns are relative to the context root
  (`*.pyc` matches at the root only; `**/*.pyc` anywhere), a pattern that matches a folder excludes what
  is under it, `!pattern` re-includes, and the last matching line wins.
- `.gcloudignore` follows gcloud (`gcloud topic gcloudignore`), which is gitignore: a pattern without a
  slash matches at any depth, a trailing `/` matches folders only, and nothing under an ignored folder
  can be re-included. `#!include:FILE` pulls in another file's patterns. Without a `.gcloudignore`,
  gcloud ignores `.git`, `.gitignore`, `.gcloudignore` and what `.gitignore` lists; so do we.
- Always excluded, whatever the ignore files say: `.git`, virtualenvs (`.venv`, `venv`, any folder with
  a `pyvenv.cfg`), `.env` files, key files (`*-key.json`, `*credentials*.json`) and caches.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

ALWAYS_EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
        ".ipynb_checkpoints",
        ".tox",
        ".nox",
        ".vertexdist",
    }
)
# Secrets must never leave the machine, so these win over any `!` exception in the ignore files.
SECRET_FILE_PATTERNS = (".env", ".env.*", "*.env", "*-key.json", "*credentials*.json")
CACHE_FILE_PATTERNS = ("*.pyc", "*.pyo", ".DS_Store")
VENV_MARKER = "pyvenv.cfg"


def always_excluded_dir(name: str) -> bool:
    """A folder never sent, by its name alone (a folder holding `pyvenv.cfg` is checked by the walker)."""
    return name in ALWAYS_EXCLUDED_DIRS


def always_excluded_file(name: str) -> str | None:
    """Why a file is never sent (`"secret"` or `"cache"`), by its name; None when it may be sent."""
    if any(fnmatch.fnmatchcase(name, p) for p in SECRET_FILE_PATTERNS):
        return "secret"
    if any(fnmatch.fnmatchcase(name, p) for p in CACHE_FILE_PATTERNS):
        return "cache"
    return None


@dataclass(frozen=True)
class Pattern:
    """One compiled ignore line."""

    text: str
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool = False


def _translate(body: str, *, docker: bool) -> str:
    """Glob to regex: `*` and `?` stay in one path part, `**` spans parts, `[...]` and `\\x` as in Go/git."""
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch == "*":
            if i + 1 < n and body[i + 1] == "*":
                i += 2
                at_part_start = not out or out[-1].endswith("/")
                if i < n and body[i] == "/":
                    i += 1
                    # `**/` matches zero or more whole folders.
                    out.append("(?:.*/)?" if (docker or at_part_start) else "[^/]*/")
                elif i >= n:
                    out.append(".*")
                else:
                    out.append(".*" if docker or at_part_start else "[^/]*")
                continue
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(body[i]))
        elif ch == "[":
            end = body.find("]", i + 2 if i + 1 < n and body[i + 1] in "!^" else i + 1)
            if end == -1:
                out.append(re.escape(ch))
            else:
                inner = body[i + 1 : end]
                if inner[:1] in ("!", "^"):
                    inner = "^" + inner[1:]
                out.append("[" + inner.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _clean(path: str) -> str:
    """Go's `filepath.Clean` for the patterns Docker reads (no `..` above the root)."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def parse_dockerignore(text: str) -> list[Pattern]:
    """The patterns of a `.dockerignore`, in file order."""
    patterns: list[Pattern] = []
    for raw in text.splitlines():
        if raw.startswith("#"):
            continue
        line = raw.strip()
        if not line:
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:].strip()
        line = _clean(line)
        if not line:
            continue
        regex = re.compile("^" + _translate(line, docker=True) + "$", re.DOTALL)
        patterns.append(Pattern(raw.strip(), regex, negated))
    return patterns


def parse_gitignore(text: str, *, read_include: Callable[[str], str | None] | None = None) -> list[Pattern]:
    """The patterns of a `.gcloudignore` or `.gitignore`; `read_include` reads `#!include:FILE` files."""
    patterns: list[Pattern] = []
    for raw in text.splitlines():
        if raw.startswith("#!include:"):
            included = read_include(raw[len("#!include:") :].strip()) if read_include else None
            if included is not None:
                patterns.extend(parse_gitignore(included))
            continue
        if raw.startswith("#"):
            continue
        line = raw.rstrip("\n\r")
        # Trailing spaces are dropped unless escaped with a backslash.
        while line.endswith(" ") and not line.endswith("\\ "):
            line = line[:-1]
        if not line:
            continue
        negated = line.startswith("!")
        if negated or line.startswith(("\\!", "\\#")):  # `\!` and `\#` escape a literal first character
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        body = _translate(line, docker=False)
        regex = re.compile(("^" if anchored else "^(?:.*/)?") + body + "$", re.DOTALL)
        patterns.append(Pattern(raw, regex, negated, dir_only))
    return patterns


DEFAULT_GCLOUDIGNORE = ".gcloudignore\n.git\n.gitignore\n"


@dataclass(frozen=True)
class DockerIgnore:
    """`.dockerignore` rules: the last matching pattern wins; matching a parent folder counts."""

    patterns: Sequence[Pattern] = ()

    def excluded(self, rel_path: str) -> bool:
        parts = rel_path.split("/")
        result = False
        for pattern in self.patterns:
            if any(pattern.regex.match("/".join(parts[:k])) for k in range(len(parts), 0, -1)):
                result = not pattern.negated
        return result

    def may_reinclude_under(self, rel_dir: str) -> bool:
        """Whether a `!` pattern could match under `rel_dir` (if not, an excluded folder is skipped)."""
        dir_parts = rel_dir.split("/")
        for pattern in self.patterns:
            if not pattern.negated:
                continue
            pat_parts = _clean(pattern.text.lstrip("!").strip()).split("/")
            if _prefix_may_match(pat_parts, dir_parts):
                return True
        return False


def _prefix_may_match(pat_parts: list[str], dir_parts: list[str]) -> bool:
    for k, part in enumerate(dir_parts):
        if k >= len(pat_parts):
            return False
        if "**" in pat_parts[k]:
            return True
        if not fnmatch.fnmatchcase(part, pat_parts[k]):
            return False
    return True


@dataclass(frozen=True)
class GitIgnore:
    """gitignore rules (`.gcloudignore`): the last matching pattern wins; folders are checked as folders."""

    patterns: Sequence[Pattern] = ()

    def ignored_path(self, rel_path: str, *, is_dir: bool = False) -> bool:
        """Whether `rel_path` is left out, counting its folders (nothing under one comes back)."""
        parts = rel_path.split("/")
        for k in range(1, len(parts)):
            if self.ignored("/".join(parts[:k]), is_dir=True):
                return True
        return self.ignored(rel_path, is_dir=is_dir)

    def ignored(self, rel_path: str, *, is_dir: bool) -> bool:
        """This path alone (the walker has already skipped ignored folders)."""
        result = False
        for pattern in self.patterns:
            if pattern.dir_only and not is_dir:
                continue
            if pattern.regex.match(rel_path):
                result = not pattern.negated
        return result
