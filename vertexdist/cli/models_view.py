"""The text of `vertexdist models ...`: one line per model or version, and one model version in full."""

from __future__ import annotations

from typing import Any

from vertexdist.cli.plain_text import cell


def _aliases(model: dict[str, Any]) -> str:
    aliases = model.get("versionAliases")
    return ",".join(str(a) for a in aliases) if isinstance(aliases, list) and aliases else "-"


MODEL_HEADER = ("ID", "DISPLAY NAME", "VERSION", "ALIASES", "CREATED")
VERSION_HEADER = ("VERSION", "ALIASES", "CREATED", "ARTIFACTS")


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """The header over the rows, each column as wide as its widest cell; none without rows."""
    if not rows:
        return []
    cells = [header, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header) - 1)]
    return [
        "  ".join([*(text.ljust(width) for text, width in zip(row, widths, strict=False)), row[-1]])
        for row in cells
    ]


def model_row(model: dict[str, Any]) -> tuple[str, ...]:
    """A listed model (its default version), in MODEL_HEADER's columns."""
    ident = str(model.get("name", "")).rsplit("/", 1)[-1]
    return (
        cell(ident),
        cell(str(model.get("displayName", ""))),
        cell(f"v{model.get('versionId', '?')}"),
        cell(_aliases(model)),
        cell(str(model.get("createTime", ""))),
    )


def model_table(models: list[dict[str, Any]]) -> list[str]:
    """`vertexdist models list`: a header, then a line per model."""
    return _table(MODEL_HEADER, [model_row(m) for m in models])


def version_row(model: dict[str, Any]) -> tuple[str, ...]:
    """One version of a model, in VERSION_HEADER's columns."""
    return (
        cell(str(model.get("versionId", "?"))),
        cell(_aliases(model)),
        cell(str(model.get("versionCreateTime", ""))),
        cell(str(model.get("artifactUri", "-"))),
    )


def version_table(versions: list[dict[str, Any]]) -> list[str]:
    """`vertexdist models versions`: a header, then a line per version, oldest first."""
    return _table(VERSION_HEADER, [version_row(v) for v in versions])


def model_lines(model: dict[str, Any]) -> list[str]:
    """One model version in full: name, version, aliases, where its files are, what serves it, where it
    came from."""
    container = model.get("containerSpec") or {}
    lines = [
        f"{model.get('name', '')}@{model.get('versionId', '?')}",
        f"  display name: {model.get('displayName', '')}",
        f"  version:      {model.get('versionId', '?')} (aliases: {_aliases(model)})",
        f"  created:      {model.get('versionCreateTime') or model.get('createTime', '')}",
        f"  artifacts:    {model.get('artifactUri', '-')}",
        f"  serving:      {container.get('imageUri', '-')}",
    ]
    routes = [f"{key} {container[key]}" for key in ("predictRoute", "healthRoute") if container.get(key)]
    ports = [str(p.get("containerPort")) for p in container.get("ports") or []]
    if routes or ports:
        lines.append(f"  routes:       {', '.join(routes) or '-'}; ports: {', '.join(ports) or '-'}")
    for key, label in (("description", "description"), ("versionDescription", "version note")):
        if model.get(key):
            lines.append(f"  {label + ':':<13} {model[key]}")
    if model.get("trainingPipeline"):
        lines.append(f"  made by:      {model['trainingPipeline']}")
    labels = model.get("labels") or {}
    if isinstance(labels, dict) and labels:
        lines.append("  labels:       " + ", ".join(f"{k}={v}" for k, v in sorted(labels.items(), key=str)))
    return [cell(line) for line in lines]
