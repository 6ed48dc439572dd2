"""Which CustomJobs' Cloud Logging entries are a pipeline task's lines (pure, no run)."""

from __future__ import annotations

import json

from vertexdist.jobs.pipeline_logs import prefixed, task_jobs

JOB = "projects/p/locations/us-central1/customJobs"


def test_each_task_reads_its_main_job_and_the_custom_jobs_it_started() -> None:
    resources = {
        "resources": [
            {
                "resourceType": "CustomJob",
                "resourceUri": f"https://us-central1-aiplatform.googleapis.com/v1/{JOB}/7",
            },
            {"resourceType": "Model", "resourceUri": "https://x/v1/projects/p/locations/l/models/1"},
        ]
    }
    run = {
        "jobDetail": {
            "taskDetails": [
                {"taskName": "pipe", "state": "RUNNING"},  # the root: no job of its own
                {
                    "taskName": "prep",
                    "state": "SUCCEEDED",
                    "createTime": "2026-01-01T00:00:00Z",
                    "executorDetail": {"containerDetail": {"mainJob": f"{JOB}/1"}},
                },
                {
                    "taskName": "train",
                    "state": "RUNNING",
                    "executorDetail": {
                        "containerDetail": {"mainJob": f"{JOB}/2", "failedMainJobs": [f"{JOB}/3"]},
                        "customJobDetail": {"job": f"{JOB}/7"},
                    },
                    "execution": {"metadata": {"output:gcp_resources": json.dumps(resources)}},
                },
                {"taskName": "cached", "state": "SKIPPED"},
                {"taskName": "odd", "executorDetail": {"containerDetail": {"mainJob": "not/a/job"}}},
            ]
        }
    }
    found = [(t.task, t.job.rsplit("/", 1)[-1], t.ended) for t in task_jobs(run)]
    assert found == [("prep", "1", True), ("train", "3", False), ("train", "2", False), ("train", "7", False)]
    assert task_jobs(run)[0].create_time == "2026-01-01T00:00:00Z"
    assert task_jobs({}) == []


def test_lines_are_prefixed_by_task_and_by_replica_past_the_first() -> None:
    assert prefixed("train", "workerpool0-0", "a\nb") == ["train: a", "train: b"]
    assert prefixed("train", "workerpool1-2", "c") == ["train/workerpool1-2: c"]
    assert prefixed("prep", "", "") == ["prep: "]
