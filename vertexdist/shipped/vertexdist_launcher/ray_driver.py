"""The driver on the Ray head: `python -m vertexdist_launcher.ray_driver (-m MODULE | SCRIPT) ARGS`.

It ties itself to the launcher (killed if the launcher dies), leaves Ray's noise out of its output
(`ray_output`), starts a health watcher that reports the driver as a rank of its own (rank 0 of 1, role
"ray driver": where its main thread is, so a local job silent for long names the frame it waits in; it
never steps, so no hang clock starts for it), then runs the user's code exactly as `python -m MODULE
ARGS` would; an exception that ends it goes to the launcher's error file, whose last line the head's
failure message shows.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from . import health
from .options import LauncherUsageError, parse_target
from .ray_output import edit_driver_output
from .worker import record_error, run_target, watch_parent

ERROR_FILE_VARIABLE = "VERTEXDIST_DRIVER_ERROR_FILE"
DRIVER = "ray driver"


def read_error(path: str) -> str:
    """The message the driver recorded (empty when it recorded none)."""
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return ""
    message = data.get("message", {}) if isinstance(data, dict) else {}
    return str(message.get("message", "")) if isinstance(message, dict) else str(message)


def main(argv: Sequence[str]) -> None:
    watch_parent(os.environ)
    error_file = os.environ.pop(ERROR_FILE_VARIABLE, None)
    try:
        target = parse_target(argv)
    except LauncherUsageError as exc:
        print(f"vertexdist_launcher.ray_driver: {exc}", file=sys.stderr)
        sys.exit(2)
    edit_driver_output()
    health.start(
        {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", health.ROLE_VARIABLE: DRIVER}
    )
    try:
        run_target(target)
    except Exception as exc:
        record_error(exc, {ERROR_FILE_VARIABLE: error_file or ""}, ERROR_FILE_VARIABLE)
        raise


if __name__ == "__main__":
    main(sys.argv[1:])
