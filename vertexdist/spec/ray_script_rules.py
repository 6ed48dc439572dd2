"""Rules that read a `launcher: ray` job's entry file as text (cheap, never imported): the two places where
code written for an older Ray fails on the Ray the template installs (2.60), before anything of vertexdist.

- `tune.Tuner(..., run_config=ray.train.RunConfig(...))`: from Ray 2.40 on, Tune has its own `tune.RunConfig`
  and the Tuner fails with `AttributeError: 'str' object has no attribute 'value'` on Train's.
- `train.report(...)` in a function passed to Tune: Ray 2.60 raises a RayDeprecationWarning ("This will
  be an error in the future"), which stops the trial where warnings are errors; Tune's own is
  `tune.report(...)`.

Both are right inside a Ray Train trainer (`TorchTrainer(..., run_config=train.RunConfig(...))`, and
`train.report` in its `train_loop_per_worker`), so a file that makes a trainer is only checked for a Train
RunConfig written inside the Tuner's own call. Pure (reads one file).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from vertexdist.spec.findings import Finding
from vertexdist.spec.script_rules import SCAN_BYTES, entry_file

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

_TUNER = re.compile(r"\bTuner\s*\(")
_TRAINER = re.compile(r"\b\w*Trainer\s*\(")
# `from ray.train import ..., RunConfig, ...` (not `as` another name), or `train.RunConfig(` / `ray.train.`
_TRAIN_RUNCONFIG_IMPORT = re.compile(r"^\s*from\s+ray\.train\s+import\s+[^#\n]*\bRunConfig\b(?!\s+as)", re.M)
_TRAIN_RUNCONFIG_CALL = re.compile(r"(?<![\w.])(?:ray\.)?train\.RunConfig\s*\(")
_BARE_RUNCONFIG_CALL = re.compile(r"(?<![\w.])RunConfig\s*\(")
_TRAIN_REPORT = re.compile(r"(?<![\w.])(?:ray\.)?train\.report\s*\(")
_TRAIN_REPORT_IMPORT = re.compile(r"^\s*from\s+ray\.train\s+import\s+[^#\n]*\breport\b(?!\s+as)", re.M)
_BARE_REPORT = re.compile(r"(?<![\w.])report\s*\(")


def _code(text: str) -> str:
    """`text` with its comments blanked (line numbers kept)."""
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _call_span(text: str, start: int) -> tuple[int, int]:
    """The span of the call whose `(` is the first at or after `start`, to its closing parenthesis."""
    opening = text.index("(", start)
    depth = 0
    for index in range(opening, len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                return start, index + 1
    return start, len(text)


def ray_api_mistakes(text: str) -> list[tuple[int, str]]:
    """(line number, "runconfig" | "report") of each place the file passes Ray Train's RunConfig to a Tuner
    or calls Ray Train's report in a Tune function (pure; see the module's text)."""
    code = _code(text)
    tuners = list(_TUNER.finditer(code))
    if not tuners:
        return []
    has_trainer = _TRAINER.search(code) is not None
    imported_config = _TRAIN_RUNCONFIG_IMPORT.search(code) is not None
    found: list[tuple[int, str]] = []
    for tuner in tuners:
        begin, end = _call_span(code, tuner.start())
        inside = code[begin:end]
        calls = list(_TRAIN_RUNCONFIG_CALL.finditer(inside))
        if imported_config:
            calls += list(_BARE_RUNCONFIG_CALL.finditer(inside))
        found += [(_line(code, begin + call.start()), "runconfig") for call in calls]
    if not found and imported_config and not has_trainer:  # made beside the Tuner, e.g. `config = RunConfig(`
        found += [(_line(code, m.start()), "runconfig") for m in _BARE_RUNCONFIG_CALL.finditer(code)]
    if not has_trainer:
        reports = list(_TRAIN_REPORT.finditer(code))
        if _TRAIN_REPORT_IMPORT.search(code):
            reports += list(_BARE_REPORT.finditer(code))
        found += [(_line(code, m.start()), "report") for m in reports]
    return sorted(set(found))


def ray_script_uses_older_ray_api(t: JobTemplate) -> Iterator[Finding]:
    """A warning per place a `launcher: ray` entry file uses Ray Train's names where Ray 2.60's Tune wants
    its own."""
    if t.trainer.launcher != "ray":
        return
    path = entry_file(t)
    if path is None:
        return
    try:
        with path.open("rb") as handle:
            text = handle.read(SCAN_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return
    field = "trainer.script" if t.trainer.script is not None else "trainer.module"
    for number, kind in ray_api_mistakes(text):
        if kind == "runconfig":
            yield Finding(
                field,
                f"{path.name}:{number} passes Ray Train's RunConfig to a Tuner; on Ray 2.40 and later the"
                " Tuner fails with AttributeError: 'str' object has no attribute 'value'",
                "use Tune's own: tune.RunConfig(name=..., storage_path=...) (from ray import tune)",
                "warning",
            )
        else:
            yield Finding(
                field,
                f"{path.name}:{number} calls ray.train.report in a function passed to Ray Tune; Ray 2.60"
                " flags it (RayDeprecationWarning: to be an error), and a run that treats warnings as"
                " errors stops there",
                "call tune.report({...}) in a Tune function (train.report stays right inside a Ray Train"
                " trainer's train_loop_per_worker)",
                "warning",
            )


RULES: tuple[Callable[[JobTemplate], Iterator[Finding]], ...] = (ray_script_uses_older_ray_api,)
