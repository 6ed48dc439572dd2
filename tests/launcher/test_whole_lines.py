"""Ranks that share a replica's log never join each other's lines (`vertexdist_launcher/whole_lines.py`).

Under `python -u` a print is two writes, its text and its newline; two ranks printing into one O_APPEND log
at once then leave `rank 2 ... donerank 3 ... done` and an empty line, and rank 3's line is lost to any
reader that looks for it at the start of a line (seen as a flaky example test: ranks 0-2's last lines
found, rank 3's not)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vertexdist.shipped.vertexdist_launcher.whole_lines import MAX_PENDING, WholeLineWriter

SHIPPED = Path(__file__).resolve().parents[2] / "vertexdist" / "shipped"
LINES = 10000
SCRIPT = f"""
import pathlib, sys, time
rank = sys.argv[1]
pathlib.Path(f"ready-{{rank}}").touch()
while len(list(pathlib.Path().glob("ready-*"))) < 2:  # both print at once
    time.sleep(0.001)
for i in range({LINES}):
    print(f"rank {{rank}} line {{i}}: done, parameters sha256 0123456789abcdef", flush=True)
    print(f"rank {{rank}} line {{i}}: to stderr", file=sys.stderr)
"""


def _file_writer(tmp_path: Path) -> tuple[WholeLineWriter, int]:
    fd = os.open(tmp_path / "log", os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    return WholeLineWriter(fd), os.open(tmp_path / "log", os.O_RDONLY)


def _drain(fd: int) -> bytes:
    return os.read(fd, 1 << 20)


def test_a_line_goes_out_only_once_it_ends_and_in_one_piece(tmp_path: Path) -> None:
    writer, read = _file_writer(tmp_path)
    writer.write(b"rank 3: done")
    assert _drain(read) == b""
    writer.write(b"\nnext: ")
    assert _drain(read) == b"rank 3: done\n"
    writer.write(b"a\nb\nc")
    assert _drain(read) == b"next: a\nb\n"
    writer.flush()  # an explicit flush writes a partial line, as -u would
    assert _drain(read) == b"c"
    writer.flush()
    assert _drain(read) == b""


def test_a_line_longer_than_the_limit_goes_out_without_waiting_for_its_end(tmp_path: Path) -> None:
    writer, read = _file_writer(tmp_path)
    writer.write(b"x" * (MAX_PENDING - 1))
    assert _drain(read) == b""
    writer.write(b"xx")
    assert len(_drain(read)) == MAX_PENDING + 1


def _run_ranks(tmp_path: Path, module: str) -> tuple[list[str], list[str]]:
    """Two ranks as torchrun starts them (`python -u -m MODULE user.py RANK`), stdout into one O_APPEND
    file and stderr into one pipe, as a local replica's are."""
    (tmp_path / "user.py").write_text(SCRIPT)
    log = tmp_path / "replica.log"
    env = {**os.environ, "PYTHONPATH": f"{SHIPPED}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("VERTEXDIST_HEALTH_DIR", None)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        ranks = [
            subprocess.Popen(
                [sys.executable, "-u", "-m", module, "user.py", str(rank)],
                cwd=tmp_path,
                env=env,
                stdout=fd,
                stderr=subprocess.PIPE if rank == 0 else fd,
            )
            for rank in range(2)
        ]
        err = ranks[0].communicate(timeout=120)[1].decode()
        assert [rank.wait(timeout=120) for rank in ranks] == [0, 0]
    finally:
        os.close(fd)
    return log.read_text().splitlines(), err.splitlines()


@pytest.mark.parametrize("module", ["vertexdist_launcher.worker", "vertexdist_launcher.watched"])
def test_two_ranks_printing_at_once_keep_every_line_whole(tmp_path: Path, module: str) -> None:
    lines, err = _run_ranks(tmp_path, module)
    broken = [line for line in lines if not line.endswith(("0123456789abcdef", "to stderr"))]
    assert broken == [], f"{len(broken)} joined or empty lines, e.g. {broken[:3]}"
    assert len(lines) == 3 * LINES  # both ranks' stdout and rank 1's stderr
    assert len(err) == LINES and all(line.endswith(": to stderr") for line in err)
