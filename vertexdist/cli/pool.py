"""`vertexdist pool create|list|describe|delete`: Vertex persistent resources (reserved, warm clusters that a
template's `persistent_resource_id:` runs on without provisioning), on Vertex or in the emulator.

`pool create ID --from TEMPLATE` reserves what the template needs (one pool per machine shape, every replica
of it); `--machine-type` etc. name one pool by hand. Exit codes: 0 fine; 1 the call failed; 2 usage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from vertexdist.cli.targets import (
    EMULATOR_DATA_DIR,
    AsJson,
    EmulatorDataDir,
    Endpoint,
    Transport,
    UseEmulator,
)
from vertexdist.errors import UsageError
from vertexdist.jobs.where import JobPlace

pool_app = typer.Typer(
    help="Persistent resources: reserved clusters that jobs start on without provisioning.",
    no_args_is_help=True,
)
PoolRef = Annotated[
    str, typer.Argument(help="The persistent resource's id, or its full name (projects/P/locations/L/...).")
]
Project = Annotated[
    str | None,
    typer.Option(
        "--project",
        help="Google Cloud project (default: --from's, then GOOGLE_CLOUD_PROJECT; with --emulator, a new"
        " resource's is vertexdist-local, and the emulator's folder knows the others').",
    ),
]
Location = Annotated[
    str | None,
    typer.Option("--location", help="Vertex region (default: --from's, then GOOGLE_CLOUD_REGION)."),
]


def _place(
    project: str | None,
    location: str | None,
    endpoint: str | None,
    transport: str | None,
    emulator: bool,
    emulator_data_dir: Path,
    ref: str | None = None,
) -> JobPlace:
    if emulator and endpoint:
        raise UsageError(
            "--emulator and --endpoint both say where to look", hint="drop one: --emulator is the local one"
        )
    if ref and ref.startswith("projects/"):
        parts = ref.split("/")
        if len(parts) != 6 or parts[2] != "locations" or parts[4] != "persistentResources":
            raise UsageError(
                f"{ref!r} is not a persistent resource name",
                hint="use projects/P/locations/L/persistentResources/ID, or the bare ID",
            )
        project, location = parts[1], parts[3]
    return JobPlace(project, location, endpoint, transport, emulator_data_dir if emulator else None)


def _pool_line(pool: dict[str, Any]) -> str:
    machine = pool.get("machineSpec") or {}
    shape = str(machine.get("machineType", "?"))
    if machine.get("acceleratorType"):
        shape += f" + {machine.get('acceleratorCount', 1)} x {machine['acceleratorType']}"
    used = pool.get("usedReplicaCount", "0")
    return f"  pool {pool.get('id', '?')}: {pool.get('replicaCount', '0')} x {shape} ({used} in use)"


def _show(resource: dict[str, Any]) -> None:
    typer.echo(f"{resource['name']}  {resource.get('state', 'STATE_UNSPECIFIED')}")
    if resource.get("displayName"):
        typer.echo(f"  display name: {resource['displayName']}")
    for pool in resource.get("resourcePools") or []:
        typer.echo(_pool_line(pool))
    if resource.get("error"):
        typer.echo(f"  error: {resource['error'].get('message', resource['error'])}")


def create(
    ident: Annotated[str, typer.Argument(help="The new resource's id: 1-63 of a-z, 0-9, -.")],
    from_template: Annotated[
        Path | None,
        typer.Option("--from", help="Reserve what this template needs (its pools' machines and replicas)."),
    ] = None,
    machine_type: Annotated[
        str | None, typer.Option("--machine-type", help="One pool by hand: its machine type.")
    ] = None,
    replica_count: Annotated[
        int, typer.Option("--replica-count", min=1, help="With --machine-type: how many machines.")
    ] = 1,
    accelerator_type: Annotated[
        str | None, typer.Option("--accelerator-type", help="With --machine-type, e.g. NVIDIA_TESLA_A100.")
    ] = None,
    accelerator_count: Annotated[
        int, typer.Option("--accelerator-count", min=0, help="With --accelerator-type: GPUs per machine.")
    ] = 1,
    display_name: Annotated[str | None, typer.Option("--display-name", help="A name people read.")] = None,
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Create a persistent resource (waits until Vertex has provisioned it)."""
    from vertexdist.backends.vertex.pools import create_body
    from vertexdist.jobs.pools import open_pools, template_pools
    from vertexdist.spec.rules import persistent_resource_id_problem

    problem = persistent_resource_id_problem(ident)
    if problem is not None:
        raise UsageError(problem[0], hint=problem[1])
    if (from_template is None) == (machine_type is None):
        raise UsageError(
            "say what to reserve: --from TEMPLATE or --machine-type (one of them)",
            hint="e.g. vertexdist pool create warm-1 --from job_templates/a2-4g-x2.yaml",
        )
    if from_template is not None:
        pools, t_project, t_location = template_pools(from_template)
        project, location = project or t_project, location or t_location
    else:
        spec: dict[str, Any] = {"machineType": machine_type}
        if accelerator_type:
            spec.update(acceleratorType=accelerator_type, acceleratorCount=accelerator_count)
        pools = [{"machineSpec": spec, "replicaCount": replica_count}]
    place = _place(project, location, endpoint, transport, emulator, emulator_data_dir)
    with open_pools(place) as resources:
        created = resources.create(create_body(ident, pools, display_name))
    if as_json:
        typer.echo(json.dumps(created, indent=2))
        return
    _show(created)
    typer.echo(f"run a template on it: persistent_resource_id: {ident}")


def list_pools(
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """List the persistent resources of a project and location."""
    from vertexdist.jobs.pools import open_pool_lists

    place = _place(project, location, endpoint, transport, emulator, emulator_data_dir)
    with open_pool_lists(place) as sources:
        found = [resource for resources in sources for resource in resources.list()]
        where = (
            sources[0].target.parent if len(sources) == 1 else f"the emulator's folder {emulator_data_dir}"
        )
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    if not found:
        typer.echo(f"no persistent resources in {where}", err=True)
        return
    for resource in found:
        _show(resource)


def describe(
    ref: PoolRef,
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Show one persistent resource: its state and pools."""
    from vertexdist.jobs.pools import open_pools

    place = _place(project, location, endpoint, transport, emulator, emulator_data_dir, ref)
    with open_pools(place, ref=ref) as resources:
        found = resources.get(ref)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    _show(found)


def delete(
    ref: PoolRef,
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """Delete a persistent resource (its machines are released; jobs on it can no longer start)."""
    from vertexdist.jobs.pools import open_pools

    place = _place(project, location, endpoint, transport, emulator, emulator_data_dir, ref)
    with open_pools(place, ref=ref) as resources:
        name = resources.delete(ref)
    typer.echo(f"deleted {name}")


pool_app.command("create")(create)
pool_app.command("list")(list_pools)
pool_app.command("describe")(describe)
pool_app.command("delete")(delete)


def register(app: typer.Typer) -> None:
    app.add_typer(pool_app, name="pool")
