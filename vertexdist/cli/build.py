"""`vertexdist build TEMPLATE [--dry-run] [--local]`: the template's training image, tagged by content hash.

Cloud Build by default (context uploaded to the staging bucket, the Build request from cloudbuild.yaml,
its log followed), or the docker CLI with `--local`. An image whose tag exists is not rebuilt. The image
URI is the one line on stdout; progress goes to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def dry_run_report(plan: Any, *, local: bool) -> dict[str, Any]:
    """What `--dry-run` prints: the context's files, its hash, the image and the build it would run."""
    from vertexdist.container.docker import docker_build_argv, docker_push_argv

    report: dict[str, Any] = {
        "context": str(plan.context.root),
        "dockerfile": plan.context.dockerfile,
        "files": [{"path": e.path, "size": e.size} for e in plan.context.entries],
        "total_bytes": plan.context.total_bytes,
        "excluded": [{"path": x.path, "reason": x.reason} for x in plan.context.excluded],
        "content_hash": f"sha256:{plan.content_hash}",
        "image": plan.image_uri,
        "build_args": dict(plan.build_args),
    }
    if local:
        report["docker"] = [
            docker_build_argv(plan.image_uri, plan.context.dockerfile, plan.build_args),
            docker_push_argv(plan.image_uri),
        ]
    else:
        report["context_uri"] = plan.context_uri
        report["cloudbuild_config"] = str(plan.config_path)
        report["request"] = plan.request
    return report


def _print_dry_run(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    from vertexdist.sizes import human_size

    typer.echo(f"context: {report['context']} (Dockerfile: {report['dockerfile']})")
    typer.echo(f"files ({len(report['files'])}, {human_size(report['total_bytes'])}):")
    for f in report["files"]:
        typer.echo(f"  {f['path']}  ({human_size(f['size'])})")
    if report["excluded"]:
        typer.echo("excluded:")
        for x in report["excluded"]:
            typer.echo(f"  {x['path']}  [{x['reason']}]")
    typer.echo(f"content hash: {report['content_hash']}")
    typer.echo(f"image: {report['image']}")
    if "docker" in report:
        typer.echo("docker commands (context tarball on stdin):")
        for argv in report["docker"]:
            typer.echo("  " + " ".join(argv))
    else:
        typer.echo(f"context upload: {report['context_uri']}")
        typer.echo(f"Cloud Build request (from {report['cloudbuild_config']}):")
        typer.echo(json.dumps(report["request"], indent=2))


def build(
    template: Path = typer.Argument(..., help="The job template (YAML) with a `build` section."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the context files, the hash and the Build request; build nothing."
    ),
    local: bool = typer.Option(
        False, "--local", help="Build and push with the docker CLI instead of Cloud Build."
    ),
    max_context_size: str = typer.Option(
        "256M", "--max-context-size", help="Refuse a larger build context (e.g. 512M, 1G)."
    ),
    as_json: bool = typer.Option(False, "--json", help="With --dry-run: print one JSON object."),
) -> None:
    """Build TEMPLATE's training image (tagged with its content hash) unless that tag exists."""
    from vertexdist.container.context import parse_size
    from vertexdist.container.ensure import ensure_image, plan_build
    from vertexdist.spec import load_template

    limit = parse_size(max_context_size)
    loaded = load_template(template)
    plan = plan_build(loaded, max_context_bytes=limit)
    if dry_run:
        _print_dry_run(dry_run_report(plan, local=local), as_json)
        return
    _progress(f"context: {len(plan.context.entries)} files, content hash sha256:{plan.content_hash}")
    result = ensure_image(loaded, local=local, log=_progress, plan=plan)
    typer.echo(result.image_uri)


def register(app: typer.Typer) -> None:
    app.command("build")(build)
