"""An emulator's Vertex endpoint brings its Cloud Storage endpoint with it.

A command given only `--endpoint http://127.0.0.1:PORT` (or VERTEX_API_ENDPOINT) reaches an emulator's Vertex
API; its packages, outputs and TensorBoard files are in that emulator's Cloud Storage, which clients find
through STORAGE_EMULATOR_HOST. When that is not set, the storage endpoint comes from the emulator's folder
(`.vertexdist/emulator`, when the emulator serving it is the one named), else from the emulator itself
(`emulator.folder.ask`). Without it, a call to Cloud Storage would go to Google's and retry for minutes:
`require_storage` refuses at once instead, naming the variable.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from vertexdist.errors import UsageError

if TYPE_CHECKING:
    from vertexdist.backends.config import Target

EMULATOR_DATA_DIR = Path(".vertexdist/emulator")


def _storage_of(endpoint: str, data_dir: Path) -> tuple[str | None, str]:
    """The emulator's storage endpoint, or None and why not."""
    from vertexdist.emulator.folder import NotAnEmulator, ask, served_storage

    found = served_storage(data_dir, endpoint)
    if found is not None:
        return found, ""
    try:
        return ask(endpoint).storage, ""
    except NotAnEmulator as exc:
        return None, f"{endpoint} does not say where its storage is ({exc})"
    except OSError:
        return None, f"nothing answers at {endpoint}"


def with_emulator_storage(target: Target, data_dir: Path = EMULATOR_DATA_DIR) -> Target:
    """`target` with its emulator's storage endpoint; unchanged for Vertex, when STORAGE_EMULATOR_HOST named
    one already, or when the emulator cannot say (its own calls then fail, and `require_storage` names the
    variable)."""
    if not target.is_emulator or target.storage_endpoint or not target.api_endpoint:
        return target
    found, _why = _storage_of(target.api_endpoint, data_dir)
    return replace(target, storage_endpoint=found) if found else target


def require_storage(target: Target, data_dir: Path = EMULATOR_DATA_DIR) -> None:
    """UsageError when `target` is an emulator whose storage endpoint is not known: said at once, not after
    minutes of retries against Google's Cloud Storage."""
    if not target.is_emulator or target.storage_endpoint or not target.api_endpoint:
        return
    _found, why = _storage_of(target.api_endpoint, data_dir)
    if why.startswith("nothing answers"):
        raise UsageError(
            f"{why}, so this emulator's Cloud Storage is not known either (STORAGE_EMULATOR_HOST is not set)",
            hint="start the emulator (vertexdist emulator start) and set VERTEX_API_ENDPOINT and"
            " STORAGE_EMULATOR_HOST to what it prints",
        )
    raise UsageError(
        f"{target.api_endpoint} is an emulator's endpoint, and STORAGE_EMULATOR_HOST is not set"
        + (f" ({why})" if why else ""),
        hint="set STORAGE_EMULATOR_HOST to what `vertexdist emulator start` printed",
    )
