"""Code that ships with every job and runs on the replicas, on Vertex as here: it never imports vertexdist.

`vertexdist_launcher/` is copied as a top-level package into every Python-package sdist (`packaging`) and
into the training image (the Dockerfile), so `python -m vertexdist_launcher ...` runs wherever the job does.
"""

from __future__ import annotations

from pathlib import Path

LAUNCHER_PACKAGE = "vertexdist_launcher"
LAUNCHER_DIR = Path(__file__).resolve().parent / LAUNCHER_PACKAGE
