"""Checkpoints survive interrupted writes: the previous one stays loadable and is the one chosen."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from trainer_pkg import checkpoint
from trainer_pkg.errors import TrainerError


def state(step: int) -> dict[str, Any]:
    return {"global_step": step, "weights": torch.full((4, 4), float(step))}


class FailsHalfWay:
    """Pickling this raises after torch.save has started writing, like a crash in the middle of a write."""

    def __reduce__(self) -> Any:
        raise OSError("disk went away")


def test_save_then_load_newest(tmp_path: Path) -> None:
    checkpoint.save(tmp_path, 10, state(10), keep=3)
    checkpoint.save(tmp_path, 20, state(20), keep=3)
    loaded = checkpoint.load_newest(tmp_path)
    assert loaded is not None
    assert loaded.path == tmp_path / "step-00000020" / "state.pt"
    assert torch.equal(loaded.state["weights"], torch.full((4, 4), 20.0))
    assert (tmp_path / "LATEST").read_text() == "step-00000020\n"


def test_nothing_to_resume_from(tmp_path: Path) -> None:
    assert checkpoint.load_newest(tmp_path / "missing") is None
    assert checkpoint.load_newest(tmp_path) is None


def test_only_the_newest_are_kept(tmp_path: Path) -> None:
    for step in (1, 2, 3, 4, 5):
        checkpoint.save(tmp_path, step, state(step), keep=2)
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-00000004", "step-00000005"]


def test_write_failing_half_way_keeps_the_previous_checkpoint(tmp_path: Path) -> None:
    checkpoint.save(tmp_path, 8, state(8), keep=3)
    with pytest.raises(OSError, match="disk went away"):
        checkpoint.save(tmp_path, 16, {**state(16), "extra": FailsHalfWay()}, keep=3)
    assert not (tmp_path / "step-00000016" / "state.pt").exists()
    assert list((tmp_path / "step-00000016").iterdir()) == []  # the temporary file is cleaned up
    loaded = checkpoint.load_newest(tmp_path)
    assert loaded is not None and loaded.state["global_step"] == 8


def test_process_killed_mid_write_keeps_the_previous_checkpoint(tmp_path: Path) -> None:
    """A real crash: SIGKILL while torch.save is writing step 16 (it blocks inside the pickler)."""
    marker = tmp_path / "writing"
    script = textwrap.dedent(
        f"""
        import time, pathlib, torch
        from trainer_pkg import checkpoint

        class Stall:
            def __reduce__(self):
                pathlib.Path({str(marker)!r}).touch()
                time.sleep(60)

        root = pathlib.Path({str(tmp_path / "ckpt")!r})
        checkpoint.save(root, 8, {{"global_step": 8, "w": torch.ones(3)}}, keep=3)
        stalling = {{"global_step": 16, "w": torch.zeros(1_000_000), "stall": Stall()}}
        checkpoint.save(root, 16, stalling, keep=3)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    process = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        deadline = 60.0
        while not marker.exists():
            assert process.poll() is None, "the writer exited before it got to the slow part"
            deadline -= 0.01
            assert deadline > 0
            time.sleep(0.01)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    root = tmp_path / "ckpt"
    leftovers = [p.name for p in (root / "step-00000016").iterdir()]
    assert leftovers and all(name.startswith(".state.pt.tmp-") for name in leftovers)
    assert (root / "LATEST").read_text() == "step-00000008\n"
    loaded = checkpoint.load_newest(root)
    assert loaded is not None and loaded.state["global_step"] == 8


def test_corrupt_checkpoint_named_by_latest_falls_back_to_an_older_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # On a store without atomic replace a crash can leave a truncated file behind LATEST.
    checkpoint.save(tmp_path, 8, state(8), keep=3)
    checkpoint.save(tmp_path, 16, state(16), keep=3)
    newest = tmp_path / "step-00000016" / "state.pt"
    newest.write_bytes(newest.read_bytes()[:100])
    loaded = checkpoint.load_newest(tmp_path)
    assert loaded is not None and loaded.state["global_step"] == 8
    assert "does not load" in capsys.readouterr().err


def test_folder_newer_than_latest_is_an_unfinished_write(tmp_path: Path) -> None:
    checkpoint.save(tmp_path, 8, state(8), keep=3)
    (tmp_path / "step-00000016").mkdir()
    torch.save({**state(16), "format": checkpoint.FORMAT_VERSION}, tmp_path / "step-00000016" / "state.pt")
    loaded = checkpoint.load_newest(tmp_path)
    assert loaded is not None and loaded.state["global_step"] == 8


def test_without_latest_the_newest_loadable_folder_is_used(tmp_path: Path) -> None:
    checkpoint.save(tmp_path, 8, state(8), keep=3)
    checkpoint.save(tmp_path, 16, state(16), keep=3)
    (tmp_path / "LATEST").write_text("garbage")
    loaded = checkpoint.load_newest(tmp_path)
    assert loaded is not None and loaded.state["global_step"] == 16


def test_foreign_file_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "step-00000001").mkdir()
    torch.save({"something": "else"}, tmp_path / "step-00000001" / "state.pt")
    (tmp_path / "LATEST").write_text("step-00000001\n")
    with pytest.raises(TrainerError, match="is not a trainer_pkg checkpoint"):
        checkpoint.load_newest(tmp_path)
