"""A local run's gs:// served over its gs:// folder (`vertexdist.local.gcs_server`), driven by the real
clients a script uses: google-cloud-storage here, pyarrow's GcsFileSystem (Ray's storage_path) and gcsfs
(pandas) in a child process with the replicas' variables, as a replica runs them (pyarrow holds the GIL
while it waits on an answer, so it cannot share a process with the server)."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage  # type: ignore[attr-defined]

from vertexdist.local.gcs_objects import ObjectFolder
from vertexdist.local.gcs_server import FolderStorageServer, storage_env
from vertexdist.local.job_services import JobServices
from vertexdist.local.metadata_server import JobIdentity
from vertexdist.local.plan import LaunchPlan, ReplicaLaunch

BUCKET = "my-bucket"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[FolderStorageServer]:
    server = FolderStorageServer(
        tmp_path / "gcs", tmp_path / "uploads", JobIdentity("p", "r", "job-1")
    ).start()
    yield server
    server.stop()


def client(server: FolderStorageServer) -> storage.Client:
    return storage.Client(
        project="p", credentials=AnonymousCredentials(), client_options={"api_endpoint": server.endpoint}
    )


def run_client(code: str, server: FolderStorageServer, timeout: float = 120) -> str:
    """`code` in a child Python with the variables a local run's replicas get (no other credentials)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GCE_", "STORAGE_", "CLOUD_"))}
    env.update(storage_env(server.endpoint, server.address))
    env["NO_GCE_CHECK"] = "true"
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


def test_the_variables_send_every_client_to_one_endpoint() -> None:
    env = storage_env("http://127.0.0.1:5", "127.0.0.1:6")
    assert env["STORAGE_EMULATOR_HOST"] == env["CLOUD_STORAGE_EMULATOR_ENDPOINT"] == "http://127.0.0.1:5"
    assert env["GCE_METADATA_ROOT"] == "127.0.0.1:6"
    assert env["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] == "false"
    assert "GCE_METADATA_ROOT" not in storage_env("http://127.0.0.1:5", None)


def test_google_cloud_storage_reads_and_writes_the_folder(
    served: FolderStorageServer, tmp_path: Path
) -> None:
    root = tmp_path / "gcs"
    (root / BUCKET / "in").mkdir(parents=True)
    (root / BUCKET / "in" / "train.csv").write_text("a,b\n1,2\n")  # what a replica wrote to /gcs
    bucket = client(served).bucket(BUCKET)
    assert bucket.blob("in/train.csv").download_as_bytes() == b"a,b\n1,2\n"
    assert bucket.blob("in/train.csv").download_as_bytes(start=2, end=4) == b"b\n1"

    bucket.blob("out/small.txt").upload_from_string("small")  # multipart
    big = bytes(range(256)) * 3000
    blob = bucket.blob("out/deep/big.bin", chunk_size=256 * 1024)  # resumable, in 3 chunks
    blob.upload_from_string(big)
    assert (root / BUCKET / "out" / "small.txt").read_text() == "small"
    assert (root / BUCKET / "out" / "deep" / "big.bin").read_bytes() == big
    assert bucket.get_blob("out/deep/big.bin").size == len(big)

    listed = client(served).list_blobs(BUCKET, prefix="out/", delimiter="/")
    assert [b.name for b in listed] == ["out/small.txt"]
    assert listed.prefixes == {"out/deep/"}
    names = [b.name for b in client(served).list_blobs(BUCKET, max_results=10, page_size=1)]
    assert names == ["in/train.csv", "out/deep/big.bin", "out/small.txt"]

    bucket.copy_blob(bucket.blob("out/small.txt"), bucket, "out/copy.txt")
    bucket.blob("out/small.txt").delete()
    assert sorted(p.name for p in (root / BUCKET / "out").iterdir()) == ["copy.txt", "deep"]
    with pytest.raises(exceptions.NotFound):
        bucket.blob("out/small.txt").download_as_bytes()


def _call(
    server: FolderStorageServer,
    verb: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection(server.endpoint.removeprefix("http://"), timeout=30)
    try:
        connection.request(verb, path, body, headers or {})
        answer = connection.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        connection.close()


def test_gclouds_forms_reach_the_folder(served: FolderStorageServer, tmp_path: Path) -> None:
    # As the gcloud CLI calls (the emulator's Cloud Storage serves the same, tests/emulator/): the bucket's
    # layout and managed folders first, a multipart upload with a single-quoted boundary and LF-only lines,
    # and a resumable upload at /resumable/upload/..., sent in two chunks.
    status, _, raw = _call(served, "GET", f"/storage/v1/b/{BUCKET}/storageLayout")
    assert status == 200 and json.loads(raw)["hierarchicalNamespace"] == {"enabled": False}
    status, _, raw = _call(served, "GET", f"/storage/v1/b/{BUCKET}/managedFolders")
    assert status == 200 and json.loads(raw)["items"] == []

    boundary = "===============7330845974216740156=="
    media = b"one\ntwo\r\n--not-the-boundary\n"
    body = b"\n".join(
        [
            b"--" + boundary.encode(),
            b"Content-Type: application/json",
            b"",
            b'{"name": "g/multi.txt"}',
            b"--" + boundary.encode(),
            b"Content-Type: text/plain",
            b"",
            media,
            b"--" + boundary.encode() + b"--",
            b"",
        ]
    )
    content_type = f"multipart/related; boundary='{boundary}'"
    status, _, raw = _call(
        served,
        "POST",
        f"/upload/storage/v1/b/{BUCKET}/o?uploadType=multipart",
        body,
        {"Content-Type": content_type},
    )
    assert status == 200, raw
    assert (tmp_path / "gcs" / BUCKET / "g" / "multi.txt").read_bytes() == media

    start = f"/resumable/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable"
    status, headers, raw = _call(
        served, "POST", start, b'{"name": "g/resumed.bin"}', {"Content-Type": "application/json"}
    )
    assert status == 200, raw
    session = headers["Location"].removeprefix(served.endpoint)
    status, headers, _ = _call(served, "PUT", session, b"abc", {"Content-Range": "bytes 0-2/*"})
    assert (status, headers.get("Range")) == (308, "bytes=0-2")
    status, _, raw = _call(served, "PUT", session, b"def", {"Content-Range": "bytes 3-5/6"})
    assert status == 200 and json.loads(raw)["size"] == "6"
    assert (tmp_path / "gcs" / BUCKET / "g" / "resumed.bin").read_bytes() == b"abcdef"


def test_a_name_a_folder_cannot_hold_fails_at_once_naming_the_path(served: FolderStorageServer) -> None:
    bucket = client(served).bucket(BUCKET)
    started = time.monotonic()
    with pytest.raises(exceptions.BadRequest, match=r"gs://my-bucket/a/\.\./b"):
        bucket.blob("a/../b").upload_from_string("x")
    assert time.monotonic() - started < 5  # an answer, not a retried 5xx


def test_a_link_in_the_folder_is_never_followed(served: FolderStorageServer, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("no")
    (tmp_path / "gcs" / BUCKET).mkdir(parents=True)
    (tmp_path / "gcs" / BUCKET / "link").symlink_to(outside)
    bucket = client(served).bucket(BUCKET)
    with pytest.raises(exceptions.Forbidden):
        bucket.blob("link/secret").download_as_bytes()
    with pytest.raises(exceptions.Forbidden):
        bucket.blob("link/new").upload_from_string("x")
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert [b.name for b in client(served).list_blobs(BUCKET)] == []


def test_an_empty_folder_is_listed_as_its_marker(tmp_path: Path) -> None:
    folder = ObjectFolder(tmp_path / "gcs", tmp_path / "scratch")
    (tmp_path / "gcs" / BUCKET / "a" / "empty").mkdir(parents=True)
    (tmp_path / "gcs" / BUCKET / "a" / "f").write_text("x")
    objects, prefixes, _ = folder.list(BUCKET, "a/")
    assert [o.name for o in objects] == ["a/empty/", "a/f"] and prefixes == []
    objects, prefixes, _ = folder.list(BUCKET, "a/", "/")
    assert [o.name for o in objects] == ["a/f"] and prefixes == ["a/empty/"]
    (tmp_path / "gcs" / BUCKET / "b").write_text("y")
    objects, prefixes, after = folder.list(BUCKET, "", "/", limit=1)
    assert (objects, prefixes) == ([], ["a/"]) and after
    objects, prefixes, after = folder.list(BUCKET, "", "/", after, limit=1)
    assert ([o.name for o in objects], prefixes, after) == (["b"], [], "")


def test_pyarrow_from_a_gs_uri_reaches_the_folder(served: FolderStorageServer, tmp_path: Path) -> None:
    source = tmp_path / "local-results"
    (source / "trial_0").mkdir(parents=True)
    (source / "trial_0" / "result.json").write_text('{"accuracy": 0.9}')
    out = run_client(
        f"""
        import json, pyarrow.fs as pafs
        fs, path = pafs.FileSystem.from_uri("gs://{BUCKET}/ray-results")  # as Ray's storage_path does
        assert fs.get_file_info(path).type == pafs.FileType.NotFound
        fs.create_dir(path + "/exp")
        with fs.open_output_stream(path + "/exp/state.json") as f:
            f.write(b"x" * 3_000_000)
        pafs.copy_files({str(source)!r}, "gs://{BUCKET}/ray-results/exp/trials")
        fs.move(path + "/exp/state.json", path + "/exp/moved.json")
        with fs.open_input_file(path + "/exp/trials/trial_0/result.json") as f:
            print(json.loads(f.read())["accuracy"])
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
        print(sorted(i.path for i in infos if i.type == pafs.FileType.File))
        """,
        served,
    )
    results = tmp_path / "gcs" / BUCKET / "ray-results" / "exp"
    assert out.splitlines() == [
        "0.9",
        str([f"{BUCKET}/ray-results/exp/moved.json", f"{BUCKET}/ray-results/exp/trials/trial_0/result.json"]),
    ]
    assert (results / "moved.json").stat().st_size == 3_000_000
    assert json.loads((results / "trials" / "trial_0" / "result.json").read_text()) == {"accuracy": 0.9}


def test_pandas_reads_an_object_through_gcsfs(served: FolderStorageServer, tmp_path: Path) -> None:
    (tmp_path / "gcs" / "data-bucket").mkdir(parents=True)
    (tmp_path / "gcs" / "data-bucket" / "train.csv").write_text("x,y\n1,2\n3,4\n")
    out = run_client(
        """
        import pandas
        frame = pandas.read_csv("gs://data-bucket/train.csv")
        print(int(frame["y"].sum()))
        frame.to_csv("gs://data-bucket/out/copy.csv", index=False)
        """,
        served,
    )
    assert out.strip() == "6"
    assert (tmp_path / "gcs" / "data-bucket" / "out" / "copy.csv").read_text() == "x,y\n1,2\n3,4\n"


def test_a_local_job_serves_its_gs_folder_and_an_emulator_job_its_storage(tmp_path: Path) -> None:
    replica = ReplicaLaunch(
        "workerpool0-0", 0, 0, "trainer", ("python",), {}, tmp_path, tmp_path / "log", "a:1"
    )
    plan = LaunchPlan("job-1", tmp_path, (replica,), None, 0, gcs_root=tmp_path / "gcs")
    services = JobServices(identity=JobIdentity("p", "r", "job-1"))
    env = services.start(plan).replicas[0].env
    try:
        (tmp_path / "gcs" / BUCKET).mkdir(parents=True)
        (tmp_path / "gcs" / BUCKET / "x").write_text("from /gcs")
        endpoint = env["STORAGE_EMULATOR_HOST"]
        assert env["CLOUD_STORAGE_EMULATOR_ENDPOINT"] == endpoint
        assert env["GCE_METADATA_ROOT"] == env["GCE_METADATA_HOST"]  # the job's own metadata server
        gcs = storage.Client(
            project="p", credentials=AnonymousCredentials(), client_options={"api_endpoint": endpoint}
        )
        assert gcs.bucket(BUCKET).blob("x").download_as_bytes() == b"from /gcs"
    finally:
        services.stop()
    emulator = JobServices(
        identity=JobIdentity("p", "r", "job-2"), env={"STORAGE_EMULATOR_HOST": "http://e:1"}
    )
    env = emulator.start(plan).replicas[0].env
    emulator.stop()
    assert env["STORAGE_EMULATOR_HOST"] == env["CLOUD_STORAGE_EMULATOR_ENDPOINT"] == "http://e:1"


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="the gcloud CLI is not installed")
def test_gcloud_storage_writes_and_moves_in_the_folder(served: FolderStorageServer, tmp_path: Path) -> None:
    # The real gcloud CLI, pointed at the server as docs/guide/gcloud.md points it at the emulator: a small
    # file goes up multipart, a big one resumable (over gcloud's 8 MiB threshold), and `mv` asks the
    # bucket's storage layout first.
    config = tmp_path / "gcloud-config"
    (config / "configurations").mkdir(parents=True)
    (config / "active_config").write_text("default")
    (config / "configurations" / "config_default").write_text(
        "[core]\nproject = p\ncheck_gce_metadata = false\n[auth]\ndisable_credentials = true\n"
        f"[api_endpoint_overrides]\nstorage = {served.endpoint}/\n"
    )
    env = {**os.environ, "CLOUDSDK_CONFIG": str(config), "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}
    small, big = tmp_path / "small.txt", tmp_path / "big.bin"
    small.write_text("hi from gcloud\n")
    big.write_bytes(os.urandom(9 << 20))
    for args in (
        ["cp", str(small), str(big), f"gs://{BUCKET}/in/"],
        ["mv", f"gs://{BUCKET}/in/small.txt", f"gs://{BUCKET}/kept/small.txt"],
    ):
        done = subprocess.run(
            ["gcloud", "storage", *args], env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "gcs" / BUCKET / "in" / "big.bin").read_bytes() == big.read_bytes()
    assert (tmp_path / "gcs" / BUCKET / "kept" / "small.txt").read_text() == "hi from gcloud\n"
    assert not (tmp_path / "gcs" / BUCKET / "in" / "small.txt").exists()
