"""One test per rule: errors say what would be right; warnings flag what Vertex takes but is likely wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vertexdist.spec import Finding, JobTemplate, check_template
from vertexdist.spec.rules import RULES

from .conftest import BASE


def findings(**changes: Any) -> list[Finding]:
    data = {**BASE}
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    template = JobTemplate.model_validate(data, context={"skip_rules": True})
    return check_template(template)


def only(severity: str, **changes: Any) -> list[tuple[str, str, str | None]]:
    return [(f.path, f.message, f.hint) for f in findings(**changes) if f.severity == severity]


def test_base_template_is_clean() -> None:
    assert findings() == []


def test_every_rule_is_registered_once() -> None:
    assert len(set(RULES)) == len(RULES)


def test_unknown_machine_type_suggests_a_close_one() -> None:
    [(path, message, hint)] = only(
        "error", machine_type="a2-highgpu-4", accelerator_type=None, accelerator_count=0
    )
    assert path == "machine_type" and "not a Vertex AI training machine type" in message
    assert "a2-highgpu-4g" in (hint or "")


def test_unknown_accelerator_suggests_the_enum_name() -> None:
    [(path, message, hint)] = only("error", accelerator_type="NVIDIA_TESLA_A10")
    assert path == "accelerator_type" and "not an accelerator type" in message
    assert "NVIDIA_TESLA_A100" in (hint or "")


def test_retired_accelerator_says_why() -> None:
    [(_, message, _)] = only("error", machine_type="n1-standard-4", accelerator_type="NVIDIA_TESLA_K80",
                             accelerator_count=1)  # fmt: skip
    assert "no longer offered" in message


def test_a100_80gb_goes_only_on_ultragpu() -> None:
    [(path, message, hint)] = only("error", accelerator_type="NVIDIA_A100_80GB")
    assert path == "accelerator_type"
    assert "only on a2-ultragpu" in message and "NVIDIA_TESLA_A100" in (hint or "")


def test_ultragpu_needs_the_80gb_part() -> None:
    [(_, message, hint)] = only("error", machine_type="a2-ultragpu-8g", accelerator_count=8)
    assert "NVIDIA_A100_80GB" in message and "40GB" in message
    assert "NVIDIA_A100_80GB" in (hint or "")


def test_accelerator_must_fit_the_machine() -> None:
    [(_, message, hint)] = only("error", machine_type="g2-standard-8", accelerator_count=1)
    assert "does not take NVIDIA_TESLA_A100" in message and "NVIDIA_L4" in message
    assert "a2-highgpu" in (hint or "")


def test_cpu_machine_takes_no_accelerators() -> None:
    [(_, message, hint)] = only("error", machine_type="n2-standard-8", accelerator_type="NVIDIA_L4",
                                accelerator_count=1)  # fmt: skip
    assert "takes no accelerators" in message and "g2-standard" in (hint or "")


@pytest.mark.parametrize(
    ("machine", "accelerator", "count", "allowed"),
    [
        ("a2-highgpu-4g", "NVIDIA_TESLA_A100", 8, "4"),
        ("g2-standard-24", "NVIDIA_L4", 1, "2"),
        ("n1-standard-32", "NVIDIA_TESLA_V100", 2, "4, 8"),
        ("n1-standard-4", "NVIDIA_TESLA_T4", 3, "1, 2, 4"),
        ("a3-highgpu-8g", "NVIDIA_H100_80GB", 4, "8"),
    ],
)
def test_count_must_be_one_the_machine_takes(
    machine: str, accelerator: str, count: int, allowed: str
) -> None:
    [(path, message, hint)] = only("error", machine_type=machine, accelerator_type=accelerator,
                                   accelerator_count=count)  # fmt: skip
    assert path == "accelerator_count"
    assert f"takes {allowed} x {accelerator}, not {count}" in message
    assert hint and hint.startswith("set accelerator_count")


def test_type_without_count() -> None:
    [(path, message, hint)] = only("error", accelerator_count=0)
    assert path == "accelerator_count" and "no GPU" in message
    assert "NVIDIA_TESLA_A100 x 4" in (hint or "")


def test_count_without_type() -> None:
    [(path, message, _)] = only("error", accelerator_type=None)
    assert path == "accelerator_type" and "no accelerator_type" in message


def test_gpu_machine_needs_its_gpus() -> None:
    [(_, message, hint)] = only("error", accelerator_type=None, accelerator_count=0)
    assert "comes with 4 x NVIDIA_TESLA_A100" in message
    assert hint == "set accelerator_type: NVIDIA_TESLA_A100 and accelerator_count: 4"


def test_cpu_job_is_fine() -> None:
    assert only("error", machine_type="n1-standard-4", accelerator_type=None, accelerator_count=0) == []


def test_a4x_warns_about_reservations() -> None:
    [(path, message, _)] = only("warning", machine_type="a4x-highgpu-4g", accelerator_type="NVIDIA_GB200")
    assert path == "machine_type" and "reservation" in message


def test_replica_count_positive_on_unvalidated_models() -> None:
    template = JobTemplate.model_construct(**{**BASE, "replica_count": 0})
    assert any(f.path == "replica_count" for f in check_template(template))


def test_reduction_server_needs_gpu_workers() -> None:
    errors = only("error", machine_type="n1-standard-8", accelerator_type=None, accelerator_count=0,
                  reduction_server_count=4, replica_count=4)  # fmt: skip
    assert [(p, "GPU workers" in m) for p, m, _ in errors] == [("reduction_server_count", True)]


def test_reduction_server_machine_must_be_cpu() -> None:
    [(path, message, hint)] = only("error", replica_count=4, reduction_server_count=8,
                                   reduction_server_machine_type="a2-highgpu-1g")  # fmt: skip
    assert path == "reduction_server_machine_type" and "CPU machines" in message
    assert "n1-highcpu-16" in (hint or "")


def test_reduction_server_machine_must_exist() -> None:
    [(path, _, hint)] = only("error", replica_count=4, reduction_server_count=8,
                             reduction_server_machine_type="n1-hghcpu-16")  # fmt: skip
    assert path == "reduction_server_machine_type" and "did you mean 'n1-highcpu-16'" in (hint or "")


def test_reducers_with_two_nodes_give_no_speedup() -> None:
    warnings = only("warning", replica_count=2, reduction_server_count=4)
    assert [p for p, m, _ in warnings if "only from 3 nodes" in m] == ["reduction_server_count"]
    [hint] = [h for _, m, h in warnings if "only from 3 nodes" in m]
    assert "`vertexdist estimate" in (hint or "")


def test_reducer_egress_below_worker_egress() -> None:
    # 4 x a2-highgpu-4g = 200 Gbps; 4 x n1-highcpu-16 = 128 Gbps -> need 7.
    [(path, message, hint)] = only("warning", replica_count=4, reduction_server_count=4)
    assert path == "reduction_server_count" and "128 Gbps is below the workers' 200 Gbps" in message
    assert hint == (
        "use at least 7 x n1-highcpu-16;"
        " `vertexdist estimate TEMPLATE --params 350M` gives the all-reduce time and cost"
    )
    assert only("warning", replica_count=4, reduction_server_count=7) == []


def test_built_image_with_reducers_needs_the_plugin(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    build = {"repository": "us-central1-docker.pkg.dev/vertexdist-demo/trainers", "context": str(tmp_path),
             "dockerfile": str(tmp_path / "Dockerfile")}  # fmt: skip
    warnings = only("warning", replica_count=4, reduction_server_count=7, build=build)
    assert any("NCCL plugin" in m for _, m, _ in warnings)


def test_multinode_ddp_without_restart_warns() -> None:
    [(path, _, hint)] = only("warning", restart_job_on_worker_restart=False)
    assert path == "restart_job_on_worker_restart" and "true" in (hint or "")
    assert only("warning", restart_job_on_worker_restart=False, replica_count=1) == []


@pytest.mark.parametrize(
    ("field", "value", "hint_fragment"),
    [
        ("staging_bucket", "/tmp/staging", "local path"),
        ("staging_bucket", "gcs://bucket/x", "gs://"),
        ("staging_bucket", "bucket/x", "gs://BUCKET"),
        ("base_output_dir", "s3://bucket/out", "gs://BUCKET"),
    ],
)
def test_gcs_uris(field: str, value: str, hint_fragment: str) -> None:
    [(path, message, hint)] = only("error", **{field: value})
    assert path == field and "not a gs:// URI" in message and hint_fragment in (hint or "")


@pytest.mark.parametrize("value", ["gs://b/staging", "gs://-bucket/x", "gs://Bucket/x"])
def test_a_gs_uri_with_a_bad_bucket_name_says_the_name_is_wrong(value: str) -> None:
    # It said "not a gs:// URI" with "the scheme is gs://" for gs://b/staging, whose scheme is right.
    [(path, message, hint)] = only("error", staging_bucket=value)
    bucket = value.removeprefix("gs://").partition("/")[0]
    assert path == "staging_bucket" and f"bucket name {bucket!r}" in message
    assert "scheme" not in (hint or "") and "3-63" in (hint or "")


@pytest.mark.parametrize(
    ("labels", "path", "fragment"),
    [
        ({"Team": "ml"}, "labels.Team", "key"),
        ({"team": "ML Platform"}, "labels.team", "value"),
        ({"1team": "x"}, "labels.1team", "key"),
        ({"k" * 64: "x"}, "labels." + "k" * 64, "key"),
    ],
)
def test_label_rules(labels: dict[str, str], path: str, fragment: str) -> None:
    [(found, message, _)] = only("error", labels=labels)
    assert found == path and f"label {fragment}" in message


def test_too_many_labels() -> None:
    assert [p for p, _, _ in only("error", labels={f"k{i}": "v" for i in range(65)})] == ["labels"]


def test_unknown_location_suggests() -> None:
    [(path, _, hint)] = only("error", location="us-central")
    assert path == "location" and "us-central1" in (hint or "")


def test_unknown_strategy_suggests() -> None:
    [(path, message, hint)] = only("error", scheduling_strategy="spot")
    assert path == "scheduling_strategy" and "STANDARD, SPOT, FLEX_START" in message
    assert "SPOT" in (hint or "")


def test_deprecated_strategy_warns() -> None:
    [(_, message, hint)] = only("warning", scheduling_strategy="LOW_COST")
    assert "deprecated" in message and hint == "use SPOT"


def test_max_wait_without_flex_start_warns() -> None:
    [(path, _, _)] = only("warning", max_wait_duration="30m")
    assert path == "max_wait_duration"
    assert only("warning", max_wait_duration="30m", scheduling_strategy="FLEX_START") == []


def test_boot_disk_type_known() -> None:
    [(path, _, hint)] = only("error", boot_disk_type="pd-sdd")
    assert path == "boot_disk_type" and "pd-ssd" in (hint or "")


def test_boot_disk_default_follows_the_machine() -> None:
    data = {**BASE, "machine_type": "a3-ultragpu-8g", "accelerator_type": "NVIDIA_H200_141GB",
            "accelerator_count": 8}  # fmt: skip
    assert JobTemplate.model_validate(data).boot_disk_type == "hyperdisk-balanced"
    [(path, _, _)] = only("warning", **{k: v for k, v in data.items() if k.startswith(("machine", "acc"))},
                          boot_disk_type="pd-ssd")  # fmt: skip
    assert path == "boot_disk_type"


def test_boot_disk_size_range_on_unvalidated_models() -> None:
    template = JobTemplate.model_construct(**{**BASE, "boot_disk_size_gb": 10, "boot_disk_type": "pd-ssd"})
    assert any(f.path == "boot_disk_size_gb" for f in check_template(template))


def test_container_must_be_prebuilt_for_a_package_job() -> None:
    [(path, message, hint)] = only("error", container_uri="docker.io/me/trainer:1")
    assert path == "container_uri" and "not a prebuilt" in message and "build" in (hint or "")


def test_prebuilt_container_needs_latest() -> None:
    uri = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:2024"
    [(_, message, hint)] = only("warning", container_uri=uri)
    assert (
        ":latest" in message
        and hint == "write us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"
    )


def test_cpu_image_with_gpus_warns() -> None:
    uri = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest"
    [(path, message, _)] = only("warning", container_uri=uri)
    assert path == "container_uri" and "CPU image" in message


def test_container_uri_unused_with_build(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    build = {"repository": "us-central1-docker.pkg.dev/vertexdist-demo/trainers", "context": str(tmp_path),
             "dockerfile": str(tmp_path / "Dockerfile")}  # fmt: skip
    assert only("warning", build=build) == []
    uri = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"
    [(path, message, _)] = only("warning", build=build, container_uri=uri)
    assert path == "container_uri" and "not used" in message


def test_identity_network_tensorboard() -> None:
    assert [p for p, _, _ in only("error", service_account="not-an-email")] == ["service_account"]
    assert [p for p, _, _ in only("error", network="default")] == ["network"]
    assert only("error", network="projects/123456/global/networks/default") == []
    tensorboard = "projects/p/locations/us-central1/tensorboards/123"
    [(path, message, _)] = only("error", tensorboard=tensorboard)
    assert path == "tensorboard" and "service_account" in message
    assert only("error", tensorboard=tensorboard, service_account="sa@p.iam.gserviceaccount.com") == []
    assert [p for p, _, _ in only("error", tensorboard="tb-1", service_account="sa@x.com")] == ["tensorboard"]


@pytest.mark.parametrize("good", ["a", "pool-1", "a" * 63, "warm-a100x8"])
def test_persistent_resource_id_vertex_takes(good: str) -> None:
    assert only("error", persistent_resource_id=good) == []


@pytest.mark.parametrize(
    ("bad", "hint_has"),
    [
        ("Pool", "a-z"),
        ("1pool", "starting with a letter"),
        ("pool-", "not ending with -"),
        ("pool_1", "a-z"),
        ("", "1-63"),
        ("a" * 64, "1-63"),
        ("projects/p/locations/us-central1/persistentResources/warm-1", "warm-1"),
    ],
)
def test_persistent_resource_id_format(bad: str, hint_has: str) -> None:
    [(path, message, hint)] = only("error", persistent_resource_id=bad)
    assert path == "persistent_resource_id" and repr(bad) in message
    assert hint is not None and hint_has in hint


def test_env_limit() -> None:
    [(path, _, _)] = only("error", trainer={"env": {f"V{i}": "x" for i in range(101)}})
    assert path == "trainer.env"


def test_build_repository_region(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    build = {"repository": "europe-west4-docker.pkg.dev/vertexdist-demo/trainers", "context": str(tmp_path),
             "dockerfile": str(tmp_path / "Dockerfile")}  # fmt: skip
    [(path, message, _)] = only("warning", build=build)
    assert path == "build.repository" and "across regions" in message
    assert only("warning", build={**build, "repository": "us-docker.pkg.dev/vertexdist-demo/trainers"}) == []
    [(path, _, _)] = only(
        "error", build={**build, "repository": "mars-docker.pkg.dev/vertexdist-demo/trainers"}
    )
    assert path == "build.repository"


def _user_script(tmp_path: Path) -> str:
    script = tmp_path / "train.py"
    script.write_text("print('training')\n")
    return str(script)


def test_launcher_options_need_a_launcher(tmp_path: Path) -> None:
    trainer = {"script": _user_script(tmp_path), "launcher": "torchrun"}
    errors = only("error", trainer={**trainer, "launcher": "python", "nproc_per_node": 2, "max_restarts": 1})
    assert [path for path, _, _ in errors] == ["trainer.nproc_per_node", "trainer.max_restarts"]
    assert all("launcher: torchrun" in (hint or "") for _, _, hint in errors)
    assert only("error", trainer={**trainer, "nproc_per_node": 2, "max_restarts": 1}) == []
    [(_, _, hint)] = only("error", trainer={"nproc_per_node": 2})  # the bundled trainer takes a flag
    assert "--nproc-per-node in trainer.args" in (hint or "")


def test_python_launcher_on_a_multi_gpu_machine_warns_for_user_code(tmp_path: Path) -> None:
    script = _user_script(tmp_path)
    [(path, message, hint)] = only("warning", trainer={"script": script})
    assert path == "trainer.launcher" and "it leaves 3 of the 4 GPUs of a node idle" in message
    assert "launcher: torchrun" in (hint or "")
    assert only("warning", trainer={"script": script, "launcher": "torchrun"}) == []
    assert only("warning") == []  # the bundled trainer starts one worker per GPU itself
    single = {"machine_type": "a2-highgpu-1g", "accelerator_count": 1}
    assert only("warning", trainer={"script": script}, **single) == []


def test_more_processes_than_gpus_warns(tmp_path: Path) -> None:
    trainer = {"script": _user_script(tmp_path), "launcher": "torchrun", "nproc_per_node": 8}
    [(path, message, hint)] = only("warning", trainer=trainer)
    assert path == "trainer.nproc_per_node" and "8 processes per node on 4 GPU(s)" in message
    assert "nproc_per_node: 4" in (hint or "")
    cpu = {"machine_type": "n1-standard-4", "accelerator_type": None, "accelerator_count": None}
    assert only("warning", trainer=trainer, **cpu) == []


def test_a_model_that_fits_ddp_is_quiet() -> None:
    assert findings(model_params="1B") == []  # 16 GB of model states on an A100 40GB


def test_the_bundled_trainer_is_told_to_shard_when_only_fsdp_fits() -> None:
    # 7.5B x 16 B = 120 GB per GPU under DDP; FSDP over the 8 GPUs: 15 GB of the 32 usable.
    [(path, message, hint)] = only("warning", model_params="7.5B")
    assert path == "trainer.args" and "need 120 GB per GPU" in message and "needs 15 GB" in message
    assert hint == "add --strategy=fsdp to trainer.args"
    assert only("warning", model_params="7.5B", trainer={"args": ["--strategy=fsdp"]}) == []
    script = {"script": str(Path(__file__)), "launcher": "torchrun"}  # code that may shard: quiet
    assert only("warning", model_params="7.5B", trainer=script) == []


def test_no_strategy_fitting_warns_on_model_params() -> None:
    script = {"script": str(Path(__file__)), "launcher": "torchrun"}  # code that may use any strategy
    [(path, message, hint)] = only("warning", model_params="30B", trainer=script)
    assert path == "model_params" and message.startswith("no strategy fits: DDP needs 480 GB per GPU")
    assert "ZeRO-3/FSDP over these 8 data-parallel GPUs still needs 60 GB" in message
    assert "fits from 15 GPUs" in message and "--tensor-parallel" in (hint or "")


def test_no_gpu_memory_no_verdict() -> None:
    assert findings(model_params="30B", machine_type="n1-standard-4", accelerator_type=None,
                    accelerator_count=0) == []  # fmt: skip


def test_a_hang_timeout_past_the_jobs_timeout_or_absurdly_short_is_a_warning() -> None:
    longer = only("warning", timeout="1h", health={"hang_timeout": "2h"})
    assert [(path, "timeout" in message) for path, message, _ in longer] == [("health.hang_timeout", True)]
    assert "2h" in longer[0][1] and "1h" in longer[0][1]
    short = only("warning", health={"hang_timeout": "5s"})
    assert [path for path, _, _ in short] == ["health.hang_timeout"]
    assert "5s" in short[0][1]
    assert only("warning", timeout="2h", health={"hang_timeout": "30m"}) == []
    assert only("warning", timeout="10m", health={"hang_timeout": "never"}) == []
    assert only("warning", timeout="10m") == []  # the default hang_timeout, never written: no word
