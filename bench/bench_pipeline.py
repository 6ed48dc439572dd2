"""Benchmark: a three-step pipeline on the emulator against the same three jobs submitted by hand (issue 40).

Run: .venv/bin/python bench/bench_pipeline.py
One emulator (its own temporary folder). The template is a one-replica job whose stand-in script writes a
model file (the trainer's own start-up is not what is measured). After one untimed `submit --follow` (the
package is built, uploaded and installed once, for both sides):
1. by hand: `vertexdist submit TEMPLATE --follow` three times, one after the other;
2. the pipeline: `vertexdist pipeline run PIPELINE.yaml --follow` (three `training_step`s of the same
   template, each after the one before, compiled untimed), submit -> SUCCEEDED (goal <= 1.2x of 1.);
3. the same pipeline again, every task cached (goal <= 0.2x of 2.).
Both sides run in this process through the CLI's own entry point (`main.run`), so imports are paid once
(kfp's and google-cloud-aiplatform's too, before the timing).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["NO_GCE_CHECK"] = "true"

SCRIPT = """import os, pathlib
folder = os.environ.get("AIP_MODEL_DIR", "outputs/model").replace("gs://", "/gcs/", 1)
pathlib.Path(folder).mkdir(parents=True, exist_ok=True)
pathlib.Path(folder, "model.txt").write_text("weights")
print("trained")
"""
TEMPLATE = """display_name: bench-step
project: bench-proj
location: us-central1
staging_bucket: gs://vd-bench/staging
container_uri: us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest
machine_type: n1-standard-4
replica_count: 1
trainer:
  script: train.py
"""
PIPELINE = """from kfp import dsl
from vertexdist.pipelines import training_step

@dsl.pipeline(name="three-steps")
def three_steps():
    first = training_step({template!r}, display_name="step-1")
    second = training_step({template!r}, display_name="step-2").after(first)
    training_step({template!r}, display_name="step-3").after(second)
"""


def cli(args: list[str]) -> tuple[float, str]:
    """`vertexdist ARGS` in this process: (seconds, its output); raises unless it exits 0."""
    from vertexdist.cli import main

    out = io.StringIO()
    code: object = 0
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main.run(args)
        except SystemExit as exit_info:
            code = exit_info.code
    took = time.perf_counter() - start
    text = out.getvalue()
    if code not in (0, None) or "SUCCEEDED" not in text:
        raise SystemExit(f"vertexdist {' '.join(args)} did not succeed:\n{text}")
    return took, text


def main() -> None:
    from google.cloud import storage

    from vertexdist.emulator import Emulator
    from vertexdist.pipelines.stage import stage_package

    work = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    (work / "train.py").write_text(SCRIPT)
    template = work / "job.yaml"
    template.write_text(TEMPLATE)
    (work / "three.py").write_text(PIPELINE.format(template=str(template)))
    os.chdir(work)
    with Emulator(data_dir=work / "emu") as emu:
        where = ["--endpoint", emu.vertex_endpoint, "--project", "bench-proj"]
        os.environ["STORAGE_EMULATOR_HOST"] = emu.storage_endpoint  # for stage_package's client only
        cli(
            ["submit", str(template), "--follow", "--yes", *where]
        )  # untimed: package built and installed once
        stage_package(template, storage.Client(project="bench-proj"))
        # Imports paid once, untimed, as the warm-up submit paid the CLI's: kfp, and the SDK whose
        # PipelineJob `pipeline run` submits through (`submit` uses the low-level clients only).
        import google.cloud.aiplatform  # noqa: F401

        from vertexdist.jobs.pipeline_runs import compiled

        spec = compiled(work / "three.py", work)  # untimed: the run is submit -> SUCCEEDED

        hand = [cli(["submit", str(template), "--follow", "--yes", *where]) for _ in range(3)]
        by_hand = sum(took for took, _ in hand)
        run = [
            "pipeline",
            "run",
            str(spec),
            "--pipeline-root",
            "gs://vd-bench/pipelines",
            "--follow",
            *where,
        ]
        pipeline, _ = cli(run)
        cached, again = cli(run)
    if again.count("SKIPPED") < 3:
        raise SystemExit(f"the rerun was not cached:\n{again}")
    print(f"three submit --follow by hand: {by_hand:.2f} s", file=sys.stderr)
    print(f"the pipeline, submit -> SUCCEEDED: {pipeline:.2f} s", file=sys.stderr)
    print(f"the pipeline again, all cached: {cached:.2f} s", file=sys.stderr)
    print(f"pipeline / by hand: {pipeline / by_hand:.2f}x (goal <= 1.2x)")
    print(f"cached rerun / first run: {cached / pipeline:.2f}x (goal <= 0.2x)")


if __name__ == "__main__":
    main()
