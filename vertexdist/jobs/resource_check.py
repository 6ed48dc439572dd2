"""`validate --check-resources` and `submit`'s pre-check: read the persistent resource a template names
(`persistent_resource_id:`) through the backend (Vertex, or the emulator) and say, at the field's line, what
of the job does not fit it (region, state, machine shape, replicas) and what would
(`wire.placement.resource_problems`, the rule the emulator refuses a job by)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.errors import Problem
from vertexdist.jobs.pools import open_pools
from vertexdist.jobs.where import JobPlace

if TYPE_CHECKING:
    from vertexdist.backends.vertex.pools import PersistentResources
    from vertexdist.spec.models import JobTemplate

FIELD = "persistent_resource_id"


def field_position(path: Path) -> tuple[int, int]:
    """Line and column of `persistent_resource_id:`'s value in the template file (1, 1 if not found)."""
    from vertexdist.spec import limits
    from vertexdist.spec.yaml_source import load_yaml_mapping

    try:
        _data, source = load_yaml_mapping(
            path.read_text(encoding="utf-8"), max_values=limits.YAML_VALUES, max_depth=limits.YAML_DEPTH
        )
    except (OSError, ValueError):
        return 1, 1
    pos = source.find((FIELD,))
    return pos.line, pos.col


def check_resource(path: Path, template: JobTemplate, place: JobPlace) -> list[Problem]:
    """The problems of running `template` (loaded from `path`) on its persistent resource, read from where
    `place` says (Vertex, an endpoint, the emulator); [] when it fits or names none."""
    if template.persistent_resource_id is None:
        return []
    place = replace(
        place, project=place.project or template.project, location=place.location or template.location
    )
    with open_pools(place) as resources:
        return resource_fit(path, template, resources, place.flags)


def resource_fit(
    path: Path, template: JobTemplate, resources: PersistentResources, flags: str = ""
) -> list[Problem]:
    """The problems of running `template` on its persistent resource among `resources` (a project and
    location's); a resource that is not there is one. A backend that cannot be reached raises."""
    from vertexdist.backends.errors import ApiCallError
    from vertexdist.render.custom_job import render_job_spec
    from vertexdist.wire.placement import describe_pools, pools_for, resource_problems

    ident = template.persistent_resource_id
    if ident is None:
        return []
    line, col = field_position(path)
    spec: dict[str, Any] = render_job_spec(template)
    needed = describe_pools(pools_for(spec))
    name = resources.name_of(ident)
    try:
        found = resources.get(ident)
    except ApiCallError as exc:
        if exc.status != 404:
            raise
        hint = f"create it: vertexdist pool create {ident} --from {path}{flags} (it holds {needed})"
        message = f"persistent resource {ident!r} does not exist ({name})"
        return [Problem(str(path), line, col, FIELD, message, hint)]
    problems = resource_problems(spec, found, resources.target.location)
    if not problems:
        return []
    held = describe_pools(found.get("resourcePools") or []) or "no pools"
    hint = (
        f"the job needs {needed}; {ident!r} holds {held}: fit the template's pools to it, or make one that"
        f" fits: vertexdist pool create NEW-ID --from {path}{flags}"
    )
    return [Problem(str(path), line, col, FIELD, "; ".join(problems), hint)]
