"""Where `vertexdist models ...` sends its calls: Vertex by the flags and the environment, or with
`--emulator` the local emulator over its folder (the one serving it, else one started for the command),
as the job commands reach them (`jobs.where`)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from vertexdist.jobs.where import JobPlace, open_places, open_project

if TYPE_CHECKING:
    from vertexdist.backends.vertex.models import RegisteredModels

NO_PROJECT_HINT = (
    "pass --project PROJECT or set GOOGLE_CLOUD_PROJECT; for the emulator's models, add --emulator"
)


def place_of(ref: str | None, place: JobPlace) -> JobPlace:
    """A full model name names its own project and location, over the flags."""
    from dataclasses import replace

    if ref and ref.startswith("projects/"):
        parts = ref.partition("@")[0].split("/")
        if len(parts) == 6 and parts[2] == "locations" and parts[4] == "models":
            return replace(place, project=parts[1], location=parts[3])
    return place


@contextmanager
def open_models(place: JobPlace, env: Mapping[str, str] = os.environ) -> Iterator[RegisteredModels]:
    """The models of the place's project and location, usable until the `with` ends."""
    from vertexdist.backends.vertex.models import RegisteredModels

    with open_project(place, env, no_project_hint=NO_PROJECT_HINT) as backend:
        yield RegisteredModels(backend.target)


@contextmanager
def open_models_at(
    places: list[JobPlace], env: Mapping[str, str] = os.environ
) -> Iterator[list[RegisteredModels]]:
    """The models of each place (`jobs.registry_place.model_places`), usable until the `with` ends."""
    from vertexdist.backends.vertex.models import RegisteredModels

    with open_places(places, env, no_project_hint=NO_PROJECT_HINT) as backends:
        yield [RegisteredModels(backend.target) for backend in backends]
