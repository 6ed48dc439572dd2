"""The launcher's command line: what render writes is what the launcher (and the local backend) reads."""

from __future__ import annotations

import typing

import pytest

from vertexdist.shipped.vertexdist_launcher.__main__ import RUNNERS
from vertexdist.shipped.vertexdist_launcher.options import (
    MODES,
    LauncherUsageError,
    Target,
    launch_args,
    parse_launch_args,
)
from vertexdist.spec.models import Launcher


def test_every_template_launcher_but_python_is_a_mode_with_a_runner() -> None:
    assert set(typing.get_args(Launcher)) - {"python"} == set(MODES) == set(RUNNERS)


@pytest.mark.parametrize(("nproc", "restarts"), [(None, 0), (4, 0), (None, 3), (2, 1)])
def test_written_arguments_read_back(nproc: int | None, restarts: int) -> None:
    argv = launch_args("torchrun", module="pkg.task", nproc_per_node=nproc, max_restarts=restarts)
    options = parse_launch_args([*argv, "--lr", "0.1"])
    assert (options.mode, options.nproc_per_node, options.max_restarts) == ("torchrun", nproc, restarts)
    assert options.target == Target(module="pkg.task", args=("--lr", "0.1"))


def test_defaults_are_left_out_of_the_written_arguments() -> None:
    assert launch_args("torchrun", module="pkg.task") == ["torchrun", "--", "-m", "pkg.task"]
    assert launch_args("ray", module="pkg.task") == ["ray", "--", "-m", "pkg.task"]


def test_a_script_target_and_inline_values() -> None:
    options = parse_launch_args(["torchrun", "--nproc-per-node=2", "--", "train.py", "--", "x"])
    assert options.nproc_per_node == 2
    assert options.target == Target(script="train.py", args=("--", "x"))
    assert options.target.argv() == ["train.py", "--", "x"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the first argument is the mode"),
        (["mpirun", "--", "-m", "m"], "one of torchrun, ray; got 'mpirun'"),
        (["torchrun", "-m", "m"], "`--` must separate"),
        (["torchrun", "--"], "nothing to run"),
        (["torchrun", "--", "-m"], "-m needs a module"),
        (["torchrun", "--", "--lr"], "give -m MODULE or a script"),
        (["torchrun", "--nproc-per-node", "0", "--", "-m", "m"], "at least 1"),
        (["torchrun", "--nproc-per-node", "two", "--", "-m", "m"], "not a whole number"),
        (["torchrun", "--max-restarts", "--", "-m", "m"], "--max-restarts needs a value"),
        (["torchrun", "--nnodes", "2", "--", "-m", "m"], "unknown option '--nnodes'"),
    ],
)
def test_bad_command_lines_say_what_is_wrong(argv: list[str], message: str) -> None:
    with pytest.raises(LauncherUsageError, match=message):
        parse_launch_args(argv)
