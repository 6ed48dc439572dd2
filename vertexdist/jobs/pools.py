"""Where `vertexdist pool ...` sends its calls: Vertex by the flags and the environment, or with
`--emulator` the local emulator over its folder (the one serving it, else one started for the command).
A template (`pool create --from`) gives the pools a persistent resource needs to run it, and its project
and region."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.jobs.find import project_backend
from vertexdist.jobs.where import JobPlace, reach

if TYPE_CHECKING:
    from vertexdist.backends.vertex.pools import PersistentResources

NO_PROJECT_HINT = (
    "pass --project PROJECT or set GOOGLE_CLOUD_PROJECT"
    " (`vertexdist pool create ID --from TEMPLATE` takes the template's)"
)


@contextmanager
def open_pools(place: JobPlace, env: Mapping[str, str] = os.environ) -> Iterator[PersistentResources]:
    """The persistent resources of the place's project and location, usable until the `with` ends."""
    from vertexdist.backends.vertex.pools import PersistentResources

    with reach(place, env) as (reached, reached_env):
        backend = project_backend(
            reached.project,
            reached.location,
            reached.endpoint,
            reached.transport,
            reached_env,
            no_project_hint=NO_PROJECT_HINT,
        )
        yield PersistentResources(backend.target)


def template_pools(path: Path) -> tuple[list[dict[str, Any]], str | None, str | None]:
    """The resource pools that run the template at `path` (its rendered worker pools, one per machine
    shape), and the template's project and location."""
    from vertexdist.render.custom_job import render_job_spec
    from vertexdist.spec.loader import load_template
    from vertexdist.wire.placement import pools_for

    template = load_template(path)
    return pools_for(render_job_spec(template)), template.project, template.location
