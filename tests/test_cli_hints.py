"""Every hint names only options its command has (issue 36, item 9).

Two walks: every string in vertexdist's source that spells `vertexdist CMD ... --opt` (an f-string's
`{...flags}` read as ` --emulator --emulator-data-dir`, what `JobPlace.flags` can add) must name options
`CMD` has; and the shared "no project" hints, which name bare options, are read as each command that prints
them prints them, and each option they name must be that command's. The command tree is typer's, from
`vertexdist.cli.main`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from vertexdist.cli import main

SOURCE = Path(__file__).resolve().parents[1] / "vertexdist"
MENTION = re.compile(r"vertexdist((?: [^\s`'\"]+)+)")
OPTION = re.compile(r"(?<![\w`-])(--[a-z][a-z0-9-]*)")
FLAGS = " --emulator --emulator-data-dir"


def _tree() -> Any:
    main._register()
    return typer.main.get_command(main.app)


ROOT = _tree()


def _options(command: Any) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts)}


def _command(words: list[str]) -> tuple[Any, int]:
    """The command `words` name from the root, and how many words named it."""
    command, used = ROOT, 0
    while hasattr(command, "commands") and used < len(words) and words[used] in command.commands:
        command, used = command.commands[words[used]], used + 1
    return command, used


def _texts(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [
                v.value
                if isinstance(v, ast.Constant)
                else (FLAGS if ast.unparse(v.value).endswith("flags") else "{}")  # type: ignore[attr-defined]
                for v in node.values
            ]
            yield node.lineno, "".join(str(p) for p in parts)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def _mentions(text: str) -> Iterator[tuple[list[str], list[str]]]:
    """Each `vertexdist CMD ... --opt ...` in `text`: the command's words, and the options named after them
    (up to a closing bracket or the end of a clause)."""
    for match in MENTION.finditer(text):
        words: list[str] = []
        for word in match.group(1).split():
            stripped = word.rstrip("),.;:")
            words.append(stripped)
            if stripped != word:
                break
        _command_found, used = _command(words)
        if used:
            yield words[:used], [w.split("=")[0] for w in words[used:] if w.startswith("--")]


def wrong_options(command_words: list[str], text: str) -> list[str]:
    """Options `text` (a hint printed by `vertexdist COMMAND_WORDS`) names that their command lacks:
    `vertexdist CMD --opt` against CMD, a bare `--opt` against the command that printed it."""
    wrong: list[str] = []
    for words, options in _mentions(text):
        command, _ = _command(words)
        wrong += [f"{' '.join(words)} {o}" for o in options if o not in _options(command)]
    rest = MENTION.sub("", text)
    printer, used = _command(command_words)
    assert used == len(command_words), command_words
    wrong += [f"{' '.join(command_words)} {o}" for o in OPTION.findall(rest) if o not in _options(printer)]
    return wrong


def test_every_vertexdist_command_a_source_string_spells_has_the_options_it_names() -> None:
    wrong = []
    for path in sorted(SOURCE.rglob("*.py")):
        for line, text in _texts(ast.parse(path.read_text())):
            for words, options in _mentions(text):
                command, _ = _command(words)
                wrong += [
                    f"{path.relative_to(SOURCE.parent)}:{line}: vertexdist {' '.join(words)} has no {o}"
                    for o in options
                    if o not in _options(command)
                ]
    assert not wrong, "\n".join(wrong)


def test_the_walk_sees_a_wrong_option() -> None:
    assert wrong_options(["pool", "list"], "e.g. `vertexdist pool list --from x.yaml`") == [
        "pool list --from"
    ]
    assert wrong_options(["pool", "list"], "or name a template with --from") == ["pool list --from"]
    assert wrong_options(["pool", "create"], "or name a template with --from") == []


def _no_project_template(folder: Path) -> Path:
    template = folder / "job.yaml"
    text = (SOURCE.parent / "job_templates" / "cpu-small.yaml").read_text()
    template.write_text("".join(line for line in text.splitlines(True) if not line.startswith("project:")))
    return template


def _hint(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main.run(argv)
    hints = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hint: ")]
    assert hints, argv
    return hints[-1]


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("pool list", []),
        ("pool describe", ["warm-1"]),
        ("pool delete", ["warm-1"]),
        # An emulator's http:// endpoint needs no project (it lists every project it holds); Vertex's does.
        ("ui", ["--endpoint", "https://us-central1-aiplatform.googleapis.com", "--port", "0"]),
        ("managed resume", ["m-1"]),
        ("submit", ["job.yaml"]),
    ],
)
def test_a_no_project_hint_names_only_options_of_the_command_that_prints_it(
    command: str,
    args: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [*command.split(), *args]
    monkeypatch.chdir(tmp_path)
    for name in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "VERTEX_API_ENDPOINT", "GCLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    template = _no_project_template(tmp_path)
    if argv[:2] == ["managed", "resume"]:
        from vertexdist.managed.service import open_store

        open_store().create(str(template), "vertex", {}, managed_id="m-1")
    hint = _hint(argv, capsys)
    assert "project" in hint, hint
    assert wrong_options(command.split(), hint) == [], hint
