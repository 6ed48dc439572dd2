"""Size and character limits a Vertex request must keep, as data, and the rules that check them.

Vertex documents few of these for CustomJobs, so each figure names where it comes from:
- `ENV_VARS`: "At most 100 environment variables can be specified" (the `env` field of ContainerSpec /
  PythonPackageSpec, https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec).
- `REQUEST_BYTES`: not documented for CustomJob. Google's API front end refuses a bigger body with
  `400 Request payload size exceeds the limit: N bytes`; N was 1572864 (1.5 MiB) for AI Platform, Vertex's
  predecessor (GoogleCloudPlatform/python-docs-samples#1247), and is 10 MiB for some other APIs
  (googleworkspace/dotnet-samples#23). We hold requests to the smaller figure.
- `ARG_BYTES`, `ENV_ENTRY_BYTES`: every replica starts its module with execve(2) on a Linux VM, where one
  argument or one `NAME=value` environment string is at most MAX_ARG_STRLEN = 32 pages = 131072 bytes,
  NUL included (execve(2), "Limits on size of arguments and environment"); a longer one fails with E2BIG
  when the replica starts, long after submit.
- A NUL byte cannot be inside an argument or environment string (they are NUL-terminated C strings).
  Other control characters pass through proto-JSON and execve unchanged, so they are allowed; text that
  is not UTF-8 (a lone surrogate) is refused by the models already.
The request size is measured on the rendered request as compact JSON with placeholder URIs, a lower bound
of what the client sends, so a template refused here is refused by Vertex too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from vertexdist.sizes import human_size
from vertexdist.spec.findings import Finding

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

KiB = 1024
MiB = 1024 * KiB

ENV_VARS = 100
REQUEST_BYTES = 1_572_864
ARG_BYTES = 128 * KiB - 1
ENV_ENTRY_BYTES = 128 * KiB - 1
# Not Vertex's: bounds on what the loader reads before any rule runs. A template is a few KiB; this is
# far above any that renders under REQUEST_BYTES, so the rules still name an oversized field, while a
# file of gigabytes is never read.
TEMPLATE_FILE_BYTES = 64 * MiB
# YAML values after aliases are expanded (a use of `*anchor` counts the anchored values again): a
# template has a few hundred; a billion-laughs document has billions.
YAML_VALUES = 100_000
# Nesting levels of YAML values: a template has four or five; deeper ones would exhaust Python's stack.
YAML_DEPTH = 100


def _utf8_len(text: str) -> int:
    return len(text.encode())


def _arg_fields(t: JobTemplate) -> Iterator[tuple[str, str]]:
    """(field path, the string a replica's execve receives) for each argument and environment entry."""
    for index, arg in enumerate(t.trainer.args):
        yield f"trainer.args[{index}]", arg
    for name, value in t.trainer.env.items():
        yield f"trainer.env.{name}", f"{name}={value}"


def _over_field_limit(path: str, text: str) -> bool:
    limit = ARG_BYTES if path.startswith("trainer.args") else ENV_ENTRY_BYTES
    return _utf8_len(text) > limit


def arg_and_env_lengths(t: JobTemplate) -> Iterator[Finding]:
    for path, text in _arg_fields(t):
        if not _over_field_limit(path, text):
            continue
        what = "argument" if path.startswith("trainer.args") else "environment entry NAME=value"
        yield Finding(
            path,
            f"this {what} is {human_size(_utf8_len(text))}; a replica's process takes at most"
            f" {human_size(ARG_BYTES + 1)} per {what.split()[0]} (execve limit on Vertex's Linux VMs)",
            "put large data in a file (e.g. in Cloud Storage) and pass its path instead",
        )


def nul_characters(t: JobTemplate) -> Iterator[Finding]:
    for path, text in _arg_fields(t):
        at = text.find("\x00")
        if at < 0:
            continue
        is_env = path.startswith("trainer.env.")
        if is_env:
            at -= text.index("=") + 1
        what = "an environment value" if is_env else "a process argument"
        yield Finding(
            path,
            f"holds a NUL character (\\x00) at position {at}; {what} cannot hold one",
            "remove it; in double-quoted YAML, \\0 and \\x00 are NUL",
        )


def request_size(t: JobTemplate) -> Iterator[Finding]:
    if any(_over_field_limit(path, text) for path, text in _arg_fields(t)):
        return  # reported per field, where it can be fixed
    from vertexdist.render import render_request

    request = render_request(t)
    size = len(
        json.dumps(request, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    )
    if size > REQUEST_BYTES:
        pools = 2 if t.replica_count > 1 else 1
        yield Finding(
            "trainer",
            f"the request would be {human_size(size)}; Vertex takes at most {human_size(REQUEST_BYTES)}"
            f" (trainer.args and trainer.env are sent once per training pool: {pools} here)",
            "put large data in a file (e.g. in Cloud Storage) and pass its path instead",
        )


RULES: tuple[Callable[[JobTemplate], Iterator[Finding]], ...] = (
    arg_and_env_lengths,
    nul_characters,
    request_size,
)
