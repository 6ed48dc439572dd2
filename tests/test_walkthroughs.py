"""The docs' walk-throughs, run as written, so what a reader copies is what the commands do.

A fenced block after `<!-- walkthrough: NAME [slow] [emulator] -->` in README.md or a docs/ page runs, in the
page's order, in one working folder per page that holds a copy of the repository's templates and examples
(docs/architecture.md, "Adding a page"):

- `console`: each `$ ` line runs in one bash session (variables carry over); each must exit 0 unless the next
  line is `$ echo $?`, whose shown output is the code expected; the lines shown after a command must appear in
  its output, in order: `...` alone skips any lines, `…` inside a
  line matches any text, runs of spaces match any run of spaces;
- `bash`: the block runs as a script (it sets up files for the blocks after it);
- `python`, marked `emulator`: the block runs twice against one `vertexdist emulator start`, with its two
  variables exported as the page says, so a snippet must also work on a second run;
- `console`, marked `emulator`: as a `console` block, with those two variables exported (run by the page's own
  test, tests/test_walkthroughs_managed.py).

Every other `vertexdist ...` line of a `bash` or `console` block in the docs is parsed by the real CLI with
`--help` appended, so a renamed command or flag fails here too.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

from vertexdist.cli.main import app as vertexdist_app
from vertexdist.cli.main import run as vertexdist_main

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
MARKER = re.compile(r"^<!-- walkthrough: ([\w-]+)((?: [\w-]+)*) -->$")
FENCE = re.compile(r"^```(\w*)")
# What a walk-through may read from the repository: the templates, the examples and what they point at.
COPIED = ("job_templates", "examples", "Dockerfile", ".dockerignore")
OPTIONS = {"slow", "emulator"}
CMD = "@@walkthrough-command {}@@"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: tuple[str, ...]
    name: str = ""
    options: frozenset[str] = frozenset()

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    """Every fenced block of a markdown page, with the walk-through marker on the line before it, if any."""
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        marker = MARKER.match(lines[index - 1]) if index else None
        name, options = (marker.group(1), frozenset(marker.group(2).split())) if marker else ("", frozenset())
        yield Block(page, index + 1, fence.group(1), tuple(lines[index + 1 : end]), name, options)
        index = end + 1


def walkthroughs() -> list[Block]:
    return [block for page in PAGES for block in blocks(page) if block.name]


def _param(block: Block) -> object:
    marks = [pytest.mark.slow, pytest.mark.timeout(300)] if "slow" in block.options else []
    return pytest.param(block, id=f"{block.page.stem}-{block.name}", marks=marks)


# ---- console blocks: commands and what they print ----


@dataclass(frozen=True)
class Step:
    command: str
    shown: tuple[str, ...]


def steps(block: Block) -> list[Step]:
    found: list[Step] = []
    for line in block.body:
        if line.startswith("$ "):
            found.append(Step(line[2:], ()))
        elif found:
            found[-1] = Step(found[-1].command, (*found[-1].shown, line))
        elif line.strip():
            raise AssertionError(f"{block.where}: output before the first `$ ` command: {line!r}")
    return found


def _pattern(shown: str) -> re.Pattern[str]:
    parts = [r"\s+".join(re.escape(word) for word in piece.split()) for piece in shown.strip().split("…")]
    return re.compile(r"\s*" + ".*".join(parts) + r"\s*$")


def unshown(shown: tuple[str, ...], output: str) -> str | None:
    """The first shown line the output lacks (None: all there). Shown lines follow one another in the output,
    blank lines aside, except where `...` lets any lines come between."""
    lines = output.splitlines()
    at = 0
    free = False
    for want in shown:
        if not want.strip():
            continue
        if want.strip() == "...":
            free = True
            continue
        pattern = _pattern(want)
        while at < len(lines) and (not lines[at].strip() or (free and not pattern.match(lines[at]))):
            at += 1
        if at == len(lines) or not pattern.match(lines[at]):
            return want
        at += 1
        free = False
    return None


def test_the_output_matcher_holds_lines_to_their_order_and_placeholders() -> None:
    output = "6 templates checked: 0 errors, 0 warnings\njob JOB_STATE_SUCCEEDED after 21.7s\n  a   b\n"
    assert unshown(("6 templates checked: 0 errors, 0 warnings",), output) is None
    assert unshown(("4 templates checked: 0 errors, 0 warnings",), output) is not None
    assert unshown(("...", "job JOB_STATE_SUCCEEDED after …", "a b"), output) is None
    assert unshown(("job JOB_STATE_SUCCEEDED after …",), output) is not None  # a line skipped without `...`
    assert unshown(("a b", "...", "6 templates …"), output) is not None  # out of order


# ---- the working folder, the environment and the emulator ----


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "NO_GCE_CHECK": "true",
        "COLUMNS": "120",
    }
    for name in ("VERTEX_API_ENDPOINT", "STORAGE_EMULATOR_HOST"):
        env.pop(name, None)
    env.update(extra or {})
    return env


@pytest.fixture(scope="module")
def folders() -> dict[Path, Path]:
    """One working folder per page (made on first use), with what the walk-throughs read copied in."""
    return {}


@pytest.fixture(scope="module")
def done() -> set[tuple[Path, int]]:
    """The set-up (`bash`) blocks that have run in their page's folder."""
    return set()


def _folder(folders: dict[Path, Path], page: Path, factory: pytest.TempPathFactory) -> Path:
    if page not in folders:
        root = factory.mktemp(f"walk-{page.stem}")
        for name in COPIED:
            source = REPO / name
            if source.is_dir():
                shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
            elif source.is_file():
                shutil.copy2(source, root / name)
        folders[page] = root
    return folders[page]


@dataclass
class Emulator:
    process: subprocess.Popen[str]
    env: dict[str, str]


@pytest.fixture(scope="module")
def emulators() -> Iterator[dict[str, Emulator]]:
    """`vertexdist emulator start` as the docs run it (any free ports), one for the module, started on use."""
    started: dict[str, Emulator] = {}
    yield started
    for emulator in started.values():
        emulator.process.send_signal(signal.SIGTERM)
        try:
            emulator.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            emulator.process.kill()
            emulator.process.wait(timeout=10)


def _emulator(emulators: dict[str, Emulator], data: Path) -> Emulator:
    if "one" not in emulators:
        command = [sys.executable, "-m", "vertexdist", "emulator", "start", "--data-dir", str(data)]
        # --hold-get spares the SDK its fixed 5 s sleep between polls (docs/commands/emulator.md).
        process = subprocess.Popen(
            [*command, "--hold-get", "60"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=_env(),
        )
        assert process.stdout is not None
        lines = [process.stdout.readline().strip() for _ in range(2)]
        variables = dict(line.split("=", 1) for line in lines if "=" in line)
        assert set(variables) == {"VERTEX_API_ENDPOINT", "STORAGE_EMULATOR_HOST"}, lines
        # Whatever it prints later must not fill the pipe and stop it.
        threading.Thread(target=process.stdout.read, daemon=True).start()
        emulators["one"] = Emulator(process, variables)
    return emulators["one"]


# ---- running the blocks ----


def _run_console(block: Block, cwd: Path, env: dict[str, str] | None = None) -> None:
    """Every command in one bash session (`env` added to its environment); each must exit 0, unless the next
    one is `echo $?`, which shows the exit code the docs expect (and is checked as the output it shows)."""
    plan = steps(block)
    script = ["exec 2>&1", "set -o pipefail", "__walkthrough_rc=0"]
    for index, step in enumerate(plan):
        script += [
            f"echo '{CMD.format(index)}'",
            "(exit $__walkthrough_rc)",  # so that `echo $?` sees the code of the command before it
            step.command,
            "__walkthrough_rc=$?",
            'echo "@@walkthrough-rc $__walkthrough_rc@@"',
        ]
    result = subprocess.run(
        ["bash", "-c", "\n".join(script)], cwd=cwd, capture_output=True, text=True, env=_env(env), timeout=280
    )
    chunks = re.split(r"^@@walkthrough-command \d+@@$\n?", result.stdout, flags=re.M)[1:]
    assert len(chunks) == len(plan), f"{block.where}: not every command ran\n{result.stdout[-3000:]}"
    for index, (step, chunk) in enumerate(zip(plan, chunks, strict=True)):
        rc = re.search(r"^@@walkthrough-rc (\d+)@@$", chunk, flags=re.M)
        assert rc is not None, f"{block.where}: `{step.command}` ended the shell\n{chunk[-3000:]}"
        output = chunk[: rc.start()]
        checked = index + 1 < len(plan) and plan[index + 1].command.strip() == "echo $?"
        assert rc.group(1) == "0" or checked, (
            f"{block.where}: `{step.command}` failed (exit {rc.group(1)}):\n{output[-3000:]}"
        )
        missing = unshown(step.shown, output)
        assert missing is None, (
            f"{block.where}: `{step.command}` no longer prints {missing.strip()!r} as the docs show"
            f" (update the docs or the code); it printed:\n{output[-3000:]}"
        )


def _run_script(block: Block, cwd: Path, env: dict[str, str], argv: list[str]) -> str:
    result = subprocess.run(
        argv,
        input="\n".join(block.body) + "\n",
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
    )
    assert result.returncode == 0, (
        f"{block.where}: exit {result.returncode}\n{(result.stdout + result.stderr)[-3000:]}"
    )
    return result.stdout


def test_a_console_block_fails_on_a_failed_command_or_a_changed_output(tmp_path: Path) -> None:
    def block(*body: str) -> Block:
        return Block(REPO / "README.md", 1, "console", body)

    _run_console(block("$ x=hi", "$ echo $x", "hi", "$ false", "$ echo $?", "1"), tmp_path)
    with pytest.raises(AssertionError, match="failed"):
        _run_console(block("$ false", "$ echo done"), tmp_path)
    with pytest.raises(AssertionError, match="no longer prints"):
        _run_console(block("$ echo hi", "bye"), tmp_path)


def runs_elsewhere(block: Block) -> bool:
    """A `console` block marked `emulator` runs with a started emulator's two variables exported, in its
    pages' own test (tests/test_walkthroughs_managed.py), which shares one emulator among them."""
    return block.lang == "console" and "emulator" in block.options


@pytest.mark.integration
@pytest.mark.parametrize("block", [_param(b) for b in walkthroughs() if not runs_elsewhere(b)])
def test_the_walkthrough_runs_as_written(
    block: Block,
    folders: dict[Path, Path],
    done: set[tuple[Path, int]],
    emulators: dict[str, Emulator],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    assert block.options <= OPTIONS, (
        f"{block.where}: unknown walk-through options {set(block.options - OPTIONS)}"
    )
    cwd = _folder(folders, block.page, tmp_path_factory)
    # Set-up scripts that come before this block on its page run first, once, even if they were deselected.
    for earlier in walkthroughs():
        setup = earlier.page == block.page and earlier.line < block.line and earlier.lang == "bash"
        if setup and (earlier.page, earlier.line) not in done:
            _run_script(earlier, cwd, _env(), ["bash", "-e"])
            done.add((earlier.page, earlier.line))
    if block.lang == "console":
        _run_console(block, cwd)
    elif block.lang == "bash":
        if (block.page, block.line) not in done:
            _run_script(block, cwd, _env(), ["bash", "-e"])
            done.add((block.page, block.line))
    elif block.lang == "python":
        assert "emulator" in block.options, f"{block.where}: a python walk-through runs against the emulator"
        emulator = _emulator(emulators, tmp_path_factory.mktemp("emulator-data"))
        for _ in range(2):  # a snippet is run again by its readers: it must work on a second run
            _run_script(block, cwd, _env(emulator.env), [sys.executable, "-"])
    else:
        raise AssertionError(
            f"{block.where}: a walk-through block is console, bash or python, not {block.lang!r}"
        )


def test_the_walkthroughs_are_found() -> None:
    names = {(block.page.name, block.name) for block in walkthroughs()}
    assert ("getting-started.md", "first-job-check") in names
    assert any("emulator" in block.options for block in walkthroughs())


# ---- every other command line in the docs: the CLI still takes it ----


def _command_lines() -> Iterator[tuple[Block, str]]:
    for page in PAGES:
        for block in blocks(page):
            if block.lang not in ("bash", "console") or block.name:
                continue
            for line in block.body:
                # In a console block only `$ ` lines are commands (the others are what they print).
                if block.lang == "console" and not line.startswith("$ "):
                    continue
                text = line[2:] if line.startswith("$ ") else line
                if text.startswith("vertexdist ") and "$(" not in text:
                    yield block, text


def _argv(line: str) -> list[str]:
    words = shlex.split(line, comments=True)
    for stop in ("|", ">", "&&", ";"):
        if stop in words:
            words = words[: words.index(stop)]
    return words[1:]


@functools.cache
def _cli() -> Callable[..., object]:
    """The CLI as the console script builds it (`run` registers the commands), made once."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        vertexdist_main(["--help"])
    return typer.main.get_command(vertexdist_app).main


def _parses(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            _cli()([*argv, "--help"], prog_name="vertexdist")
        except SystemExit as exc:
            return int(exc.code or 0), err.getvalue()
    return 0, err.getvalue()


def test_every_command_line_of_the_docs_is_one_the_cli_takes() -> None:
    lines = list(_command_lines())
    assert len(lines) > 30, "the docs show the commands"
    refused = []
    for block, line in lines:
        code, err = _parses(_argv(line))
        if code != 0:
            refused.append(
                f"{block.where}: {line}\n    {err.strip().splitlines()[-1] if err.strip() else code}"
            )
    assert not refused, "the CLI no longer takes these lines of the docs:\n" + "\n".join(refused)


def test_a_renamed_flag_is_caught() -> None:
    assert _parses(["validate", "job_templates/"])[0] == 0
    assert _parses(["submit", "job_templates/cpu-small.yaml", "--dry-runn"])[0] == 2
    assert _parses(["emulatr", "start"])[0] == 2
