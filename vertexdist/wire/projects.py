"""A project's number, as the emulator and local runs give it (pure).

Google Cloud knows a project by its id (`my-project`) and by a number (`123456789012`) that Resource Manager
gives out (https://cloud.google.com/resource-manager/docs/creating-managing-projects#identifying_projects).
Offline there is no Resource Manager to ask, so every part that shows a number (a replica's metadata server,
the emulator's Resource Manager `projects.get`, a bucket's `projectNumber`) derives the same one from the id.
"""

from __future__ import annotations

import hashlib


def project_number(project_id: str) -> str:
    """A stable 12-digit stand-in for the project number of `project_id` (the same on every machine)."""
    digest = int(hashlib.sha256(project_id.encode()).hexdigest(), 16)
    return str(10**11 + digest % (9 * 10**11))
