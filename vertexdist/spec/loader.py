"""Load template files: safe YAML, pydantic validation, the catalog rules; every problem with file:line:col.

This is the edge of the spec package that touches files; models and rules stay pure.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import reprlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from vertexdist.errors import Problem, TemplateError, UsageError
from vertexdist.sizes import human_size
from vertexdist.spec import limits, partial
from vertexdist.spec.findings import Finding
from vertexdist.spec.models import BuildSpec, JobTemplate, TrainerSpec
from vertexdist.spec.recovery import FallbackSpec, RecoverySpec
from vertexdist.spec.rules import RULES, check_template
from vertexdist.spec.tuning import ParameterSpec, TuningSpec
from vertexdist.spec.yaml_source import Loc, SourceMap, YamlSourceError, load_yaml_mapping

TEMPLATE_SUFFIXES = (".yaml", ".yml")

# Names people bring from the SDK or gcloud, and what the template calls them.
_KNOWN_ALIASES = {
    "reduction_server_replica_count": "reduction_server_count",
    "environment_variables": "trainer.env",
    "script_path": "trainer.script",
    "python_module": "trainer.module",
    "python_module_name": "trainer.module",
    "requirements": "trainer.requirements",
    "args": "trainer.args",
    "env": "trainer.env",
    "worker_pool_specs": "replica_count, machine_type and the accelerator fields",
    "workerPoolSpecs": "replica_count, machine_type and the accelerator fields",
    "displayName": "display_name",
    "machineType": "machine_type",
    "region": "location",
}

_short_repr = reprlib.Repr()
_short_repr.maxstring = 60
_short_repr.maxother = 60
# Nested values (lists of lists from YAML aliases) stay one short line in a message.
_short_repr.maxlevel = 2
_short_repr.maxlist = _short_repr.maxdict = 4
_SHOWN_CHARS = 100


def _shown(value: Any) -> str:
    text = _short_repr.repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model whose fields the mapping at `loc` holds (for did-you-mean on unknown keys)."""
    nested: dict[str, type[BaseModel]] = {
        "trainer": TrainerSpec,
        "build": BuildSpec,
        "tuning": TuningSpec,
        "recovery": RecoverySpec,
    }
    if not loc:
        return JobTemplate
    if len(loc) == 1 and isinstance(loc[0], str):
        return nested.get(loc[0])
    if len(loc) == 3 and loc[:2] == ("tuning", "parameter_spec"):
        return ParameterSpec
    if len(loc) == 3 and loc[:2] == ("recovery", "fallback"):
        return FallbackSpec
    return None


def _field_description(loc: Loc) -> str | None:
    if not loc:
        return None
    model = _model_at(loc[:-1])
    name = loc[-1]
    if model is None or not isinstance(name, str) or name not in model.model_fields:
        return None
    return model.model_fields[name].description


def _unknown_key_hint(loc: Loc) -> str:
    key = str(loc[-1])
    model = _model_at(loc[:-1])
    if key in _KNOWN_ALIASES and (model is JobTemplate or _KNOWN_ALIASES[key].startswith("trainer") is False):
        return f"vertexdist calls it `{_KNOWN_ALIASES[key]}`"
    if model is None:
        return "remove it"
    fields = list(model.model_fields)
    match = difflib.get_close_matches(key, fields, n=1, cutoff=0.6)
    if match:
        return f"did you mean `{match[0]}`?"
    return "known fields here: " + ", ".join(fields)


# Words of other tools for a choice of ours (SDK spellings, Python type names, abbreviations).
_WORD_ALIASES = {
    "float": "double",
    "real": "double",
    "number": "double",
    "int": "integer",
    "choice": "categorical",
    "str": "categorical",
    "string": "categorical",
    "maximise": "maximize",
    "minimise": "minimize",
}


def _closest_word(value: str, accepted: list[str]) -> str | None:
    """The accepted word meant by `value`: an alias, the only word it begins, or the closest spelling."""
    word = value.strip().lower()
    if _WORD_ALIASES.get(word) in accepted:
        return _WORD_ALIASES[word]
    starting = [a for a in accepted if len(word) >= 2 and a.lower().startswith(word)]
    if len(starting) == 1:
        return starting[0]
    close = difflib.get_close_matches(word, accepted, n=1, cutoff=0.6)
    return close[0] if close else None


def _translate(error: Any) -> tuple[str, str | None]:
    """A pydantic error as (message, hint) in the words of a template author."""
    kind = error["type"]
    loc: Loc = tuple(error["loc"])
    field_hint = _field_description(loc)
    value = error.get("input")
    shown = _shown(value)
    if kind == "extra_forbidden":
        return f"unknown field {str(loc[-1])!r}", _unknown_key_hint(loc)
    if kind == "missing":
        return f"required field {str(loc[-1])!r} is missing", field_hint
    if kind == "path_not_found":
        context = error.get("ctx") or {}
        return str(context.get("message", error["msg"])), context.get("hint") or field_hint
    if kind == "value_error":
        message = str(error["msg"]).removeprefix("Value error, ")
        return message, field_hint
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        return f"{error['msg'].lower()}, got {shown}", field_hint
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"expected a whole number, got {shown}", field_hint
    if kind in ("bool_parsing", "bool_type"):
        return f"expected true or false, got {shown}", field_hint
    if kind in ("string_type",):
        hint = field_hint
        if isinstance(value, bool):
            hint = "quote it: YAML reads yes/no/true/false/on/off as booleans, e.g. '\"true\"'"
        return f"expected a string, got {type(value).__name__} {shown}", hint
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a mapping of fields, got {type(value).__name__} {shown}", field_hint
    if kind == "literal_error":
        accepted = [
            str(c) for c in (error.get("ctx") or {}).get("expected", "").replace("'", "").split(" or ")
        ]
        accepted = [c.strip() for part in accepted for c in part.split(",") if c.strip()]
        close = _closest_word(str(value), accepted)
        return (
            f"{shown} is not one of {', '.join(accepted)}",
            f"did you mean `{close}`?" if close else field_hint,
        )
    if kind in ("list_type",):
        return (
            f"expected a list, got {type(value).__name__} {shown}",
            field_hint or "write it as [a, b] or - a",
        )
    return f"{error['msg']} (got {shown})", field_hint


def _problems_from_validation(exc: ValidationError, file: str, source: SourceMap) -> list[Problem]:
    problems = []
    for error in exc.errors(include_url=False):
        loc: Loc = tuple(p for p in error["loc"] if p != "[key]")
        message, hint = _translate(error)
        pos = source.find(loc, prefer_key=error["type"] == "extra_forbidden")
        problems.append(Problem(file, pos.line, pos.col, _dotted(loc), message, hint))
    return problems


_INDEX = re.compile(r"\[(\d+)\]")


def _loc_of(path: str) -> Loc:
    """`trainer.args[2]` -> ("trainer", "args", 2): the inverse of `_dotted` for rule paths."""
    loc: list[str | int] = []
    for part in path.split(".") if path else ():
        name, *indices = _INDEX.split(part)
        if name:
            loc.append(name)
        loc += [int(i) for i in indices if i]
    return tuple(loc)


class _TooLarge(Exception):
    pass


def _read_template(path: Path) -> str:
    with path.open("rb") as handle:
        data = handle.read(limits.TEMPLATE_FILE_BYTES + 1)
    if len(data) > limits.TEMPLATE_FILE_BYTES:
        raise _TooLarge(f"the file is over {human_size(limits.TEMPLATE_FILE_BYTES)}; not read")
    return data.decode("utf-8")


def broken_link(path: Path) -> str | None:
    """Why `path` is a symlink that cannot be followed (a loop, a missing target); None otherwise."""
    if not path.is_symlink():
        return None
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"is a symlink loop (it points to {os.readlink(path)}, which leads back to it)"
        return f"is a symlink to {os.readlink(path)}, which does not exist"
    return None


def _unreadable(path: Path, exc: OSError) -> str:
    return broken_link(path) or f"cannot read the file: {exc.strerror}"


_Parsed = tuple[dict[str, Any], SourceMap]
# A folder walk parses each YAML file to tell templates from other YAML (`looks_like_a_template`); the parse
# waits here for `inspect_file`, which reads the file again and takes it when the text is the same, so a
# folder's templates are parsed once (half of `validate FOLDER`'s time went to a second parse).
_WALK_PARSES: dict[Path, tuple[str, _Parsed | YamlSourceError]] = {}


def _parse(text: str) -> _Parsed:
    return load_yaml_mapping(text, max_values=limits.YAML_VALUES, max_depth=limits.YAML_DEPTH)


def _parse_once(path: Path, text: str) -> _Parsed:
    """`_parse(text)`, taken from the folder walk's parse of `path` when that was of this same text."""
    kept = _WALK_PARSES.pop(path, None)
    if kept is None or kept[0] != text:
        return _parse(text)
    if isinstance(kept[1], YamlSourceError):
        raise kept[1]
    return kept[1]


def inspect_file(path: str | Path) -> tuple[JobTemplate | None, list[Problem]]:
    """Load one template and return it (None if it has errors) with every error and warning found."""
    file = str(path)
    try:
        text = _read_template(Path(path))
    except UnicodeDecodeError as exc:
        return None, [Problem(file, 1, 1, "", f"not UTF-8 text ({exc.reason})", "save the file as UTF-8")]
    except _TooLarge as exc:
        return None, [Problem(file, 1, 1, "", str(exc), "a template is a few KiB: is this the right file?")]
    except OSError as exc:
        return None, [Problem(file, 1, 1, "", _unreadable(Path(path), exc), None)]
    try:
        data, source = _parse_once(Path(path), text)
    except YamlSourceError as exc:
        return None, [Problem(file, exc.position.line, exc.position.col, exc.path, exc.message, exc.hint)]
    if any(not isinstance(key, str) for key in data):
        bad = next(key for key in data if not isinstance(key, str))
        return None, [
            Problem(file, 1, 1, str(bad), f"field names must be text, got {bad!r}", "write `name: value`")
        ]
    base_dir = Path(path).resolve().parent
    context = {"base_dir": base_dir, "skip_rules": True}
    try:
        template = JobTemplate.model_validate(data, context=context)
    except ValidationError as exc:
        return None, _problems_of_a_broken_template(exc, data, context, file, source)
    template._source_path = Path(path).resolve()
    problems = _rule_problems(check_template(template), file, source)
    has_errors = any(p.severity == "error" for p in problems)
    return (None if has_errors else template), problems


# Setting failed parts aside can reach checks that did not run (a model's own check after its fields'):
# a few rounds find those; each sets more aside, so it ends.
_ROUNDS = 4


def _problems_of_a_broken_template(
    exc: ValidationError, data: dict[str, Any], context: dict[str, Any], file: str, source: SourceMap
) -> list[Problem]:
    """The field errors, those found once they are set aside, and the rules that do not need them."""
    problems = _problems_from_validation(exc, file, source)
    errors = exc.errors(include_url=False)
    unreadable: set[Loc] = set()
    for _round in range(_ROUNDS):
        aside = partial.set_aside(JobTemplate, data, errors)
        if aside is None:
            break
        data, newly = aside
        unreadable |= newly
        try:
            rest = JobTemplate.model_validate(data, context=context)
        except ValidationError as again:
            seen = {(p.path, p.message) for p in problems}
            problems += [
                p for p in _problems_from_validation(again, file, source) if (p.path, p.message) not in seen
            ]
            errors = again.errors(include_url=False)
            continue
        problems += _rule_problems(partial.run_rules(RULES, rest, unreadable), file, source)
        break
    return sorted(problems, key=lambda p: (p.line, p.col))


def _rule_problems(findings: list[Finding], file: str, source: SourceMap) -> list[Problem]:
    problems = []
    for finding in findings:
        pos = source.find(_loc_of(finding.path), prefer_key=finding.on_key)
        problems.append(
            Problem(file, pos.line, pos.col, finding.path, finding.message, finding.hint, finding.severity)
        )
    problems.sort(key=lambda p: (p.line, p.col))
    return problems


def _close_templates(path: Path, otherwise: str) -> str:
    """`did you mean 'DIR/cpu-small.yaml'?` for a template file that is not there: the .yaml files of its
    folder with a name close to its; else `otherwise`."""
    try:
        near = sorted(p for p in path.parent.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    except OSError:
        return otherwise
    stems = {p.stem: p for p in near}
    found = difflib.get_close_matches(path.stem, list(stems), n=2, cutoff=0.75)
    if not found:
        return otherwise
    return "did you mean " + " or ".join(repr(str(stems[stem])) for stem in found) + "?"


def load_template(path: str | Path) -> JobTemplate:
    """Load and validate one template; raises TemplateError with every error (file, line, column, field)."""
    if Path(path).is_dir():
        raise UsageError(f"{path}: is a folder, not a template file", hint="pass one .yaml template")
    if not Path(path).is_file():
        broken = broken_link(Path(path))
        if broken is not None:
            raise UsageError(
                f"{path}: {broken}", hint="point the link at a template, or pass the file itself"
            )
        raise UsageError(
            f"{path}: no such template file",
            hint=_close_templates(Path(path), "pass the path of a .yaml template"),
        )
    template, problems = inspect_file(path)
    errors = [p for p in problems if p.severity == "error"]
    if template is None or errors:
        raise TemplateError(problems=errors)
    return template


# In a folder walk, a YAML file is taken for a template when at least this share of its top-level keys are
# template fields (a template with a typo or two still is; cloudbuild.yaml, mkdocs.yml, CI files are not).
_TEMPLATE_KEY_SHARE = 0.5
# A folder of this name holds templates only: every YAML file in it is checked, whatever it holds.
TEMPLATE_FOLDER = "job_templates"


@dataclass(frozen=True)
class FoundTemplates:
    """The template files under some paths, and the YAML files a folder walk passed over as no templates."""

    files: list[Path]
    skipped: list[Path]


def looks_like_a_template(path: Path) -> bool:
    """Whether a YAML file met in a folder walk is a job template: its top level names template fields
    (half of its keys at least), it sits in a `job_templates` folder, or it cannot be read as YAML (so a
    broken template is reported, never passed over)."""
    if TEMPLATE_FOLDER in path.parts[:-1]:
        return True
    try:
        text = _read_template(path)
    except (OSError, UnicodeDecodeError, _TooLarge):
        return True
    try:
        parsed = _parse(text)
    except YamlSourceError as exc:
        _WALK_PARSES[path] = (text, exc)
        return "top level must be a mapping" not in exc.message
    _WALK_PARSES[path] = (text, parsed)
    data = parsed[0]
    fields = JobTemplate.model_fields
    return sum(key in fields for key in data) >= _TEMPLATE_KEY_SHARE * len(data)


def _walk(folder: Path) -> Iterator[Path]:
    """YAML files under `folder`, hidden folders (.git, .venv, .vertexdist) not searched; a link named like
    a template that leads nowhere is kept (reading it reports why)."""
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            path = Path(root) / name
            if path.suffix in TEMPLATE_SUFFIXES and (path.is_file() or broken_link(path) is not None):
                yield path


def find_templates(paths: list[str] | list[Path] | tuple[str | Path, ...]) -> FoundTemplates:
    """Template files under `paths`: each file named, and the YAML files of each folder that look like
    templates (`looks_like_a_template`); a missing path is a usage error."""
    files: list[Path] = []
    skipped: list[Path] = []
    _WALK_PARSES.clear()  # an earlier walk's parses that no inspect_file took
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for found in sorted(_walk(path)):
                if broken_link(found) is not None or looks_like_a_template(found):
                    files.append(found)
                else:
                    skipped.append(found)
        elif path.is_file():
            files.append(path)
        else:
            broken = broken_link(path)
            otherwise = "pass template files or folders that hold them"
            raise UsageError(
                f"{raw}: {broken or 'no such file or folder'}",
                hint=otherwise if broken else _close_templates(path, otherwise),
            )
    return FoundTemplates(files, skipped)


def template_files(paths: list[str] | list[Path] | tuple[str | Path, ...]) -> list[Path]:
    """Template files under `paths` (see `find_templates`)."""
    return find_templates(paths).files


def check_paths(paths: list[str] | list[Path] | tuple[str | Path, ...]) -> list[Problem]:
    """Every error and warning in the templates under `paths` (files and folders), in file order."""
    problems: list[Problem] = []
    for file in template_files(paths):
        problems.extend(inspect_file(file)[1])
    return problems
