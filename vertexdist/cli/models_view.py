"""The text of `vertexdist models ...`: one line per model or version, and one model version in full."""

from __future__ import annotations

from typing import Any

from vertexdist.cli.plain_text import cell


def _aliases(model: dict[str, Any]) -> str:
    aliases = model.get("versionAliases")
    return ",".join(str(a) for a in aliases) if isinstance(aliases, list) and aliases else "-"


def model_row(model: dict[str, Any]) -> str:
    """`ID  DISPLAY NAME  vVERSION  ALIASES  CREATED`: a listed model (its default version)."""
    ident = str(model.get("name", "")).rsplit("/", 1)[-1]
    return cell(
        f"{ident}  {model.get('displayName', '')}  v{model.get('versionId', '?')}  {_aliases(model)}"
        f"  {model.get('createTime', '')}"
    )


def version_row(model: dict[str, Any]) -> str:
    """`VERSION  ALIASES  CREATED  ARTIFACTS`: one version of a model."""
    return cell(
        f"{model.get('versionId', '?')}  {_aliases(model)}  {model.get('versionCreateTime', '')}"
        f"  {model.get('artifactUri', '-')}"
    )


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
