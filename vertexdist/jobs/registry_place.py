"""Where `models` and `experiments` look with `--emulator` and no project named (no `--project`, no
GOOGLE_CLOUD_PROJECT): in the projects the emulator's folder holds them in, as `status ID --emulator` finds a
job's project there (`jobs.where`). The shipped templates use `vertexdist-demo`, so a model `submit
--emulator` registered and the experiments guide's runs are there, not in the emulator's own project.

- a model named by its bare id: the project and location of `resources/models/ID.json`;
- an experiment by its name: every place whose metadata store holds that context (files named by the
  SHA-256 of the full name, `emulator.vertex.experiment_store`);
- a list: every place the folder holds models, experiments or jobs in.
Where the folder knows none, the emulator's own project (`LOCAL_PROJECT`, us-central1).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from vertexdist.jobs.where import JobPlace

DEFAULT_LOCATION = "us-central1"
_MODEL_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def _names(folder: Path, collection: str) -> list[str]:
    names = []
    place = folder / "resources" / collection
    for path in sorted(place.glob("*.json")) if place.is_dir() else []:
        try:
            name = json.loads(path.read_text()).get("name")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(name, str) and name.startswith("projects/"):
            names.append(name)
    return names


def _parent(name: str) -> str:
    return "/".join(name.split("/")[:4])


def model_parent(folder: Path, ident: str) -> str | None:
    """`projects/P/locations/L` of the model whose id is `ident`, or None."""
    if not _MODEL_ID.fullmatch(ident):
        return None
    try:
        name = json.loads((folder / "resources" / "models" / f"{ident}.json").read_text()).get("name")
    except (OSError, ValueError, AttributeError):
        return None
    return _parent(name) if isinstance(name, str) and name.startswith("projects/") else None


def experiment_parents(folder: Path, experiment: str) -> list[str]:
    """Every `projects/P/locations/L` whose metadata store holds the experiment `experiment`."""
    stored = folder / "resources" / "experiments"
    found = []
    for parent in sorted({_parent(n) for n in _names(folder, "experiments")}):
        name = f"{parent}/metadataStores/default/contexts/{experiment}"
        if (stored / f"{hashlib.sha256(name.encode()).hexdigest()}.json").is_file():
            found.append(parent)
    return found


def registry_parents(folder: Path) -> list[str]:
    """Every `projects/P/locations/L` the folder holds models, experiments or jobs in, in name order."""
    from vertexdist.emulator.folder import parents

    held = {_parent(n) for collection in ("models", "experiments") for n in _names(folder, collection)}
    return sorted(held | set(parents(folder)))


def _unnamed(place: JobPlace, env: Mapping[str, str]) -> bool:
    return place.emulator_dir is not None and not place.project and not env.get("GOOGLE_CLOUD_PROJECT")


def _places(place: JobPlace, parents: list[str]) -> list[JobPlace]:
    from vertexdist.backends.base import LOCAL_PROJECT

    found = []
    for parent in parents:
        _, project, _, location = parent.split("/")
        if place.location is None or place.location == location:
            found.append(replace(place, project=project, location=location))
    return found or [replace(place, project=LOCAL_PROJECT, location=place.location or DEFAULT_LOCATION)]


def model_places(place: JobPlace, env: Mapping[str, str], ref: str | None) -> list[JobPlace]:
    """Where to look for the model `ref` (a bare id, maybe with @VERSION), or list models (`ref` None)."""
    if not _unnamed(place, env) or (ref and ref.startswith("projects/")):
        return [place]
    assert place.emulator_dir is not None
    if ref is None:
        return _places(place, registry_parents(place.emulator_dir))
    found = model_parent(place.emulator_dir, ref.partition("@")[0].strip())
    return _places(place, [found] if found else [])


def experiment_places(place: JobPlace, env: Mapping[str, str], experiment: str | None) -> list[JobPlace]:
    """Where to look for the experiment `experiment`, or list experiments (`experiment` None)."""
    if not _unnamed(place, env):
        return [place]
    assert place.emulator_dir is not None
    if experiment is None:
        return _places(place, registry_parents(place.emulator_dir))
    return _places(place, experiment_parents(place.emulator_dir, experiment))
