"""State shared through the temp folder is each user's own: a folder another user made there first (root's
first local-run, say) stops no one, and nothing another user left there is read or written."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from vertexdist.local import ports
from vertexdist.shipped.vertexdist_launcher import ray_node
from vertexdist.user_temp import user_base_dir, user_temp_dir


def test_the_users_folder_is_private_and_found_again(tmp_path: Path) -> None:
    folder = user_temp_dir("ports", tmp_path)
    assert folder == tmp_path / f"vertexdist-{os.getuid()}" / "ports"
    assert stat.S_IMODE(folder.parent.stat().st_mode) == 0o700
    assert user_temp_dir("ports", tmp_path) == folder


def test_a_link_in_place_of_the_users_folder_is_passed_over(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / f"vertexdist-{os.getuid()}").symlink_to(elsewhere)  # anyone may plant one in /tmp
    assert user_base_dir(tmp_path) == tmp_path / f"vertexdist-{os.getuid()}-1"
    assert list(elsewhere.iterdir()) == []


def test_a_folder_that_another_user_made_is_passed_over(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a folder another user owns needs root")
    taken = tmp_path / f"vertexdist-{os.getuid()}"
    taken.mkdir(mode=0o755)
    os.chown(taken, 65534, 65534)
    assert user_base_dir(tmp_path) == tmp_path / f"vertexdist-{os.getuid()}-1"
    assert list(taken.iterdir()) == []


def test_a_loose_mode_is_made_private(tmp_path: Path) -> None:
    folder = tmp_path / f"vertexdist-{os.getuid()}"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    assert user_base_dir(tmp_path) == folder
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_port_claims_and_ray_links_live_in_the_users_folder() -> None:
    assert ports._claims_dir().parent.name.startswith(f"vertexdist-{os.getuid()}")
    target = Path(tempfile.mkdtemp()) / ("x" * 60)
    short, link = ray_node.short_temp_dir(target)
    try:
        assert link is not None and link.parent.name == f"vxray-{os.getuid()}"
        assert Path(short).resolve() == target.resolve()
    finally:
        ray_node.remove_link(link)


def test_a_replicas_ray_links_go_to_the_machines_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A local run's replica has a TMPDIR in the job's folder, as long as what the link shortens: its links
    # go to the temp folder the replica would have had (VERTEXDIST_HOST_TMPDIR), where they are short.
    machine = tmp_path / "t"
    machine.mkdir()
    replica_temp = tmp_path / ("r" * 60)
    replica_temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(replica_temp))
    monkeypatch.setenv("VERTEXDIST_HOST_TMPDIR", str(machine))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    _short, link = ray_node.short_temp_dir(replica_temp / "ray")
    try:
        assert link is not None and link.parent == machine / f"vxray-{os.getuid()}"
    finally:
        ray_node.remove_link(link)


NOBODY_RUN = """
import json, sys
from pathlib import Path
from vertexdist.local.ports import reserve_ports, _claims_dir
from vertexdist.shipped.vertexdist_launcher.ray_node import short_temp_dir, remove_link
held = reserve_ports(2)
target = Path(sys.argv[1]) / ("x" * 60)
short, link = short_temp_dir(target)
print(json.dumps({"claims": str(_claims_dir()), "ports": held.ports, "link": str(link)}))
remove_link(link)
held.release()
"""


def test_another_users_run_before_this_one_stops_nothing(tmp_path: Path, nobody: Any) -> None:
    """The issue's case: root ran vertexdist first (its folders are in the shared temp folder, root's own,
    0755, under the old names and the new); then an ordinary user's local-run reserves its ports."""
    shared = nobody.base / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp
    for name in ("vertexdist-ports", f"vertexdist-{nobody.uid}", f"vxray-{nobody.uid}"):
        (shared / name).mkdir(mode=0o755)
        (shared / name / "42819").write_text("1\n")  # a claim of root's (pid 1 is alive)
    work = nobody.folder("work")
    result = subprocess.run(
        nobody.argv(nobody.python, "-c", NOBODY_RUN, str(work)),
        env=nobody.env(TMPDIR=str(shared)),
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["claims"] == str(shared / f"vertexdist-{nobody.uid}-1" / "ports")
    assert len(found["ports"]) == 2
    assert Path(found["link"]).parent.name.startswith(f"vxray-{nobody.uid}-")  # a fresh folder of its own
    for name in ("vertexdist-ports", f"vertexdist-{nobody.uid}", f"vxray-{nobody.uid}"):
        assert [p.name for p in (shared / name).iterdir()] == ["42819"]  # root's, untouched
