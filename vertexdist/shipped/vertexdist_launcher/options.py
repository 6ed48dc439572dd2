"""The launcher's command line: `MODE [--nproc-per-node N] [--max-restarts K] -- (-m MODULE | SCRIPT) [ARGS]`.

Pure. `launch_args` writes it (vertexdist's render puts it in the request), `parse_launch_args` reads it
(the launcher on the replica, and vertexdist's local backend, which needs the processes per replica): one
function each way, so what is rendered is what is run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# The launcher's modes. `python` is not one: with it the user's module runs once per machine, through the
# `watched` runner (`vertexdist_launcher.watched -m MODULE ARGS`), which takes no mode.
MODES: tuple[str, ...] = ("torchrun", "ray")
NPROC_FLAG = "--nproc-per-node"
RESTARTS_FLAG = "--max-restarts"
USAGE = (
    "usage: python -m vertexdist_launcher MODE [--nproc-per-node N] [--max-restarts K] "
    "-- (-m MODULE | SCRIPT) [ARGS...]"
)


class LauncherUsageError(ValueError):
    """The launcher's own command line is wrong."""


@dataclass(frozen=True)
class Target:
    """What each process runs: `python -m module args` or `python script args`."""

    module: str | None = None
    script: str | None = None
    args: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        """The interpreter's arguments, as `python` takes them."""
        head = ["-m", self.module] if self.module is not None else [str(self.script)]
        return [*head, *self.args]


@dataclass(frozen=True)
class LaunchOptions:
    mode: str
    target: Target
    nproc_per_node: int | None = None  # None: one per GPU of this machine, 1 without GPUs
    max_restarts: int = 0


def launch_args(
    mode: str, *, module: str, nproc_per_node: int | None = None, max_restarts: int = 0
) -> list[str]:
    """The launcher's arguments up to and including the user's module; the module's own args follow."""
    flags: list[str] = []
    if nproc_per_node is not None:
        flags += [NPROC_FLAG, str(nproc_per_node)]
    if max_restarts:
        flags += [RESTARTS_FLAG, str(max_restarts)]
    return [mode, *flags, "--", "-m", module]


def _count(flag: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise LauncherUsageError(f"{flag} {raw!r} is not a whole number") from None
    if value < minimum:
        raise LauncherUsageError(f"{flag} must be at least {minimum}, got {value}")
    return value


def parse_target(rest: Sequence[str]) -> Target:
    """What follows `--`: `-m MODULE ARGS` or `SCRIPT ARGS`."""
    if not rest:
        raise LauncherUsageError("nothing to run after `--`: give -m MODULE or a script")
    if rest[0] == "-m":
        if len(rest) < 2 or not rest[1] or rest[1].startswith("-"):
            raise LauncherUsageError("-m needs a module name, e.g. -m trainer.task")
        return Target(module=rest[1], args=tuple(rest[2:]))
    if rest[0].startswith("-"):
        raise LauncherUsageError(f"{rest[0]!r} after `--`: give -m MODULE or a script path")
    return Target(script=rest[0], args=tuple(rest[1:]))


def parse_launch_args(argv: Sequence[str], modes: Sequence[str] = MODES) -> LaunchOptions:
    """The options of `argv` (the launcher's arguments, without `python -m vertexdist_launcher`)."""
    if not argv or argv[0] not in modes:
        got = repr(argv[0]) if argv else "nothing"
        raise LauncherUsageError(f"the first argument is the mode, one of {', '.join(modes)}; got {got}")
    if "--" not in argv:
        raise LauncherUsageError("`--` must separate the launcher's options from what it runs")
    split = list(argv).index("--")
    values: dict[str, int] = {}
    minimums = {NPROC_FLAG: 1, RESTARTS_FLAG: 0}
    flags = list(argv[1:split])
    while flags:
        flag, _, inline = flags.pop(0).partition("=")
        if flag not in minimums:
            raise LauncherUsageError(f"unknown option {flag!r}; the options are {', '.join(minimums)}")
        if not inline:
            if not flags:
                raise LauncherUsageError(f"{flag} needs a value")
            inline = flags.pop(0)
        values[flag] = _count(flag, inline, minimums[flag])
    return LaunchOptions(
        mode=argv[0],
        target=parse_target(argv[split + 1 :]),
        nproc_per_node=values.get(NPROC_FLAG),
        max_restarts=values.get(RESTARTS_FLAG, 0),
    )
