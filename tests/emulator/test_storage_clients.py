"""The emulator's Cloud Storage through the gs:// clients an emulator job's script may use (issue 46), each in
a child Python with the variables the job's replicas get (`vertexdist.local.gcs_server.storage_env`, the
job's metadata server for google-cloud-cpp's token): pyarrow's GcsFileSystem from a plain gs:// URI (Ray's
storage_path), gcsfs through pandas, and gcsfs's `mv` (objects.moveTo, which torch.distributed.checkpoint's
fsspec writer uses)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from vertexdist.emulator.storage.server import StorageEmulator
from vertexdist.local.gcs_server import storage_env
from vertexdist.local.metadata_server import JobIdentity, MetadataServer

pytestmark = pytest.mark.integration
BUCKET = "vd-clients"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[StorageEmulator, dict[str, str]]]:
    emulator = StorageEmulator(data_dir=tmp_path / "storage")
    emulator.start()
    emulator.ensure_bucket(BUCKET)
    metadata = MetadataServer(JobIdentity("p", "us-central1", "job-1")).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GCE_", "STORAGE_", "CLOUD_"))}
    env.update({**metadata.env(), **storage_env(emulator.endpoint, metadata.address), "NO_GCE_CHECK": "true"})
    try:
        yield emulator, env
    finally:
        metadata.stop()
        emulator.stop()


def run_client(code: str, env: dict[str, str]) -> tuple[str, str]:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout, result.stderr


def test_pyarrow_gcsfs_and_pandas_reach_the_emulator_s_storage(
    served: tuple[StorageEmulator, dict[str, str]], tmp_path: Path
) -> None:
    emulator, env = served
    source = tmp_path / "train.csv"
    source.write_text("x,y\n1,2\n3,4\n")
    assert emulator.upload(source, f"gs://{BUCKET}/data/train.csv")  # an input a client uploaded
    out, err = run_client(
        f"""
        import fsspec, pandas, pyarrow.fs as pafs
        fs, path = pafs.FileSystem.from_uri("gs://{BUCKET}/ray-results")
        fs.create_dir(path + "/exp")
        with fs.open_output_stream(path + "/exp/result.json") as f:
            f.write(b'{{"accuracy": 0.9}}')
        print(int(pandas.read_csv("gs://{BUCKET}/data/train.csv")["y"].sum()))
        gcs = fsspec.filesystem("gs")
        gcs.mv("{BUCKET}/ray-results/exp/result.json", "{BUCKET}/ray-results/exp/final.json")
        print([name for name in sorted(gcs.find("{BUCKET}/ray-results")) if not name.endswith("/")])
        """,
        env,
    )
    assert out.splitlines() == ["6", str([f"{BUCKET}/ray-results/exp/final.json"])]
    assert "ray-results/exp/final.json" in emulator.md5_hashes(BUCKET, "ray-results/")
    assert "moveTo" not in err  # served, not gcsfs's fallback to a copy and a delete
