"""Issue 34: every submitted job keeps its run record beside its outputs (the template's text, the request
as sent, the package's SHA-256 and a copy of it, the code's git commit and whether it was dirty), labels
the job with the commit; `describe` shows the record and `rerun` sends the very same request again with
only a new output folder."""

from __future__ import annotations

import hashlib
import json
import subprocess
from typing import Any

from vertexdist.emulator import Emulator


def _git(folder: Any, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_submit_keeps_a_record_and_rerun_sends_the_same_request(
    emu: Emulator, cli: Any, write_template: Any
) -> None:
    emu.service.hold_get_s = 0.0  # `describe` reads running jobs: answer at once (the fixture resets it)
    path = write_template("print('recorded')\n", name="recorded-job")
    folder = path.parent
    _git(folder, "init", "-q")
    _git(folder, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    _git(folder, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "code")
    commit = _git(folder, "rev-parse", "HEAD")
    (folder / "notes.txt").write_text("not committed")  # the code folder is dirty now

    code, out, err = cli("submit", str(path), "--detach")  # the record is kept as the job is created
    assert code == 0, err
    first = out.splitlines()[0]
    sent = emu.store.get(first)
    assert sent is not None and sent["labels"]["vertexdist-git"] == f"{commit[:12]}-dirty"

    code, out, err = cli("describe", first, "--json")
    assert code == 0, err
    record = json.loads(out)
    assert record["job"] == first and record["template"]["text"] == path.read_text()
    assert record["code"] == {"folder": str(folder), "commit": commit, "dirty": True}
    assert record["request"]["trainingPipeline"]["labels"] == sent["labels"]
    package = record["package"]
    bucket, _, blob = package["uri"].removeprefix("gs://").partition("/")
    from google.cloud import storage

    data = storage.Client(project="test-proj").bucket(bucket).blob(blob).download_as_bytes()
    assert hashlib.sha256(data).hexdigest() == package["sha256"]
    code, out, err = cli("describe", first)
    assert code == 0 and f"at {commit} (dirty: changes not committed)" in out, err

    # The package is gone from its URI: rerun puts the very same bytes back from the record's copy.
    storage.Client(project="test-proj").bucket(bucket).blob(blob).delete()
    code, out, err = cli("rerun", first)
    assert code == 0, err
    second = out.splitlines()[0]
    assert second != first and "put back from the record" in err
    # Issue 42, item 9: the wait for the rerun said nothing; each state it reaches is said as it comes.
    assert f"job SUCCEEDED: {second}" in err, err
    again = storage.Client(project="test-proj").bucket(bucket).blob(blob).download_as_bytes()
    assert again == data

    code, out, err = cli("describe", second, "--json")
    assert code == 0, err
    rerun_record = json.loads(out)
    assert rerun_record["rerun_of"] == first
    old = record["request"]["trainingPipeline"]["trainingTaskInputs"]["baseOutputDirectory"][
        "outputUriPrefix"
    ]
    new = rerun_record["request"]["trainingPipeline"]["trainingTaskInputs"]["baseOutputDirectory"][
        "outputUriPrefix"
    ]
    assert new != old and new.rsplit("/", 1)[0] == old.rsplit("/", 1)[0]
    # Byte for byte the same request, but for its output folder and its own health mark (issue 41); and
    # the emulator got exactly that.
    from vertexdist.render.health_mark import without_mark

    again_request = json.dumps(without_mark(rerun_record["request"])).replace(new, old)
    assert again_request == json.dumps(without_mark(record["request"]))
    received = emu.store.get(second)
    assert received is not None
    for field, value in rerun_record["request"]["trainingPipeline"].items():
        assert received[field] == value, field


def test_rerun_refuses_a_record_rewritten_in_the_bucket(emu: Emulator, cli: Any, write_template: Any) -> None:
    """Issue 41: a job can rewrite its siblings' records (they sit in the bucket it writes). A record whose
    command or package URI was changed is refused, showing the difference; describe warns; nothing is sent
    and no object is overwritten."""
    from google.cloud import storage

    emu.service.hold_get_s = 0.0
    path = write_template("print('recorded')\n", name="tampered-job")
    code, out, err = cli("submit", str(path), "--detach")
    assert code == 0, err
    first = out.splitlines()[0]
    code, out, err = cli("describe", first, "--json")
    assert code == 0, err
    record = json.loads(out)
    output = record["request"]["trainingPipeline"]["trainingTaskInputs"]["baseOutputDirectory"][
        "outputUriPrefix"
    ]
    bucket_name, _, prefix = output.removeprefix("gs://").partition("/")
    bucket = storage.Client(project="test-proj").bucket(bucket_name)
    key = f"{prefix.rsplit('/', 1)[0]}/vertexdist-records/{first.rsplit('/', 1)[1]}/record.json"
    victim = bucket.blob("prod/important.txt")
    victim.upload_from_string(b"important")
    pools = record["request"]["trainingPipeline"]["trainingTaskInputs"]["workerPoolSpecs"]
    pools[0]["pythonPackageSpec"]["args"] = ["--planted"]
    record["package"]["uri"] = f"gs://{bucket_name}/prod/important.txt"
    bucket.blob(key).upload_from_string(json.dumps(record))
    jobs_before = len(emu.store.names())

    code, out, err = cli("describe", first)
    assert code == 0 and "warning" in err and "--planted" in err, err
    code, out, err = cli("rerun", first, "--detach")
    assert code == 1 and "args" in err and "rerun sends nothing" in err, err
    assert len(emu.store.names()) == jobs_before
    assert victim.download_as_bytes() == b"important"
