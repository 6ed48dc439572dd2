"""The Ray driver's output (`ray_output`): Ray's PlacementGroupCleaner lines left out, paths through a node's
short temp link shown as its folder, everything else passed on as it came, whole lines in order."""

from __future__ import annotations

import io

from vertexdist.shipped.vertexdist_launcher.ray_output import EditedLines, LineEditor

CLEANER = "(PlacementGroupCleaner pid=12171) "


def test_the_cleaner_actors_lines_go_and_everything_else_stays() -> None:
    out = io.StringIO()
    stream = EditedLines(
        out, LineEditor.from_env("/tmp/vxray-0/5e2b71c2f1f7=/run/replicas/workerpool0-0/ray/tmp")
    )
    stream.write(
        "(TrainController pid=11558) Failed to query Ray Train Controller actor state. State API may be"
        " temporarily unavailable. Continuing to monitor.\n"
        f"{CLEANER}Exception in thread PlacementGroupCleanerMonitor:\n"
        f"{CLEANER}Traceback (most recent call last):\n"
        f"{CLEANER}ConnectionError: Found multiple active Ray instances\n"
        "(RayTrainWorker pid=12413) worker 0/2: epoch 0, loss 0.6575\n"
        "(TrainController pid=11558) ValueError: a real error\n"
        "tensorboard --logdir /tmp/vxray-0/5e2b71c2f1f7/session_1/artifacts/x\n"
        "no newline yet"
    )
    assert out.getvalue().splitlines() == [
        "(RayTrainWorker pid=12413) worker 0/2: epoch 0, loss 0.6575",
        "(TrainController pid=11558) ValueError: a real error",
        "tensorboard --logdir /run/replicas/workerpool0-0/ray/tmp/session_1/artifacts/x",
    ]
    stream.write(", now a whole line\n")
    stream.write("and a partial one")
    stream.flush()
    assert out.getvalue().endswith("no newline yet, now a whole line\nand a partial one")


def test_without_a_link_paths_are_left_alone() -> None:
    out = io.StringIO()
    EditedLines(out, LineEditor.from_env("")).write("Full logs are in /tmp/ray/session_1/logs\n")
    assert out.getvalue() == "Full logs are in /tmp/ray/session_1/logs\n"
