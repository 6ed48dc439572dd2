"""What emulator jobs see at /gcs is the emulated Cloud Storage: objects a client uploaded before a job are
files its replicas read, and what they write there (the model, anything else) is served through the storage
API once the job ended: the mirror on its own against a real storage emulator, then `submit --emulator`
end to end with google-cloud-storage before and after."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator
from vertexdist.emulator.storage.mirror import StorageMirror
from vertexdist.emulator.storage.server import StorageEmulator

pytestmark = pytest.mark.integration


@pytest.fixture
def storage(monkeypatch: pytest.MonkeyPatch) -> Iterator[StorageEmulator]:
    server = StorageEmulator()
    server.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.endpoint)
    try:
        yield server
    finally:
        server.stop()


def _client() -> Any:
    from google.cloud import storage

    return storage.Client(project="test-proj")


def _objects(bucket: str) -> dict[str, bytes]:
    """Name -> bytes of every object (a folder placeholder's are b"": the emulator serves none)."""
    client = _client()
    names = [blob.name for blob in client.list_blobs(bucket)]
    # A fresh blob per name: a listed one downloads from its mediaLink, which names the port of the emulator
    # that stored it (another one, in a test that restarts the emulator).
    return {n: b"" if n.endswith("/") else client.bucket(bucket).blob(n).download_as_bytes() for n in names}


def test_objects_become_files_and_files_become_objects(storage: StorageEmulator, tmp_path: Path) -> None:
    folder = tmp_path / "gcs"
    mirror = StorageMirror(storage, folder, tmp_path / "state.json")
    bucket = _client().create_bucket("data")
    bucket.blob("in/a.txt").upload_from_string(b"alpha")
    bucket.blob("in/empty").upload_from_string(b"")
    bucket.blob("placeholder/").upload_from_string(b"")  # the console's "create folder"
    assert mirror.pull() == 2
    assert (folder / "data" / "in" / "a.txt").read_bytes() == b"alpha"
    assert (folder / "data" / "in" / "empty").read_bytes() == b""
    assert (folder / "data" / "placeholder").is_dir()
    assert mirror.pull() == 0  # nothing changed: nothing read again

    # A job writes a new file, changes one and deletes one: after it, the objects say the same.
    (folder / "data" / "out").mkdir()
    (folder / "data" / "out" / "model.bin").write_bytes(b"weights")
    (folder / "data" / "in" / "a.txt").write_bytes(b"alpha, edited")
    (folder / "data" / "in" / "empty").unlink()
    (folder / "other-bucket").mkdir()
    (folder / "other-bucket" / "note").write_text("a bucket nobody made")
    assert mirror.push() == 4
    assert _objects("data") == {
        "in/a.txt": b"alpha, edited",
        "out/model.bin": b"weights",
        "placeholder/": b"",
    }
    assert _objects("other-bucket") == {"note": b"a bucket nobody made"}
    assert mirror.push() == 0

    # A client changes and deletes objects between jobs: the next job sees that.
    bucket.blob("in/a.txt").upload_from_string(b"alpha, from the client")
    bucket.blob("out/model.bin").delete()
    assert mirror.pull() == 1
    assert (folder / "data" / "in" / "a.txt").read_bytes() == b"alpha, from the client"
    assert not (folder / "data" / "out" / "model.bin").exists()


def test_a_running_jobs_change_is_not_undone_by_the_next_jobs_pull(
    storage: StorageEmulator, tmp_path: Path
) -> None:
    folder = tmp_path / "gcs"
    mirror = StorageMirror(storage, folder, tmp_path / "state.json")
    _client().create_bucket("data").blob("ckpt").upload_from_string(b"step 1")
    mirror.pull()
    (folder / "data" / "ckpt").write_bytes(b"step 2, being written")  # job A, still running
    assert mirror.pull() == 0  # job B starts: the object did not change, so A's file stays
    assert (folder / "data" / "ckpt").read_bytes() == b"step 2, being written"


def test_every_page_of_a_listing_is_mirrored_and_none_is_taken_for_deleted(
    storage: StorageEmulator, tmp_path: Path
) -> None:
    """Cloud Storage lists at most maxResults objects (1000) a page: the objects after the first page are
    files too, and a pull does not take them for deleted and remove their files."""
    folder = tmp_path / "gcs"
    mirror = StorageMirror(storage, folder, tmp_path / "state.json")
    mirror.page_size = 2
    client = _client()
    for bucket_name in ("paged-a", "paged-b", "paged-c"):  # the bucket listing has pages too
        bucket = client.create_bucket(bucket_name)
        for n in range(5):
            bucket.blob(f"shard-{n}").upload_from_string(f"{bucket_name} {n}")
    assert mirror.pull() == 15
    assert mirror.pull() == 0
    found = {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()}
    assert found == {
        f"{b}/shard-{n}": f"{b} {n}" for b in ("paged-a", "paged-b", "paged-c") for n in range(5)
    }
    assert mirror.push() == 0  # nothing uploaded again, nothing deleted


def test_objects_no_file_can_hold_are_left_out(storage: StorageEmulator, tmp_path: Path) -> None:
    folder = tmp_path / "gcs"
    bucket = _client().create_bucket("odd")
    for name in ("a", "a/b", "x//y", "ok"):
        bucket.blob(name).upload_from_string(name.encode())
    StorageMirror(storage, folder, tmp_path / "state.json").pull()
    found = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    # `a` and `a/b` cannot both be (gcsfuse shows the folder too); `x//y` has an empty segment.
    assert "odd/ok" in found and "odd/x/y" not in found
    assert ("odd/a" in found) != ("odd/a/b" in found)


JOB_SCRIPT = """\
import os, pathlib
text = open("/gcs/inputs-bucket/data/input.txt").read()
model = pathlib.Path(os.environ["AIP_MODEL_DIR"].replace("gs://", "/gcs/"))
model.mkdir(parents=True, exist_ok=True)
(model / "model.txt").write_text("trained on " + text)
results = pathlib.Path("/gcs/inputs-bucket/results")
results.mkdir(exist_ok=True)
(results / "summary.json").write_text('{"read": %d}' % len(text))
print("AIP_MODEL_DIR", os.environ["AIP_MODEL_DIR"], flush=True)
"""


@pytest.mark.slow
def test_submit_emulator_reads_an_upload_at_gcs_and_its_writes_are_objects_after(
    cli: Any, write_template: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host_gcs: Any
) -> None:
    data = tmp_path / "emulator-data"
    with Emulator(data_dir=data) as emu:  # before the job: a client uploads its input
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emu.storage_endpoint)
        _client().create_bucket("inputs-bucket").blob("data/input.txt").upload_from_string("the input")
    template = write_template(JOB_SCRIPT, name="gcs-idiom")
    code, out, err = cli("submit", str(template), "--emulator", "--follow", "--emulator-data-dir", str(data))
    assert code == 0, out + err
    assert "job SUCCEEDED: gcs-idiom" in err
    assert "warning: /gcs" not in out + err

    with Emulator(data_dir=data) as emu:  # after it: its model and its other writes, as objects
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emu.storage_endpoint)
        monkeypatch.setenv("VERTEX_API_ENDPOINT", emu.vertex_endpoint)
        [name] = [n for n in emu.store.names() if "/customJobs/" in n]  # (its pipeline's too)
        assert json.loads(_objects("inputs-bucket")["results/summary.json"]) == {"read": 9}
        code, out, err = cli("outputs", name, "--json")
        assert code == 0, out + err
        listed = json.loads(out)
        assert [f["path"] for f in listed["files"]] == ["model/model.txt"]
        bucket, _, prefix = listed["uri"].removeprefix("gs://").partition("/")
        assert _objects(bucket)[f"{prefix}model/model.txt"] == b"trained on the input"
        downloaded = tmp_path / "downloaded"
        code, out, err = cli("outputs", name, "--download", str(downloaded))
        assert code == 0, out + err
        assert [p.relative_to(downloaded).as_posix() for p in downloaded.rglob("*") if p.is_file()] == [
            "model/model.txt"
        ]
        assert (downloaded / "model" / "model.txt").read_text() == "trained on the input"


def test_an_emulator_that_cannot_map_gcs_says_why_once_as_it_starts(no_user_namespaces: Any) -> None:
    import subprocess
    import sys

    code = "from vertexdist.emulator import Emulator\nwith Emulator():\n    pass\n"
    result = subprocess.run(
        no_user_namespaces([sys.executable, "-c", code]), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("warning: /gcs is not this job's Cloud Storage here") == 1, result.stderr


UPLOAD_AS_A_CLIENT = """\
import os, sys
from google.cloud import storage
from vertexdist.emulator import Emulator
with Emulator(data_dir=sys.argv[1]) as emu:
    os.environ["STORAGE_EMULATOR_HOST"] = emu.storage_endpoint
    bucket = storage.Client(project="test-proj").create_bucket("inputs-bucket")
    bucket.blob("data/input.txt").upload_from_string("the input")
"""

READ_BACK_AS_A_CLIENT = """\
import json, os, sys
from google.cloud import storage
from vertexdist.emulator import Emulator
with Emulator(data_dir=sys.argv[1]) as emu:
    os.environ["STORAGE_EMULATOR_HOST"] = emu.storage_endpoint
    client = storage.Client(project="test-proj")
    found = {
        bucket: {
            blob.name: client.bucket(bucket).blob(blob.name).download_as_text()
            for blob in client.list_blobs(bucket)
            if not blob.name.endswith((".tar.gz", "/"))
        }
        for bucket in ("vd-staging", "inputs-bucket")
    }
print(json.dumps(found))
"""


@pytest.mark.slow
def test_an_ordinary_users_emulator_job_reads_and_writes_the_emulated_storage_at_gcs(
    nobody: Any, host_gcs: Any
) -> None:
    """As `nobody` (no root, no container runtime): a client's upload is at /gcs for the job, and what the job
    wrote through /gcs is served by the emulated Cloud Storage afterwards."""
    import subprocess

    work = nobody.folder("emulator-job")
    data = work / "emulator-data"
    (work / "train.py").write_text(JOB_SCRIPT)
    (work / "job.yaml").write_text(
        "display_name: gcs-idiom\nproject: test-proj\nlocation: us-central1\n"
        "staging_bucket: gs://vd-staging/staging\n"
        "container_uri: us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest\n"
        "machine_type: n1-standard-4\nreplica_count: 2\ntrainer:\n  script: train.py\n"
    )

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            nobody.argv(nobody.python, *argv),
            env=nobody.env(),
            cwd=work,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    run("-c", UPLOAD_AS_A_CLIENT, str(data))
    submitted = run(
        "-m", "vertexdist", "submit", "job.yaml", "--emulator", "--follow", "--emulator-data-dir", str(data)
    )
    assert "job SUCCEEDED: gcs-idiom" in submitted.stderr
    assert "warning: /gcs" not in submitted.stdout + submitted.stderr
    # After the job, a client of the emulated Cloud Storage reads what the job wrote through /gcs.
    objects = json.loads(run("-c", READ_BACK_AS_A_CLIENT, str(data)).stdout)
    [model] = [name for name in objects["vd-staging"] if name.endswith("/model/model.txt")]
    assert objects["vd-staging"][model] == "trained on the input"
    assert json.loads(objects["inputs-bucket"]["results/summary.json"]) == {"read": 9}
    wrote = data / "gcs" / "inputs-bucket" / "results" / "summary.json"
    assert wrote.stat().st_uid == nobody.uid  # written as the user, not as root
    # ... and `outputs --download`, the command submit printed, fetches the job's outputs.
    pipeline = next(line.strip() for line in submitted.stdout.splitlines() if "/trainingPipelines/" in line)
    downloaded = work / "downloaded"
    emulator = ("--emulator", "--emulator-data-dir", str(data))
    run("-m", "vertexdist", "outputs", pipeline, *emulator, "--download", str(downloaded))
    assert [p.relative_to(downloaded).as_posix() for p in downloaded.rglob("*") if p.is_file()] == [
        "model/model.txt"
    ]
    assert (downloaded / "model" / "model.txt").read_text() == "trained on the input"
