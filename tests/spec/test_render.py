"""Render: one rule per test, on the pure functions (no SDK here; see test_sdk_parity.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vertexdist.render import (
    MASK,
    REQUEST_HASH_LABEL,
    TRAINING_TASK_DEFINITION,
    mask_secrets,
    render_job_spec,
    render_request,
    request_hash,
)
from vertexdist.shipped.vertexdist_launcher.options import Target, parse_target
from vertexdist.spec import JobTemplate

from .conftest import BASE, BuildTemplate


def template(**changes: Any) -> JobTemplate:
    return JobTemplate.model_validate({**BASE, **changes})


def test_pool0_is_one_replica_pool1_the_rest() -> None:
    pools = render_job_spec(template(replica_count=3))["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == [1, 2]
    assert pools[0]["machineSpec"] == {
        "machineType": "a2-highgpu-4g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 4,
    }
    assert pools[0]["machineSpec"] == pools[1]["machineSpec"]
    assert pools[0]["machineSpec"] is not pools[1]["machineSpec"]  # no YAML anchors in the output


def test_single_replica_has_one_pool() -> None:
    assert (
        len(
            render_job_spec(template(replica_count=1, restart_job_on_worker_restart=False))["workerPoolSpecs"]
        )
        == 1
    )


def test_reducers_with_one_replica_leave_an_empty_pool1() -> None:
    pools = render_job_spec(template(replica_count=1, reduction_server_count=2))["workerPoolSpecs"]
    assert pools[1] == {}
    assert pools[2] == {
        "machineSpec": {"machineType": "n1-highcpu-16"},
        "replicaCount": 2,
        "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
        "containerSpec": {
            "imageUri": "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
        },
    }


def test_reducers_go_in_pool2() -> None:
    pools = render_job_spec(template(replica_count=4, reduction_server_count=7))["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == [1, 3, 7]
    assert "containerSpec" in pools[2] and "pythonPackageSpec" in pools[0]


def test_cpu_job_has_no_accelerator_fields() -> None:
    spec = render_job_spec(template(machine_type="n1-standard-4", accelerator_type=None, accelerator_count=0))
    assert spec["workerPoolSpecs"][0]["machineSpec"] == {"machineType": "n1-standard-4"}


def test_python_package_spec_with_placeholder_and_real_uri() -> None:
    t = template(trainer={"args": ["--epochs=1"], "env": {"A": "1"}})
    code = render_job_spec(t)["workerPoolSpecs"][0]["pythonPackageSpec"]
    assert code == {
        "executorImageUri": t.container_uri,
        "packageUris": ["gs://vertexdist-demo/staging/vertexdist/packages/<pending>/trainer_pkg.tar.gz"],
        "pythonModule": "trainer_pkg.task",
        "args": ["--epochs=1"],
        "env": [{"name": "A", "value": "1"}],
    }
    uri = "gs://vertexdist-demo/staging/vertexdist/packages/0123456789abcdef/trainer_pkg-0.1.tar.gz"
    for pool in render_job_spec(t, package_uri=uri)["workerPoolSpecs"]:
        assert pool["pythonPackageSpec"]["packageUris"] == [uri]


def test_script_placeholder_names_the_sdk_package(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    t = template(trainer={"script": str(tmp_path / "train.py")})
    code = render_job_spec(t)["workerPoolSpecs"][0]["pythonPackageSpec"]
    assert code["packageUris"][0].endswith("/<pending>/aiplatform_custom_trainer_script.tar.gz")
    assert (code["pythonModule"], code["args"]) == (
        "vertexdist_launcher.watched",
        ["-m", "aiplatform_custom_trainer_script.task"],
    )


def test_build_runs_the_image_as_a_container(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    build = {"repository": "us-central1-docker.pkg.dev/vertexdist-demo/trainers", "context": str(tmp_path),
             "dockerfile": str(tmp_path / "Dockerfile"), "image": "my-trainer"}  # fmt: skip
    t = template(build=build, replica_count=4, reduction_server_count=7, trainer={"args": ["--x"]})
    pools = render_job_spec(t)["workerPoolSpecs"]
    placeholder = "us-central1-docker.pkg.dev/vertexdist-demo/trainers/my-trainer:<pending>"
    assert pools[0]["containerSpec"] == {"imageUri": placeholder, "args": ["--x"], "env": []}
    assert "pythonPackageSpec" not in pools[0] and "pythonPackageSpec" not in pools[1]
    assert pools[2]["containerSpec"]["imageUri"].endswith("reductionserver:latest")
    image = "us-central1-docker.pkg.dev/vertexdist-demo/trainers/my-trainer@sha256:" + "0" * 64
    assert render_job_spec(t, image_uri=image)["workerPoolSpecs"][1]["containerSpec"]["imageUri"] == image


def test_build_with_another_module_gives_the_container_its_command(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "train.py").write_text("")
    build = {"repository": "us-central1-docker.pkg.dev/vertexdist-demo/trainers", "context": str(tmp_path),
             "dockerfile": str(tmp_path / "Dockerfile")}  # fmt: skip
    trainer = {"package": str(tmp_path / "mypkg"), "module": "mypkg.train", "args": ["--x"]}
    container = render_job_spec(template(build=build, trainer=trainer))["workerPoolSpecs"][0]["containerSpec"]
    assert container["command"] == ["python", "-m", "mypkg.train"]
    assert container["args"] == ["--x"]


def test_torchrun_runs_the_shipped_launcher_with_the_module_after_its_arguments(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    trainer = {"script": str(tmp_path / "train.py"), "launcher": "torchrun", "args": ["--lr", "0.1"]}
    for pool in render_job_spec(template(trainer=trainer))["workerPoolSpecs"]:
        code = pool["pythonPackageSpec"]
        assert code["pythonModule"] == "vertexdist_launcher"
        assert code["args"] == [
            "torchrun",
            "--",
            "-m",
            "aiplatform_custom_trainer_script.task",
            "--lr",
            "0.1",
        ]
    options = {**trainer, "nproc_per_node": 2, "max_restarts": 3}
    code = render_job_spec(template(trainer=options))["workerPoolSpecs"][0]["pythonPackageSpec"]
    assert code["args"][:6] == ["torchrun", "--nproc-per-node", "2", "--max-restarts", "3", "--"]


def test_python_launcher_runs_the_users_module_through_the_watched_runner(tmp_path: Path) -> None:
    """On Vertex too, each replica of the user's own module starts the rank's health watcher first:
    `vertexdist_launcher.watched -m MODULE ARGS` (shipped in every package) runs the module as `python -m`."""
    (tmp_path / "train.py").write_text("")
    trainer = {"script": str(tmp_path / "train.py"), "launcher": "python", "args": ["--lr", "0.1"]}
    pools = render_job_spec(template(trainer=trainer, replica_count=3))["workerPoolSpecs"]
    assert len(pools) == 2
    for pool in pools:
        code = pool["pythonPackageSpec"]
        assert code["pythonModule"] == "vertexdist_launcher.watched"
        assert code["args"] == ["-m", "aiplatform_custom_trainer_script.task", "--lr", "0.1"]
        # What the runner reads back is the user's module and its args, as rendered.
        assert parse_target(code["args"]) == Target(
            module="aiplatform_custom_trainer_script.task", args=("--lr", "0.1")
        )


def test_torchrun_in_a_container_is_the_container_command(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    build = {"repository": "us-central1-docker.pkg.dev/vertexdist-demo/trainers", "context": str(tmp_path),
             "dockerfile": str(tmp_path / "Dockerfile")}  # fmt: skip
    t = template(build=build, reduction_server_count=1, trainer={"launcher": "torchrun", "args": ["--x"]})
    pools = render_job_spec(t)["workerPoolSpecs"]
    for container in (pools[0]["containerSpec"], pools[1]["containerSpec"]):
        assert container["command"] == ["python", "-m", "vertexdist_launcher", "torchrun", "--", "-m",
                                        "trainer_pkg.task"]  # fmt: skip
        assert container["args"] == ["--x"]
    assert "command" not in pools[2]["containerSpec"]  # the reduction servers run their own image


def test_base_output_dir_default_and_explicit_are_bases_of_a_folder_per_job() -> None:
    assert render_job_spec(template(display_name="My job #1"))["baseOutputDirectory"] == {
        "outputUriPrefix": "gs://vertexdist-demo/staging/vertexdist/output/My-job-1/<job-folder>"
    }
    spec = render_job_spec(template(base_output_dir="gs://bkt/out/"), job_folder="20250101-000000-abcdef")
    assert spec["baseOutputDirectory"] == {"outputUriPrefix": "gs://bkt/out/20250101-000000-abcdef"}


def test_scheduling_only_what_is_set() -> None:
    assert "scheduling" not in render_job_spec(template(restart_job_on_worker_restart=False))
    spec = render_job_spec(template(timeout="2h", scheduling_strategy="FLEX_START", max_wait_duration="30m"))
    assert spec["scheduling"] == {
        "timeout": "7200s",
        "restartJobOnWorkerRestart": True,
        "strategy": "FLEX_START",
        "maxWaitDuration": "1800s",
    }


def test_optional_job_fields() -> None:
    spec = render_job_spec(
        template(
            service_account="sa@vertexdist-demo.iam.gserviceaccount.com",
            network="projects/123/global/networks/vpc",
            tensorboard="projects/p/locations/us-central1/tensorboards/1",
            enable_web_access=True,
        )
    )
    assert spec["serviceAccount"] == "sa@vertexdist-demo.iam.gserviceaccount.com"
    assert spec["network"] == "projects/123/global/networks/vpc"
    assert spec["tensorboard"] == "projects/p/locations/us-central1/tensorboards/1"
    assert spec["enableWebAccess"] is True
    assert "persistentResourceId" not in spec


def test_persistent_resource_id_goes_into_the_job_spec() -> None:
    t = template(persistent_resource_id="warm-pool-1")
    assert render_job_spec(t)["persistentResourceId"] == "warm-pool-1"
    request = render_request(t)
    assert request["trainingPipeline"]["trainingTaskInputs"]["persistentResourceId"] == "warm-pool-1"


def test_request_wraps_the_spec_like_the_sdk() -> None:
    t = template(labels={"team": "ml"}, location="europe-west4")
    request = render_request(t, package_uri="gs://bkt/p.tar.gz")
    assert request == {
        "parent": "projects/vertexdist-demo/locations/europe-west4",
        "trainingPipeline": {
            "displayName": "test-job",
            "trainingTaskDefinition": TRAINING_TASK_DEFINITION,
            "trainingTaskInputs": render_job_spec(t, package_uri="gs://bkt/p.tar.gz"),
            "labels": {"team": "ml", REQUEST_HASH_LABEL: request_hash(request)},
        },
    }
    other = render_request(t, package_uri="gs://bkt/q.tar.gz")
    assert other["trainingPipeline"]["labels"][REQUEST_HASH_LABEL] != request_hash(request)


def test_render_is_deterministic(build_template: BuildTemplate) -> None:
    t = build_template(trainer={"env": {"B": "2", "A": "1"}})
    assert render_request(t) == render_request(t)
    assert [e["name"] for e in render_job_spec(t)["workerPoolSpecs"][0]["pythonPackageSpec"]["env"]] == [
        "B",
        "A",
    ]


def test_mask_secrets() -> None:
    spec = {
        "env": [
            {"name": "HF_TOKEN", "value": "hf_abc"},
            {"name": "api_key", "value": "k"},
            {"name": "DB_PASSWORD", "value": "p"},
            {"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": "/k.json"},
            {"name": "MY_SECRET", "value": "s"},
            {"name": "NCCL_DEBUG", "value": "INFO"},
        ],
        "build_args": {"PIP_TOKEN": "t", "VERSION": "1"},
        "machineSpec": {"machineType": "n1"},
    }
    masked = mask_secrets(spec)
    assert [e["value"] for e in masked["env"]] == [MASK, MASK, MASK, MASK, MASK, "INFO"]
    assert masked["build_args"] == {"PIP_TOKEN": MASK, "VERSION": "1"}
    assert masked["machineSpec"] == {"machineType": "n1"}
    assert spec["env"][0]["value"] == "hf_abc"  # the input is left alone


@pytest.mark.parametrize("key", ["keyName", "monkey"])
def test_mask_secrets_leaves_lowercase_fields(key: str) -> None:
    assert mask_secrets({key: "x"}) == {key: "x"}
