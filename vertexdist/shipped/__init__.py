"""Code that ships with every job and runs on the replicas, on Vertex as here: it never imports vertexdist.

`vertexdist_launcher/` is copied as a top-level package into every Python-package sdist (`packaging`) and
into the training image (the Dockerfile), so `python -m vertexdist_launcher ...` runs wherever the job does.
"""

from __future__ import annotations

from pathlib import Path

LAUNCHER_PACKAGE = "vertexdist_launcher"
# `python -m vertexdist_launcher.watched -m MODULE ARGS`: the user's own module under `launcher: python`, with
# the rank's health watcher started first (what a rendered Python-package request runs).
WATCHED_MODULE = f"{LAUNCHER_PACKAGE}.watched"
LAUNCHER_DIR = Path(__file__).resolve().parent / LAUNCHER_PACKAGE
