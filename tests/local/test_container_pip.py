"""The emulator's pip settings in its job containers (`vertexdist.local.container_pip`): pure."""

from __future__ import annotations

from pathlib import Path

from vertexdist.local.container_pip import ContainerPip, container_pip, local_source
from vertexdist.local.environment import JobContext
from vertexdist.local.runtime_containers import runtime_job_plan
from vertexdist.wire.job_spec import parse_job_spec

FOLDERS = {"/opt/wheels", "/srv/pypi/simple", "/tmp/house"}


def _is_dir(path: str) -> bool:
    return path in FOLDERS


def test_local_sources_are_file_urls_and_absolute_paths() -> None:
    assert local_source("file:///srv/pypi/simple/") == "/srv/pypi/simple"
    assert local_source("file:///a%20b") == "/a b"
    assert local_source("/opt/wheels") == "/opt/wheels"
    assert local_source("https://pypi.org/simple") is None
    assert local_source("wheels") is None


def test_pip_sources_pass_and_their_local_folders_are_mounted() -> None:
    environ = {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": "/opt/wheels /tmp/house https://example.com/links /missing",
        "PIP_EXTRA_INDEX_URL": "file:///srv/pypi/simple https://mirror.example/simple",
        "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",  # the image keeps its own bundle
        "PATH": "/usr/bin",
    }
    pip = container_pip(environ, is_dir=_is_dir)
    assert pip.env == {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": environ["PIP_FIND_LINKS"],
        "PIP_EXTRA_INDEX_URL": environ["PIP_EXTRA_INDEX_URL"],
    }
    # A local index comes with its parent: a mirror's pages link to ../../files/ beside simple/.
    assert pip.folders == ("/opt/wheels", "/srv/pypi", "/tmp/house")


def test_no_pip_settings_change_nothing() -> None:
    assert container_pip({"PATH": "/usr/bin"}, is_dir=_is_dir) == ContainerPip()


def test_container_jobs_get_them_read_only_beneath_the_jobs_own_variables() -> None:
    spec = {
        "workerPoolSpecs": [
            {
                "replicaCount": 1,
                "containerSpec": {
                    "imageUri": "gcr.io/x/y:1",
                    "command": ["sh", "-c", "pip install --user /gcs/b/p.tar.gz"],
                    "env": [{"name": "PIP_NO_INDEX", "value": "0"}],
                },
            }
        ]
    }
    job = parse_job_spec(spec)
    ctx = JobContext(job_id="j1", project="p", region="us-central1", gcs_root="/e/gcs")
    pip = ContainerPip({"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/opt/wheels"}, ("/opt/wheels",))
    plan = runtime_job_plan(job, ctx, Path("/e/jobs/j1"), "docker", pip=pip)
    (replica,) = plan.launch.replicas
    assert replica.env["PIP_FIND_LINKS"] == "/opt/wheels"
    assert replica.env["PIP_NO_INDEX"] == "0"  # the job's own value wins
    argv = list(replica.argv)
    assert "/opt/wheels:/opt/wheels:ro" in argv and "PIP_FIND_LINKS" in argv
    assert "PIP_FIND_LINKS=/opt/wheels" not in argv  # values come from the client's environment, as secrets
