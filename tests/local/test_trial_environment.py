"""A tuning trial's replicas get what Vertex gives a trial (docs/reference/vertex.md §1): CLOUD_ML_TRIAL_ID,
CLUSTER_SPEC/TF_CONFIG `task.trial`, AIP_*_DIR under `<base>/<trial id>/`, and a cloudml-hypertune metric
file of their own; a plain job's replicas get none of it."""

from __future__ import annotations

import json
import sys

from vertexdist.local.environment import JobContext, cluster_addresses, replica_env, replica_slots
from vertexdist.tuning.trials import trial_job_spec
from vertexdist.wire.job_spec import parse_job_spec

POOL = {
    "machineSpec": {"machineType": "n1-standard-4"},
    "containerSpec": {"imageUri": "x", "command": [sys.executable, "t.py"], "args": ["--epochs=2"]},
}
SPEC = {
    "workerPoolSpecs": [{**POOL, "replicaCount": 1}, {**POOL, "replicaCount": 1}],
    "baseOutputDirectory": {"outputUriPrefix": "gs://bkt/out/"},
}


def envs(spec: dict[str, object], ctx: JobContext) -> dict[str, dict[str, str]]:
    job = parse_job_spec(spec)
    slots = replica_slots(job)
    cluster = cluster_addresses(job, [30000 + i for i in range(len(slots))])
    return {slot.name: replica_env(job, ctx, cluster, slot) for slot in slots}


def test_trial_replicas_see_their_trial() -> None:
    ctx = JobContext("job-7", "p", "us-central1", "/gcs", trial_id="7", hp_metric_dir="/runs/t7/hypertune")
    spec = trial_job_spec(SPEC, "7", ["--lr=0.01", "--units=32"])
    chief, worker = envs(spec, ctx).values()
    assert chief["CLOUD_ML_TRIAL_ID"] == worker["CLOUD_ML_TRIAL_ID"] == "7"
    assert json.loads(chief["CLUSTER_SPEC"])["task"]["trial"] == "7"
    assert json.loads(worker["TF_CONFIG"])["task"]["trial"] == "7"
    assert chief["AIP_MODEL_DIR"] == "gs://bkt/out/7/model/"
    assert chief["AIP_CHECKPOINT_DIR"] == "gs://bkt/out/7/checkpoints/"
    # Each Vertex VM has its own metric file; the study reads the chief's.
    assert chief["CLOUD_ML_HP_METRIC_FILE"] == "/runs/t7/hypertune/workerpool0-0.metrics"
    assert worker["CLOUD_ML_HP_METRIC_FILE"] == "/runs/t7/hypertune/workerpool1-0.metrics"
    for pool in spec["workerPoolSpecs"]:  # type: ignore[attr-defined]
        assert pool["containerSpec"]["args"] == ["--epochs=2", "--lr=0.01", "--units=32"]


def test_plain_jobs_get_no_trial_variables() -> None:
    chief, worker = envs(SPEC, JobContext("job-1", "p", "us-central1", "/gcs")).values()
    assert "CLOUD_ML_TRIAL_ID" not in chief and "CLOUD_ML_HP_METRIC_FILE" not in chief
    assert json.loads(chief["CLUSTER_SPEC"])["task"]["trial"] == ""
    assert "trial" not in json.loads(worker["TF_CONFIG"])["task"]


def test_reduction_servers_keep_their_args_and_no_base_dir_means_none_for_trials() -> None:
    reducer = {
        "machineSpec": {"machineType": "n1-highcpu-16"},
        "replicaCount": 1,
        "containerSpec": {
            "imageUri": "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
        },
    }
    spec = trial_job_spec({"workerPoolSpecs": [{**POOL, "replicaCount": 1}, {}, reducer]}, "2", ["--x=1"])
    assert "args" not in spec["workerPoolSpecs"][2]["containerSpec"]
    assert "baseOutputDirectory" not in spec
