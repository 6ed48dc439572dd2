"""Where the job commands (status, list, cancel, logs, trials, outputs) look for a job: Vertex by the flags
and the environment, a local run by its id or folder, or with `emulator_dir` (`--emulator`) the local
emulator over that folder, where `submit --emulator` left its jobs.

The emulator is the one serving the folder now (`vertexdist emulator start`; `emulator.folder` says which),
else one started in this process for the command's length. A bare id needs no project there: the folder's
own files name the job. A printed command that should come back to the same place carries
`JobPlace.flags` (`--emulator`), so every hint works as printed.

    with open_job("1234", JobPlace(emulator_dir=Path(".vertexdist/emulator"))) as (backend, name):
        print(backend.describe(name).state)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from vertexdist.errors import NotFoundError
from vertexdist.jobs.find import job_backend, local_job, project_backend

if TYPE_CHECKING:
    from vertexdist.backends.local import LocalBackend
    from vertexdist.backends.vertex import VertexBackend

EMULATOR_DATA_DIR = Path(".vertexdist/emulator")
NO_PROJECT_HINT = (
    "pass --project PROJECT or set GOOGLE_CLOUD_PROJECT; for a job of `submit --emulator`, add --emulator"
)


@dataclass(frozen=True)
class JobPlace:
    """The job commands' flags: where to look (None fields fall back to the environment)."""

    project: str | None = None
    location: str | None = None
    endpoint: str | None = None
    transport: str | None = None
    emulator_dir: Path | None = None  # --emulator: the local emulator over this folder

    @property
    def flags(self) -> str:
        """What a printed day-two command adds to come back here: ` --emulator` (and its folder)."""
        if self.emulator_dir is None:
            return ""
        if self.emulator_dir.resolve() == EMULATOR_DATA_DIR.resolve():
            return " --emulator"
        return f" --emulator --emulator-data-dir {self.emulator_dir}"


def _folder_served_at(endpoint: str | None) -> Path | None:
    """The default emulator folder when `endpoint` is the emulator serving it (VERTEX_API_ENDPOINT set to
    what `emulator start` printed), so its bare ids resolve as with --emulator."""
    if not endpoint or not endpoint.startswith("http://"):
        return None
    from vertexdist.emulator.folder import serving

    served = serving(EMULATOR_DATA_DIR)
    return EMULATOR_DATA_DIR if served is not None and served.vertex == endpoint.rstrip("/") else None


@contextmanager
def _reach(place: JobPlace, env: Mapping[str, str]) -> Iterator[tuple[JobPlace, Mapping[str, str]]]:
    """The flags and environment to call with: with --emulator, the serving emulator's endpoints, or those
    of one started here until the `with` ends."""
    folder = place.emulator_dir
    if folder is None:
        yield place, env
        return
    from vertexdist.emulator.folder import serving

    served = serving(folder)
    if served is not None:
        yield (
            replace(place, endpoint=served.vertex, transport="rest"),
            {**env, "STORAGE_EMULATOR_HOST": served.storage},
        )
        return
    from vertexdist.emulator import Emulator

    # A few seconds pass before the command's answer: say why, and how to spare them next time.
    print(
        f"starting an emulator over {folder} for this command (a few seconds; `vertexdist emulator start`"
        " keeps one up for every command)",
        file=sys.stderr,
        flush=True,
    )
    with Emulator(data_dir=folder) as emu:
        reached = replace(place, endpoint=emu.vertex_endpoint, transport="rest")
        yield reached, {**env, "STORAGE_EMULATOR_HOST": emu.storage_endpoint}


# The commands beside the job commands (`pool`) reach the same places.
reach = _reach


def _emulator_job_name(job: str, folder: Path, place: JobPlace) -> str:
    from vertexdist.backends.config import check_job_ref, parse_job_name
    from vertexdist.emulator.folder import job_name

    check_job_ref(job)
    if parse_job_name(job):
        return job.strip()
    found = job_name(folder, job.strip())
    if found is None:
        raise NotFoundError(
            f"no job {job.strip()} in the emulator's folder {folder}",
            hint=f"its jobs: vertexdist list{place.flags}",
        )
    return found


@contextmanager
def open_job(
    job: str, place: JobPlace, env: Mapping[str, str] = os.environ
) -> Iterator[tuple[LocalBackend | VertexBackend, str]]:
    """The backend holding `job` (a local run's id or folder, an emulator's or a Vertex job's name or id)
    and the job's full name, usable until the `with` ends."""
    local = local_job(job)
    if local is not None:
        yield local
        return
    folder = place.emulator_dir or _folder_served_at(place.endpoint or env.get("VERTEX_API_ENDPOINT"))
    if folder is not None:
        job = _emulator_job_name(job, folder, place)
    with _reach(place, env) as (reached, reached_env):
        yield job_backend(
            job,
            reached.project,
            reached.location,
            reached.endpoint,
            reached.transport,
            reached_env,
            no_project_hint=NO_PROJECT_HINT,
        )


@contextmanager
def open_projects(place: JobPlace, env: Mapping[str, str] = os.environ) -> Iterator[list[VertexBackend]]:
    """The backends of the project(s) `list` shows: the flags' or the environment's; with --emulator and no
    project named, every project and location the emulator's folder holds jobs of (none: an empty list)."""
    folder = place.emulator_dir
    if folder is None or place.project or env.get("GOOGLE_CLOUD_PROJECT"):
        with _reach(place, env) as (reached, reached_env):
            yield [_backend(reached, reached_env, reached.project, reached.location)]
        return
    from vertexdist.emulator.folder import parents

    found = parents(folder)
    if not found:
        yield []
        return
    with _reach(place, env) as (reached, reached_env):
        backends = []
        for parent in found:
            _, project, _, location = parent.split("/")
            if place.location is None or place.location == location:
                backends.append(_backend(reached, reached_env, project, location))
        yield backends


def _backend(
    place: JobPlace, env: Mapping[str, str], project: str | None, location: str | None
) -> VertexBackend:
    return project_backend(
        project,
        location,
        place.endpoint,
        place.transport,
        env,
        no_project_hint=NO_PROJECT_HINT.replace("for a job of", "for the jobs of"),
    )


@contextmanager
def open_project(
    place: JobPlace, env: Mapping[str, str] = os.environ, *, no_project_hint: str | None = None
) -> Iterator[VertexBackend]:
    """The backend of the place's one project and location (with --emulator, the serving emulator's, or one
    started here), usable until the `with` ends: what `models` and `experiments` call."""
    with reach(place, env) as (reached, reached_env):
        yield project_backend(
            reached.project,
            reached.location,
            reached.endpoint,
            reached.transport,
            reached_env,
            no_project_hint=no_project_hint,
        )


@contextmanager
def open_places(
    places: list[JobPlace], env: Mapping[str, str] = os.environ, *, no_project_hint: str | None = None
) -> Iterator[list[VertexBackend]]:
    """The backends of several projects and locations of one place (one emulator reached, or started, for
    them all), usable until the `with` ends: what `models list` and `experiments` call over the projects
    of the emulator's folder (`jobs.registry_place`)."""
    with reach(places[0], env) as (reached, reached_env):
        yield [
            project_backend(
                place.project,
                place.location,
                reached.endpoint,
                reached.transport,
                reached_env,
                no_project_hint=no_project_hint,
            )
            for place in places
        ]
