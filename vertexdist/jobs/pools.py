"""Where `vertexdist pool ...` sends its calls: Vertex by the flags and the environment, or with
`--emulator` the local emulator over its folder (the one serving it, else one started for the command),
where no project need be named: the folder knows each resource's.
A template (`pool create --from`) gives the pools a persistent resource needs to run it, and its project
and region."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.errors import UsageError
from vertexdist.jobs.find import project_backend
from vertexdist.jobs.where import JobPlace, reach

if TYPE_CHECKING:
    from vertexdist.backends.vertex.pools import PersistentResources

NO_PROJECT_HINT = (
    "pass --project PROJECT or set GOOGLE_CLOUD_PROJECT"
    " (`vertexdist pool create ID --from TEMPLATE` takes the template's)"
)


def _unnamed_project(place: JobPlace, env: Mapping[str, str]) -> bool:
    """--emulator and no project named: the emulator's folder says which (as for the job commands)."""
    return place.emulator_dir is not None and not place.project and not env.get("GOOGLE_CLOUD_PROJECT")


def _in_folder(place: JobPlace, ref: str | None) -> JobPlace:
    """The place of `ref` (a bare id) in the emulator's folder; for a new resource, LOCAL_PROJECT's (where
    `submit --emulator` sends a template that names no project)."""
    from vertexdist.backends.base import LOCAL_PROJECT
    from vertexdist.emulator.folder import pool_name

    assert place.emulator_dir is not None
    if ref is None or ref.startswith("projects/"):
        return replace(place, project=LOCAL_PROJECT)
    found = pool_name(place.emulator_dir, ref.strip())
    if found is None:
        raise UsageError(
            f"no persistent resource {ref.strip()} in the emulator's folder {place.emulator_dir}",
            hint=f"its persistent resources: vertexdist pool list{place.flags}",
        )
    _, project, _, location = found.split("/")[:4]
    return replace(place, project=project, location=location)


def _resources(place: JobPlace, env: Mapping[str, str]) -> PersistentResources:
    from vertexdist.backends.vertex.pools import PersistentResources

    backend = project_backend(
        place.project, place.location, place.endpoint, place.transport, env, no_project_hint=NO_PROJECT_HINT
    )
    return PersistentResources(backend.target)


@contextmanager
def open_pools(
    place: JobPlace, env: Mapping[str, str] = os.environ, *, ref: str | None = None
) -> Iterator[PersistentResources]:
    """The persistent resources of the place's project and location (with --emulator and no project: of the
    folder's resource `ref`, or LOCAL_PROJECT's for a new one), usable until the `with` ends."""
    if _unnamed_project(place, env):
        place = _in_folder(place, ref)
    with reach(place, env) as (reached, reached_env):
        yield _resources(reached, reached_env)


@contextmanager
def open_pool_lists(
    place: JobPlace, env: Mapping[str, str] = os.environ
) -> Iterator[list[PersistentResources]]:
    """What `pool list` lists: the place's project and location; with --emulator and no project, every
    project and location of the emulator's folder that holds persistent resources (none: an empty list)."""
    if not _unnamed_project(place, env):
        with open_pools(place, env) as resources:
            yield [resources]
        return
    from vertexdist.emulator.folder import pool_parents

    assert place.emulator_dir is not None
    parents = [p.split("/") for p in pool_parents(place.emulator_dir)]
    wanted = [(p[1], p[3]) for p in parents if place.location is None or place.location == p[3]]
    if not wanted:
        yield []
        return
    with reach(replace(place, project=wanted[0][0]), env) as (reached, reached_env):
        yield [_resources(replace(reached, project=p, location=loc), reached_env) for p, loc in wanted]


def template_pools(path: Path) -> tuple[list[dict[str, Any]], str | None, str | None]:
    """The resource pools that run the template at `path` (its rendered worker pools, one per machine
    shape), and the template's project and location."""
    from vertexdist.render.custom_job import render_job_spec
    from vertexdist.spec.loader import load_template
    from vertexdist.wire.placement import pools_for

    template = load_template(path)
    return pools_for(render_job_spec(template)), template.project, template.location
