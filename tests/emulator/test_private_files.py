"""The emulator's files are the user's alone and vertexdist's printouts mask secrets (issue 12): what
`submit --emulator` leaves in its data folder is 0600/0700, no secret is in its job folders or in anything
submit / status / logs print, while its REST API returns the real values, as Vertex's does."""

from __future__ import annotations

import json
import stat
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-emulated-42"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_emulator_files_are_private_and_printouts_mask_secrets(
    cli: Any, write_template: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in ("VERTEX_API_ENDPOINT", "STORAGE_EMULATOR_HOST"):
        monkeypatch.delenv(var, raising=False)
    path = write_template(
        "import os\nprint('plain is', os.environ['PLAIN'])\n",
        name="private-emulated",
        replicas=2,
        env={"API_TOKEN": SECRET, "PLAIN": "visible"},
    )
    data = tmp_path / "emulator-data"
    code, out, err = cli("submit", str(path), "--emulator", "--follow", "--emulator-data-dir", str(data))
    assert code == 0, err
    name = out.splitlines()[0]
    printed = [out + err]
    assert "[workerpool0-0] plain is visible" in out

    assert _mode(data) == 0o700
    resources = data / "resources"
    assert _mode(resources) == 0o700
    stored = sorted(resources.rglob("*.json"))
    assert len(stored) == 2  # the pipeline and its custom job
    assert all(_mode(p) == 0o600 and _mode(p.parent) == 0o700 for p in stored)
    jobs = sorted((data / "jobs").iterdir())
    assert len(jobs) == 1 and _mode(jobs[0]) == 0o700
    logs = sorted((jobs[0] / "logs").glob("*.log"))
    assert len(logs) == 2 and all(_mode(p) == 0o600 for p in logs)
    # Only the stored resources hold the real value (a Get returns it); nothing vertexdist wrote beside.
    holding = [p for p in data.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert holding and all(resources in p.parents for p in holding), holding

    with Emulator(data_dir=data) as emu:
        monkeypatch.setenv("VERTEX_API_ENDPOINT", emu.vertex_endpoint)
        with urllib.request.urlopen(f"{emu.vertex_endpoint}/v1/{name}", timeout=10) as response:
            assert SECRET in json.dumps(json.loads(response.read()))  # as Vertex's REST GET
        for command in (("status", name), ("status", name, "--json"), ("logs", name), ("list", "--json")):
            code, out, err = cli(*command, "--project", "test-proj")
            assert code == 0, (command, err)
            printed.append(out + err)
    assert all(SECRET not in text for text in printed)
    assert "********" in printed[1]
