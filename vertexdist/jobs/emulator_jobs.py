"""The jobs an emulator's data folder holds, for readers beside the job commands (the console): which
projects and regions hold jobs, and a job's full name by its collection and id (`emulator.folder` reads the
folder's files; nothing is started)."""

from __future__ import annotations

from pathlib import Path


def job_parents(data_dir: Path) -> list[str]:
    """The `projects/P/locations/L` of every job in the folder, each once, in name order."""
    from vertexdist.emulator.folder import parents

    return parents(data_dir)


def job_resource_name(data_dir: Path, collection: str, ident: str) -> str | None:
    """The full name of the job `collection/ident` (e.g. `customJobs`, `123`) in the folder, or None."""
    from vertexdist.emulator.folder import resource_name

    return resource_name(data_dir, collection, ident)
