"""Issue 26: the emulator's persistentResources through the real SDK (`aiplatform.persistent_resource`) and
the real PersistentResourceServiceClient: create (a long-running operation), get, list, delete, Vertex's
errors, and a restart that keeps them RUNNING."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator

PARENT = "projects/test-proj/locations/us-central1"
POOL = {"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 2}
GPU_POOL = {
    "id": "gpus",
    "machine_spec": {
        "machine_type": "a2-highgpu-1g",
        "accelerator_type": "NVIDIA_TESLA_A100",
        "accelerator_count": 1,
    },
    "replica_count": 4,
}


@pytest.fixture
def client(emu: Emulator) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import PersistentResourceServiceClient

    return PersistentResourceServiceClient(
        transport="rest",
        client_options={"api_endpoint": emu.vertex_endpoint},
        credentials=AnonymousCredentials(),
    )


def test_the_sdk_creates_lists_and_deletes_a_persistent_resource(aiplatform: Any, emu: Emulator) -> None:
    from google.api_core import exceptions
    from google.cloud.aiplatform.persistent_resource import PersistentResource

    created = PersistentResource.create(
        persistent_resource_id="sdk-warm-1",
        resource_pools=[POOL, GPU_POOL],
        display_name="warm cluster",
        labels={"team": "ml"},
    )
    assert created.resource_name == f"{PARENT}/persistentResources/sdk-warm-1"
    assert created.state.name == "RUNNING"
    assert created.display_name == "warm cluster"
    pools = created.gca_resource.resource_pools
    assert [p.id for p in pools] == ["n1-standard-4-0", "gpus"]
    assert pools[1].machine_spec.accelerator_type.name == "NVIDIA_TESLA_A100"
    assert pools[1].replica_count == 4 and pools[1].used_replica_count == 0
    assert created.create_time is not None and created.start_time is not None

    again = PersistentResource("sdk-warm-1")
    assert again.labels == {"team": "ml"}
    names = [r.resource_name for r in PersistentResource.list()]
    assert created.resource_name in names

    created.delete()
    with pytest.raises(exceptions.NotFound):
        PersistentResource("sdk-warm-1")
    assert created.resource_name not in [r.resource_name for r in PersistentResource.list()]


def test_the_create_is_an_operation_whose_response_is_the_resource(client: Any) -> None:
    from google.cloud.aiplatform_v1.types import PersistentResource, ResourcePool

    operation = client.create_persistent_resource(
        parent=PARENT,
        persistent_resource=PersistentResource(resource_pools=[ResourcePool(**GPU_POOL)]),
        persistent_resource_id="op-warm",
    )
    assert operation.done()
    metadata = operation.metadata
    assert type(metadata).__name__ == "CreatePersistentResourceOperationMetadata"
    result = operation.result()
    assert result.name == f"{PARENT}/persistentResources/op-warm"
    assert result.state == PersistentResource.State.RUNNING
    client.delete_persistent_resource(name=result.name).result()


@pytest.mark.parametrize(
    ("ident", "pools", "error", "says"),
    [
        ("Bad_Id", [POOL], "BadRequest", "not a persistent resource id"),
        ("no-pools", [], "BadRequest", "at least one resource pool"),
        ("no-machine", [{"replica_count": 1}], "BadRequest", "machineType is required"),
        (
            "zero",
            [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 0}],
            "BadRequest",
            "replicaCount must be at least 1",
        ),
        ("twice", [GPU_POOL, GPU_POOL], "BadRequest", "used by another resource pool"),
    ],
)
def test_bad_creates_are_vertex_errors(
    client: Any, ident: str, pools: list[dict[str, Any]], error: str, says: str
) -> None:
    from google.api_core import exceptions
    from google.cloud.aiplatform_v1.types import PersistentResource, ResourcePool

    with pytest.raises(getattr(exceptions, error)) as raised:
        client.create_persistent_resource(
            parent=PARENT,
            persistent_resource=PersistentResource(resource_pools=[ResourcePool(**p) for p in pools]),
            persistent_resource_id=ident,
        )
    assert says in str(raised.value)


def test_a_taken_id_is_a_conflict_and_an_unknown_one_not_found(client: Any) -> None:
    from google.api_core import exceptions
    from google.cloud.aiplatform_v1.types import PersistentResource, ResourcePool

    body = PersistentResource(resource_pools=[ResourcePool(**POOL)])
    client.create_persistent_resource(parent=PARENT, persistent_resource=body, persistent_resource_id="taken")
    with pytest.raises(exceptions.Conflict):
        client.create_persistent_resource(
            parent=PARENT, persistent_resource=body, persistent_resource_id="taken"
        )
    client.delete_persistent_resource(name=f"{PARENT}/persistentResources/taken").result()
    with pytest.raises(exceptions.NotFound):
        client.get_persistent_resource(name=f"{PARENT}/persistentResources/taken")
    with pytest.raises(exceptions.NotFound):
        client.delete_persistent_resource(name=f"{PARENT}/persistentResources/taken")


def test_list_pages(client: Any) -> None:
    from google.cloud.aiplatform_v1.types import PersistentResource, ResourcePool

    body = PersistentResource(resource_pools=[ResourcePool(**POOL)])
    names = []
    for n in range(3):
        client.create_persistent_resource(
            parent=PARENT, persistent_resource=body, persistent_resource_id=f"paged-{n}"
        )
        names.append(f"{PARENT}/persistentResources/paged-{n}")
    pager = client.list_persistent_resources(request={"parent": PARENT, "page_size": 2})
    assert set(names) <= {r.name for r in pager}
    first = client.list_persistent_resources(request={"parent": PARENT, "page_size": 2})
    assert len(next(iter(first.pages)).persistent_resources) == 2 and first.next_page_token
    for name in names:
        client.delete_persistent_resource(name=name).result()


def test_a_restarted_emulator_keeps_its_persistent_resources_running(tmp_path: Path) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import PersistentResourceServiceClient
    from google.cloud.aiplatform_v1.types import PersistentResource, ResourcePool

    def make(emu: Emulator) -> Any:
        return PersistentResourceServiceClient(
            transport="rest",
            client_options={"api_endpoint": emu.vertex_endpoint},
            credentials=AnonymousCredentials(),
        )

    with Emulator(data_dir=tmp_path) as emu:
        make(emu).create_persistent_resource(
            parent=PARENT,
            persistent_resource=PersistentResource(resource_pools=[ResourcePool(**POOL)]),
            persistent_resource_id="survivor",
        )
    with Emulator(data_dir=tmp_path) as emu:
        found = make(emu).get_persistent_resource(name=f"{PARENT}/persistentResources/survivor")
    assert found.state == PersistentResource.State.RUNNING


def _job(aiplatform: Any, name: str, replicas: int, resource: str) -> Any:
    import sys

    return aiplatform.CustomJob(
        display_name=name,
        worker_pool_specs=[
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {"image_uri": "x/standin", "command": [sys.executable, "-c", "print(1)"]},
            },
            *(
                [
                    {
                        "machine_spec": {"machine_type": "n1-standard-4"},
                        "replica_count": replicas - 1,
                        "container_spec": {
                            "image_uri": "x/standin",
                            "command": [sys.executable, "-c", "print(2)"],
                        },
                    }
                ]
                if replicas > 1
                else []
            ),
        ],
        persistent_resource_id=resource,
    )


def test_a_job_runs_on_a_persistent_resource_it_fits_and_is_refused_otherwise(
    aiplatform: Any, emu: Emulator
) -> None:
    from google.api_core import exceptions
    from google.cloud.aiplatform.persistent_resource import PersistentResource

    resource = PersistentResource.create(persistent_resource_id="jobs-run-here", resource_pools=[POOL])
    try:
        job = _job(aiplatform, "on-the-pool", 2, "jobs-run-here")
        job.run()
        assert job.state.name == "JOB_STATE_SUCCEEDED"
        assert job.gca_resource.job_spec.persistent_resource_id == "jobs-run-here"

        with pytest.raises(exceptions.BadRequest) as too_big:
            _job(aiplatform, "too-big", 3, "jobs-run-here").run()
        assert "ask for 3 replicas of n1-standard-4; persistent resource 'jobs-run-here' holds 2" in str(
            too_big.value
        )
    finally:
        resource.delete()
    with pytest.raises(exceptions.BadRequest) as missing:
        _job(aiplatform, "nowhere", 1, "jobs-run-here").run()
    assert "does not exist" in str(missing.value)


def test_our_create_body_is_the_one_the_sdk_builds() -> None:
    """`PersistentResource.create(...)` builds `PersistentResource(name=ID, display_name, resource_pools,
    labels)`; `pool create` sends the same message."""
    import json

    from google.cloud.aiplatform.compat.types import persistent_resource_v1
    from google.cloud.aiplatform_v1.types import PersistentResource

    from vertexdist.backends.vertex.pools import create_body
    from vertexdist.wire.placement import pools_for

    pools = pools_for(
        {
            "workerPoolSpecs": [
                {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1},
                {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1},
            ]
        }
    )
    ours = PersistentResource.from_json(json.dumps(create_body("warm-1", pools, "warm", {"team": "ml"})))
    sdk = persistent_resource_v1.PersistentResource(
        name="warm-1",
        display_name="warm",
        resource_pools=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 2}],
        labels={"team": "ml"},
    )
    assert PersistentResource.to_dict(ours) == type(sdk).to_dict(sdk)


def test_pool_commands_create_from_a_template_describe_list_and_delete(
    cli: Any, emu: Emulator, write_template: Any
) -> None:
    at = ["--endpoint", emu.vertex_endpoint, "--transport", "rest"]
    template = write_template(name="pool-sized", replicas=3)
    code, out, err = cli("pool", "create", "cli-warm", "--from", str(template), *at)
    assert code == 0, err
    assert f"{PARENT}/persistentResources/cli-warm  RUNNING" in out
    assert "pool n1-standard-4-0: 3 x n1-standard-4 (0 in use)" in out
    assert "persistent_resource_id: cli-warm" in out

    code, out, _ = cli("pool", "describe", f"{PARENT}/persistentResources/cli-warm", *at)
    assert code == 0 and "RUNNING" in out
    code, out, _ = cli("pool", "list", "--project", "test-proj", "--location", "us-central1", *at, "--json")
    assert code == 0 and "cli-warm" in [r["name"].rsplit("/", 1)[1] for r in json_list(out)]

    code, _, err = cli(
        "pool", "create", "cli-warm", "--machine-type", "n1-standard-4", "--project", "test-proj", *at
    )
    assert code == 1 and "already exists" in err

    code, out, _ = cli(
        "pool", "delete", "cli-warm", "--project", "test-proj", "--location", "us-central1", *at
    )
    assert code == 0 and out.strip() == f"deleted {PARENT}/persistentResources/cli-warm"
    code, _, err = cli("pool", "describe", "cli-warm", "--project", "test-proj", *at)
    assert code == 1 and "not found" in err


def json_list(text: str) -> list[dict[str, Any]]:
    import json

    found = json.loads(text)
    assert isinstance(found, list)
    return found


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["create", "Bad_Id", "--machine-type", "n1-standard-4"], "not a persistent resource id"),
        (["create", "ok-id"], "--from TEMPLATE or --machine-type"),
        (["describe", "projects/p/locations/l/customJobs/1"], "not a persistent resource name"),
    ],
)
def test_pool_usage_errors_say_what_would_be_right(cli: Any, args: list[str], says: str) -> None:
    code, _, err = cli("pool", *args, "--project", "p")
    assert code == 2 and says in err and "hint:" in err


def test_validate_check_resources_reads_the_named_resource_and_says_what_does_not_fit(
    cli: Any, emu: Emulator, write_template: Any
) -> None:
    """`validate --check-resources`: the template's persistent_resource_id read from the emulator, the fit
    rule the emulator refuses jobs by, the problem at the field's line, with what would fit."""
    at = ["--endpoint", emu.vertex_endpoint, "--transport", "rest"]
    fits = write_template(name="fits-pool", replicas=2, extra="persistent_resource_id: check-me\n")
    too_big = write_template(name="big-for-pool", replicas=3, extra="persistent_resource_id: check-me\n")
    line = next(
        n for n, text in enumerate(fits.read_text().splitlines(), 1) if text.startswith("persistent_resource")
    )

    code, out, err = cli("validate", "--check-resources", str(fits), *at)
    assert code == 1, err
    assert f"{fits}:{line}:25: persistent_resource_id: persistent resource 'check-me' does not exist" in out
    assert f"vertexdist pool create check-me --from {fits}" in out and "holds 2 x n1-standard-4" in out

    code, _, err = cli("pool", "create", "check-me", "--from", str(fits), *at)
    assert code == 0, err
    try:
        code, out, err = cli("validate", "--check-resources", str(fits), *at)
        assert code == 0, out + err
        code, out, _ = cli("validate", "--check-resources", "--format", "json", str(fits), str(too_big), *at)
        assert code == 1
        (problem,) = json_dict(out)["problems"]
        assert problem["file"] == str(too_big) and problem["path"] == "persistent_resource_id"
        assert (
            "ask for 3 replicas of n1-standard-4; persistent resource 'check-me' holds 2"
            in problem["message"]
        )
        assert "the job needs 3 x n1-standard-4; 'check-me' holds 2 x n1-standard-4" in problem["hint"]
        # Without the flag nothing is read: the template itself is fine.
        code, _, _ = cli("validate", str(too_big))
        assert code == 0
    finally:
        cli("pool", "delete", f"{PARENT}/persistentResources/check-me", *at)


def json_dict(text: str) -> dict[str, Any]:
    import json

    found = json.loads(text)
    assert isinstance(found, dict)
    return found


def test_submit_checks_the_resource_first_unless_told_not_to(
    cli: Any, emu: Emulator, write_template: Any
) -> None:
    """`submit` reads the persistent resource before it uploads anything: a missing one is refused at the
    field's line; with --no-check-resource the create goes out and the emulator refuses it as Vertex does."""
    path = write_template(name="pre-checked", replicas=1, extra="persistent_resource_id: not-made\n")
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("persistent"))
    before = set(emu.store.names())

    code, _, err = cli("submit", "--detach", str(path))
    assert code == 1
    assert f"{path}:{line}:25: persistent_resource_id: persistent resource 'not-made' does not exist" in err
    assert f"vertexdist pool create not-made --from {path}" in err
    assert set(emu.store.names()) == before  # no pipeline, no job: refused before the create

    code, _, err = cli("submit", "--detach", "--no-check-resource", str(path))
    assert code == 1
    assert "persistentResourceId: the PersistentResource" in err and f"{path}:{line}" not in err


def _sleeper(job_client: Any, name: str, replicas: int, resource: str, seconds: float) -> str:
    import sys

    pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "container_spec": {
            "image_uri": "x/standin",
            "command": [sys.executable, "-c", f"import time; time.sleep({seconds})"],
        },
    }
    pools = [
        {**pool, "replica_count": 1},
        *([{**pool, "replica_count": replicas - 1}] if replicas > 1 else []),
    ]
    spec = {"persistent_resource_id": resource, "worker_pool_specs": pools}
    job = job_client.create_custom_job(parent=PARENT, custom_job={"display_name": name, "job_spec": spec})
    return str(job.name)


def _state_when(job_client: Any, name: str, done: Any, timeout: float = 20.0) -> Any:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = job_client.get_custom_job(name=name)
        if done(job.state.name):
            return job
        time.sleep(0.05)
    raise AssertionError(f"{name} still {job_client.get_custom_job(name=name).state.name}")


def test_a_job_waits_queued_for_the_resources_free_machines_and_used_replicas_show(
    client: Any, job_client: Any, emu: Emulator
) -> None:
    """Vertex's accounting: a job that fits the resource but not its free machines waits QUEUED until the
    job holding them ends, then runs; GET shows usedReplicaCount meanwhile."""
    emu.service.hold_get_s = 0.0  # every state seen, not only the last (the fixture sets it back)
    client.create_persistent_resource(
        parent=PARENT, persistent_resource={"resource_pools": [POOL]}, persistent_resource_id="two-machines"
    ).result()
    name = f"{PARENT}/persistentResources/two-machines"
    try:
        first = _sleeper(job_client, "holds-both", 2, "two-machines", 1.0)
        _state_when(job_client, first, lambda s: s == "JOB_STATE_RUNNING")
        second = _sleeper(job_client, "waits", 1, "two-machines", 0.0)
        (pool,) = client.get_persistent_resource(name=name).resource_pools
        assert pool.used_replica_count == 2
        assert job_client.get_custom_job(name=second).state.name == "JOB_STATE_QUEUED"
        _state_when(job_client, first, lambda s: s == "JOB_STATE_SUCCEEDED")
        done = _state_when(job_client, second, lambda s: s.endswith(("SUCCEEDED", "FAILED")))
        assert done.state.name == "JOB_STATE_SUCCEEDED", done.error
        assert done.start_time.timestamp() >= job_client.get_custom_job(name=first).end_time.timestamp()
        (pool,) = client.get_persistent_resource(name=name).resource_pools
        assert pool.used_replica_count == 0
    finally:
        client.delete_persistent_resource(name=name).result()


def test_a_job_waiting_for_a_deleted_resource_fails_with_failed_precondition(
    client: Any, job_client: Any, emu: Emulator
) -> None:
    emu.service.hold_get_s = 0.0  # every state seen, not only the last (the fixture sets it back)
    client.create_persistent_resource(
        parent=PARENT, persistent_resource={"resource_pools": [POOL]}, persistent_resource_id="goes-away"
    ).result()
    first = _sleeper(job_client, "holds-it", 2, "goes-away", 1.0)
    _state_when(job_client, first, lambda s: s == "JOB_STATE_RUNNING")
    waiting = _sleeper(job_client, "left-waiting", 2, "goes-away", 0.0)
    client.delete_persistent_resource(name=f"{PARENT}/persistentResources/goes-away").result()
    failed = _state_when(job_client, waiting, lambda s: s.endswith(("SUCCEEDED", "FAILED")))
    assert failed.state.name == "JOB_STATE_FAILED"
    assert failed.error.code == 9 and "was deleted before the job could start" in failed.error.message
    _state_when(job_client, first, lambda s: s.endswith(("SUCCEEDED", "FAILED")))
