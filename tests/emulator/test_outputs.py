"""`vertexdist outputs` of a finished emulator job, through google-cloud-storage against the emulator's
Cloud Storage: what the job's replicas wrote under its output folder is listed, downloaded byte for byte,
skipped when already there, and an interrupted download continues where it stopped."""

from __future__ import annotations

import json
import secrets
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from vertexdist.backends.config import Target
from vertexdist.backends.download import download
from vertexdist.backends.vertex import VertexBackend
from vertexdist.emulator import Emulator

pytestmark = pytest.mark.integration

PARENT = "projects/test-proj/locations/us-central1"
MODEL_BYTES = 3 << 20
WRITER = (
    "import os, pathlib, random\n"
    "def local(uri):\n"
    "    return pathlib.Path(uri.replace('gs://', '/gcs/'))  # as on Vertex: Cloud Storage FUSE\n"
    "model = local(os.environ['AIP_MODEL_DIR'])\n"
    "model.mkdir(parents=True, exist_ok=True)\n"
    f"(model / 'model.bin').write_bytes(random.Random(1).randbytes({MODEL_BYTES}))\n"
    "checkpoints = local(os.environ['AIP_CHECKPOINT_DIR'])\n"
    "checkpoints.mkdir(parents=True, exist_ok=True)\n"
    "(checkpoints / 'step-1.pt').write_bytes(b'checkpoint')\n"
    "(model.parent / 'metrics.json').write_text('{\"loss\": 0.1}')\n"
)


@pytest.fixture
def finished_job(emu: Emulator, job_client: Any, pool: Any) -> tuple[str, Path]:
    """A job that wrote a model, a checkpoint and metrics; its name and where its replicas wrote them."""
    folder = f"out/{secrets.token_hex(4)}"
    spec = {
        "worker_pool_specs": [pool(WRITER)],
        "base_output_directory": {"output_uri_prefix": f"gs://vd-staging/{folder}"},
    }
    job = job_client.create_custom_job(parent=PARENT, custom_job={"display_name": "writer", "job_spec": spec})
    deadline = time.monotonic() + 60
    while job_client.get_custom_job(name=job.name).state.name != "JOB_STATE_SUCCEEDED":
        assert time.monotonic() < deadline, "the job did not succeed"
        time.sleep(0.05)
    return str(job.name), emu.data_dir / "gcs" / "vd-staging" / folder  # type: ignore[operator]


def written(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_outputs_lists_downloads_and_then_skips_what_the_job_wrote(
    host_gcs: Any, finished_job: tuple[str, Path], cli: Any, tmp_path: Path
) -> None:
    """The job wrote through /gcs, as on Vertex (host_gcs first: the host's /gcs is seen before the job)."""
    name, wrote = finished_job
    expected = written(wrote)
    assert set(expected) == {"model/model.bin", "checkpoints/step-1.pt", "metrics.json"}
    code, out, err = cli("outputs", name)
    assert code == 0, err
    assert "3 file(s), 3.0 MiB" in out and "model/model.bin" in out and "3.0 MiB" in out
    code, out, _ = cli("outputs", name, "--json")
    listed = json.loads(out)
    assert {f["path"]: f["size"] for f in listed["files"]} == {k: len(v) for k, v in expected.items()}
    assert all(f["md5Hash"] for f in listed["files"])

    dest = tmp_path / "got"
    code, out, err = cli("outputs", name, "--download", str(dest))
    assert code == 0, err
    assert written(dest) == expected
    assert out.count("downloaded ") == 3
    code, out, err = cli("outputs", name, "--download", str(dest))
    assert code == 0 and out.count("unchanged, skipped") == 3 and "0 downloaded" in err
    (dest / "metrics.json").write_text("edited")
    code, out, _ = cli("outputs", name, "--download", str(dest), "--json")
    report = json.loads(out)
    assert report["downloaded"] == ["metrics.json"] and len(report["skipped"]) == 2
    assert written(dest) == expected


def test_an_interrupted_download_continues_and_never_leaves_a_half_file(
    emu: Emulator, finished_job: tuple[str, Path], tmp_path: Path
) -> None:
    name, wrote = finished_job
    target = Target(
        project="test-proj",
        location="us-central1",
        api_endpoint=emu.vertex_endpoint,
        api_transport="rest",
        storage_endpoint=emu.storage_endpoint,
    )
    source = VertexBackend(target).outputs(name)
    files = [f for f in source.files() if f.path == "model/model.bin"]
    dest = tmp_path / "got"
    got = {"bytes": 0}

    def stop_after_a_megabyte(file: Any, more: int) -> None:
        got["bytes"] += more
        if got["bytes"] >= 1 << 20:
            raise KeyboardInterrupt  # as Ctrl-C would, mid-file

    with pytest.raises(KeyboardInterrupt):
        download(source, files, dest, progress=stop_after_a_megabyte)
    assert not (dest / "model" / "model.bin").exists()
    (part,) = (dest / "model").iterdir()
    assert part.name.startswith(".model.bin.") and part.name.endswith(".part")
    kept = part.stat().st_size
    assert 1 << 20 <= kept < MODEL_BYTES

    report = download(source, files, dest)
    assert report.resumed == {"model/model.bin": kept}
    assert report.bytes == MODEL_BYTES - kept
    assert (dest / "model" / "model.bin").read_bytes() == (wrote / "model" / "model.bin").read_bytes()
    assert list((dest / "model").iterdir()) == [dest / "model" / "model.bin"]


def test_a_job_without_an_output_folder_says_so(emu: Emulator, job_client: Any, pool: Any, cli: Any) -> None:
    job = job_client.create_custom_job(
        parent=PARENT, custom_job={"display_name": "plain", "job_spec": {"worker_pool_specs": [pool("pass")]}}
    )
    code, _, err = cli("outputs", job.name)
    assert code == 1 and "names no output folder" in err and "base_output_dir" in err


def wait_until_done(job_client: Any, name: str) -> Any:
    deadline = time.monotonic() + 60
    while True:
        job = job_client.get_custom_job(name=name)
        if job.state.name in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"):
            return job
        assert time.monotonic() < deadline, "the job did not end"
        time.sleep(0.05)


def writer_job(job_client: Any, pool: Any, files: dict[str, bytes]) -> str:
    """A job whose replica writes `files` (path under its output folder -> bytes); its name."""
    code = (
        "import os, pathlib\n"
        "out = pathlib.Path(os.environ['VERTEXDIST_GCS_ROOT'], os.environ['AIP_MODEL_DIR'][5:]).parent\n"
        f"for path, data in {files!r}.items():\n"
        "    (out / path).parent.mkdir(parents=True, exist_ok=True)\n"
        "    (out / path).write_bytes(data)\n"
    )
    spec = {
        "worker_pool_specs": [pool(code)],
        "base_output_directory": {"output_uri_prefix": f"gs://vd-staging/out/{secrets.token_hex(4)}"},
    }
    job = job_client.create_custom_job(parent=PARENT, custom_job={"display_name": "writer", "job_spec": spec})
    return str(job.name)


def test_an_empty_file_is_published_with_every_other(job_client: Any, pool: Any, cli: Any) -> None:
    # Ray Train writes an empty .validate_storage_marker; the files after it were lost with it (issue 27).
    files = {"a.txt": b"a", "model/.validate_storage_marker": b"", "model/weights.bin": b"w" * 100, "z": b"z"}
    name = writer_job(job_client, pool, files)
    assert wait_until_done(job_client, name).state.name == "JOB_STATE_SUCCEEDED"
    code, out, err = cli("outputs", name, "--json")
    assert code == 0, err
    assert {f["path"]: f["size"] for f in json.loads(out)["files"]} == {k: len(v) for k, v in files.items()}


def test_outputs_that_cannot_be_published_fail_the_job_and_say_which(
    job_client: Any, pool: Any, cli: Any
) -> None:
    # Cloud Storage takes no object name with a line feed; the other files are still published.
    files = {"fine.txt": b"fine", "bad\nname.txt": b"bad"}
    name = writer_job(job_client, pool, files)
    job = wait_until_done(job_client, name)
    assert job.state.name == "JOB_STATE_FAILED"
    assert "1 of 2 output file(s)" in job.error.message and "'bad\\nname.txt'" in job.error.message
    _code, out, err = cli("status", name)
    assert "could not be published" in out + err
    _code, out, err = cli("outputs", name, "--json")
    assert [f["path"] for f in json.loads(out)["files"]] == ["fine.txt"]


@pytest.mark.timeout(300)
def test_a_storage_emulator_that_is_gone_is_said_at_once_and_leaves_no_part(
    finished_job: tuple[str, Path], cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, _wrote = finished_job
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", dead)
    started = time.monotonic()
    code, _out, err = cli("outputs", name, "--download", str(tmp_path / "got"))
    assert time.monotonic() - started < 20  # not the storage client's two minutes of retries
    assert code == 1 and "internal error" not in err
    assert f"nothing answers at {dead}" in err and "STORAGE_EMULATOR_HOST" in err
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]
