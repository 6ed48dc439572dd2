"""The text of `vertexdist describe JOB`: a run record, one fact a line."""

from __future__ import annotations

from typing import Any

from vertexdist.cli.plain_text import cell


def _code(code: dict[str, Any]) -> str:
    if not code.get("commit"):
        return f"{code.get('folder') or '-'} (not in git)"
    state = "dirty: changes not committed" if code.get("dirty") else "clean"
    return f"{code.get('folder')} at {code['commit']} ({state})"


def record_lines(record: dict[str, Any]) -> list[str]:
    """Job, template, package or image, code, fault plan, attempts, where it came from."""
    template = record.get("template") or {}
    lines = [
        f"{record.get('job', '')}",
        f"  recorded:   {record.get('created', '')}",
        f"  template:   {template.get('path') or '-'}"
        + (" (its text is kept)" if template.get("text") else ""),
    ]
    package, image = record.get("package"), record.get("image")
    if package:
        lines.append(f"  package:    {package.get('uri')}")
        lines.append(f"  sha256:     {package.get('sha256')} ({package.get('size')} bytes)")
    if image:
        lines.append(
            f"  image:      {image.get('uri')}" + (f" ({image['digest']})" if image.get("digest") else "")
        )
    lines.append(f"  code:       {_code(record.get('code') or {})}")
    lines.append(f"  fault plan: {'kept' if record.get('fault_plan') else 'none'}")
    attempts = record.get("attempts") or []
    lines.append(f"  attempts:   {len(attempts)}")
    lines.extend(f"    {attempt}" for attempt in attempts)
    if record.get("rerun_of"):
        lines.append(f"  rerun of:   {record['rerun_of']}")
    lines.append("  see: --template (its text), --request (the request as sent), --json (all of it)")
    return [cell(line) for line in lines]  # the record is the job's bucket's: no escape reaches a terminal
