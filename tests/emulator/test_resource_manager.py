"""Resource Manager's projects.get as the emulator answers it (pure)."""

from __future__ import annotations

import pytest

from vertexdist.emulator.resource_manager.projects import project_answer
from vertexdist.emulator.vertex.jobs import ApiError
from vertexdist.local.metadata_server import JobIdentity
from vertexdist.wire.projects import project_number


def test_v3_and_v1_give_the_number_the_metadata_server_gives() -> None:
    number = JobIdentity("my-project", "us-central1", "1").project_number
    assert project_number("my-project") == number and len(number) == 12
    v3 = project_answer("GET", "/v3/projects/my-project", [])
    assert v3 is not None and v3["name"] == f"projects/{number}" and v3["projectId"] == "my-project"
    v1 = project_answer("GET", "/v1/projects/my-project", [])
    assert v1 is not None and v1["projectNumber"] == number and v1["lifecycleState"] == "ACTIVE"
    by_number = project_answer("GET", f"/v3/projects/{number}", ["other-project", "my-project"])
    assert by_number is not None and by_number["projectId"] == "my-project"
    assert project_number("other-project") != number


def test_other_paths_are_not_its_and_bad_ids_are_refused() -> None:
    assert project_answer("GET", "/v1/projects/my-project/locations/us-central1/customJobs", []) is None
    assert project_answer("POST", "/v3/projects/my-project", []) is None
    for path, status in (("/v3/projects/Bad_Id", 400), ("/v3/projects/123456789012", 403)):
        with pytest.raises(ApiError) as caught:
            project_answer("GET", path, [])
        assert caught.value.code == status
