"""Benchmark: `submit --emulator` to RUNNING, our polling vs the SDK's blocking `run()`, and `status`.

Run: .venv/bin/python bench/bench_submit.py [--runs N]
1. Submit to RUNNING (goal < 2 s): emulator start, sdist, upload, CreateTrainingPipeline, polling until the
   replicas run; the trainer's own start-up is excluded (a stand-in script). Measured in-process after
   imports, through the same library calls the CLI makes, cold (new package: fetched and pip-installed)
   and warm (package already installed), plus the whole CLI command in a fresh interpreter.
2. Submit to SUCCEEDED for a job that runs 1 s: vertexdist's backoff polling vs the SDK's
   `CustomTrainingJob.run()` (5 s polls) on the same job; prints the ratio of the totals and how long each
   client took to notice that the job had ended (the job's endTime to the call returning).
3. `status` of one job: after import (client made, then one Get) (goal < 0.5 s), and `vertexdist status` wall.

`--warm`: only 2., on one emulator started first with `--warm 2` (its pool of replicas forked from an
interpreter that has imported torch; `emulator start --warm`), as `submit --emulator` finds one serving its
data folder: vertexdist's submit (after one untimed submit of the same package) against the SDK's `run()` on
the same emulator, in turns; the last figure printed is the ratio of the medians (goal <= 0.3x).
`--warm --model`: the same with a `model:` section (issue 34): our submit also keeps the run record, labels
the job with its commit and reads back the registered model as `submit --follow` does; the SDK's `run()`
gets `model_serving_container_image_uri` and `model_display_name`, and returns the uploaded Model.
`--warm --model --experiment`: the template also has `experiment:` (the job becomes a run of it, logged by the
emulator when the job ends); the SDK's `run()` is left as with `--model` (CustomTrainingJob.run() takes no
experiment; logging the run by hand would only add SDK calls to the baseline).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ["NO_GCE_CHECK"] = "true"
logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

REPO = Path(__file__).resolve().parents[1]
PROJECT, LOCATION, BUCKET = "bench-proj", "us-central1", "vd-bench"
PREBUILT = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest"
SERVING = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-0:latest"
MODEL_SECTION = f"model:\n  serving_container_image_uri: {SERVING}\n  display_name: bench-model\n"
EXPERIMENT_SECTION = "experiment:\n  name: bench-exp\n"


def write_template(folder: Path, name: str, script: str, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text(script)
    path = folder / "job.yaml"
    path.write_text(
        f"display_name: {name}\nproject: {PROJECT}\nlocation: {LOCATION}\n"
        f"staging_bucket: gs://{BUCKET}/staging\ncontainer_uri: {PREBUILT}\n"
        "machine_type: n1-standard-4\nreplica_count: 2\ntrainer:\n  script: train.py\n" + extra
    )
    return path


def ended_ago(emu: object, name: str) -> float:
    """Seconds since the job's endTime, by the emulator's record."""
    from datetime import datetime

    stamp = emu.store.get(name)["endTime"]  # type: ignore[attr-defined]
    return time.time() - datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def submit_until(
    template_path: Path,
    emu_data: Path | None,
    until: str,
    package_dir: Path,
    serving: Any = None,
    *,
    record: bool = False,
) -> tuple[float, str, float]:
    """What `submit --emulator` does, timed from the start until the job reaches `until` (or ends); with
    `serving`, against that emulator (one already serving the data folder), else one started inside. With
    `record`, also what `submit` adds for its run record and a `model:` section (issue 34)."""
    from vertexdist.backends.config import resolve_target
    from vertexdist.backends.vertex import VertexBackend
    from vertexdist.backends.watch import follow_policy, watch
    from vertexdist.emulator import Emulator
    from vertexdist.spec import load_template

    start = time.perf_counter()
    template = load_template(template_path)
    if record:
        from vertexdist.jobs.run_record import with_code_labels

        template = with_code_labels(template)
    with contextlib.nullcontext(serving) if serving is not None else Emulator(data_dir=emu_data) as emu:
        target = resolve_target(
            env={"STORAGE_EMULATOR_HOST": emu.storage_endpoint},
            template_project=template.project,
            template_location=template.location,
            template_bucket=template.staging_bucket,
            api_endpoint=emu.vertex_endpoint,
        )
        backend = VertexBackend(target, package_dir=package_dir)
        submission = backend.dryrun(template)
        backend.recent_duplicates(submission, 600)
        backend.upload(submission)
        submission = submission.for_new_job()
        name = backend.schedule(submission)
        if record:
            from vertexdist.jobs.record_store import keep_submission_record

            kept = keep_submission_record(backend, template, name, submission, print)
            assert kept is not None
        policy = follow_policy(True, logs=False)  # as `submit` polls an emulator
        final = watch(
            backend, name, on_status=lambda s: None, until=lambda s: s.state == until or s.done, policy=policy
        )
        if record and template.model is not None:
            from vertexdist.jobs.registered_model import uploaded_model

            assert uploaded_model(backend, name) is not None, "no model was registered"
        elapsed = time.perf_counter() - start
        latency = ended_ago(emu, name) if final.done else 0.0
        watch(backend, name, on_status=lambda s: None)  # let it finish before the emulator stops
    return elapsed, final.state, latency


def sdk_run(emu: object, script: Path, bucket: str = BUCKET, *, model: bool = False) -> tuple[float, float]:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    aiplatform.init(
        project=PROJECT,
        location=LOCATION,
        staging_bucket=f"gs://{bucket}/sdk",
        credentials=AnonymousCredentials(),
        api_endpoint=emu.vertex_endpoint,  # type: ignore[attr-defined]
        api_transport="rest",
    )
    start = time.perf_counter()
    serving = {"model_serving_container_image_uri": SERVING} if model else {}
    job = aiplatform.CustomTrainingJob(
        display_name="bench-sdk", script_path=str(script), container_uri=PREBUILT, **serving
    )
    made = job.run(
        replica_count=2,
        machine_type="n1-standard-4",
        **({"model_display_name": "bench-model"} if model else {}),
    )
    assert (made is not None) == model
    return time.perf_counter() - start, ended_ago(emu, job.resource_name)


def median(values: list[float]) -> str:
    return f"min {min(values):.2f} s / median {statistics.median(values):.2f} s"


def warm_ratio(work: Path, runs: int, *, model: bool = False, experiment: bool = False) -> float:
    """2. on one `--warm 2` emulator started first: our submit vs the SDK's run(), in turns (medians); with
    `model`, both register the model and our submit keeps its run record."""
    from google.cloud import storage as gcs

    from vertexdist.emulator import Emulator

    variant = " with model: (and the run record)" if model else ""
    variant += " with experiment:" if experiment else ""
    print(
        f"== 2 (--warm). a 1 s job{variant}, submit -> SUCCEEDED, on one emulator started first with --warm 2"
    )
    begin = time.perf_counter()
    with Emulator(data_dir=work / "warm-emu", warm=2) as emu:
        started = time.perf_counter() - begin
        print(f"   emulator and its warm pool started in {started:.2f} s (not timed below)")
        os.environ["STORAGE_EMULATOR_HOST"] = emu.storage_endpoint
        script = "import time\ntime.sleep(1)\n"
        if model:
            script += "import os, pathlib\n"
            script += "p = pathlib.Path(os.environ['AIP_MODEL_DIR'].replace('gs://', '/gcs/'))\n"
            script += "p.mkdir(parents=True, exist_ok=True)\n(p / 'w.txt').write_text('w')\n"
        extra = (MODEL_SECTION if model else "") + (EXPERIMENT_SECTION if experiment else "")
        path = write_template(work / "warm-done", "bench-warm", script, extra)
        submit_until(
            path, None, "SUCCEEDED", work / "sdist", emu, record=model
        )  # the package's upload, install
        gcs.Client(project=PROJECT).create_bucket(BUCKET + "-sdk")
        ours, theirs, our_lag, their_lag = [], [], [], []
        for _ in range(runs):
            seconds, state, lag = submit_until(path, None, "SUCCEEDED", work / "sdist", emu, record=model)
            assert state == "SUCCEEDED", state
            ours.append(seconds)
            our_lag.append(lag)
            seconds, lag = sdk_run(emu, path.parent / "train.py", BUCKET + "-sdk", model=model)
            theirs.append(seconds)
            their_lag.append(lag)
        if experiment:
            runs_logged = emu.http.experiments.store.children(  # type: ignore[attr-defined]
                f"projects/{PROJECT}/locations/{LOCATION}/metadataStores/default", "contexts"
            )
            print(
                f"   experiment contexts (runs and the experiment) in the metadata store: {len(runs_logged)}"
            )
        logs = (work / "warm-emu").glob("jobs/*/logs/*.log")
        cold_starts = sum("starting this replica cold" in log.read_text() for log in logs)
        os.environ.pop("STORAGE_EMULATOR_HOST")
    print(f"   vertexdist submit (warm emulator, unchanged package): {median(ours)}")
    print(f"   SDK CustomTrainingJob.run() (same emulator):          {median(theirs)}")
    print(f"   job end -> client knows: vertexdist {median(our_lag)}; SDK {median(their_lag)}")
    print(f"   replicas started cold (should be 0): {cold_starts}")
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(f"   ratio vertexdist / SDK (median, goal <= 0.3x): {ratio:.2f}\u00d7")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warm", action="store_true", help="only 2., on one --warm 2 emulator started first")
    parser.add_argument("--model", action="store_true", help="with --warm: a template with model: (issue 34)")
    parser.add_argument("--experiment", action="store_true", help="with --warm: and with experiment:")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-submit-"))
    if args.warm:  # after the imports the CLI makes lazily, as in 1.
        importlib.import_module("google.cloud.aiplatform_v1")
        importlib.import_module("vertexdist.emulator.local_runner")
        warm_ratio(work, args.runs, model=args.model, experiment=args.experiment)
        return
    # Import what the CLI imports lazily, so the figures are "after import" as the goal states.
    import google.cloud.aiplatform_v1  # noqa: F401
    from google.cloud import storage  # noqa: F401

    import vertexdist.emulator.local_runner  # noqa: F401

    print("== 1. submit --emulator -> RUNNING (trainer start-up excluded; 2 replicas)")
    cold, warm = [], []
    data = work / "emu-data"
    for run in range(args.runs):
        path = write_template(work / f"cold-{run}", f"bench-cold-{run}", f"print('run {run}')\n")
        seconds, state, _ = submit_until(path, data, "RUNNING", work / "sdist")
        cold.append(seconds)
        seconds, state, _ = submit_until(path, data, "RUNNING", work / "sdist")
        warm.append(seconds)
    print(f"   new package (fetch + pip install):  {median(cold)}  (first state seen: {state})")
    print(f"   unchanged package (cached install): {median(warm)}")
    walls = []
    cli_template = write_template(work / "cli", "bench-cli", "print('cli')\n")
    for _ in range(args.runs):
        begin = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "vertexdist", "submit", str(cli_template), "--emulator"],
            cwd=work,
            capture_output=True,
            text=True,
        )
        walls.append(time.perf_counter() - begin)
        if result.returncode != 0:
            raise SystemExit(result.stderr)
    print(f"   whole `vertexdist submit --emulator` to SUCCEEDED, fresh interpreter: {median(walls)}")

    print("== 2. submit -> SUCCEEDED for a 1 s job: vertexdist polling vs SDK CustomTrainingJob.run()")
    script = "import time\ntime.sleep(1)\n"
    ours, theirs, our_lag, their_lag = [], [], [], []
    from vertexdist.emulator import Emulator

    for run in range(args.runs):
        path = write_template(work / f"done-{run}", f"bench-done-{run}", script)
        seconds, state, lag = submit_until(path, None, "SUCCEEDED", work / "sdist")
        assert state == "SUCCEEDED", state
        ours.append(seconds)
        our_lag.append(lag)
        with Emulator() as emu:
            os.environ["STORAGE_EMULATOR_HOST"] = emu.storage_endpoint
            from google.cloud import storage as gcs

            gcs.Client(project=PROJECT).create_bucket(BUCKET)
            seconds, lag = sdk_run(emu, path.parent / "train.py")
            theirs.append(seconds)
            their_lag.append(lag)
            os.environ.pop("STORAGE_EMULATOR_HOST")
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(f"   vertexdist submit (emulator started inside): {median(ours)}")
    print(f"   SDK CustomTrainingJob.run():                 {median(theirs)}")
    print(f"   ratio vertexdist / SDK (median): {ratio:.2f}")
    print(f"   job end -> client knows: vertexdist {median(our_lag)}; SDK {median(their_lag)}")

    print("== 3. status of one job")
    from vertexdist.backends.config import resolve_target
    from vertexdist.backends.vertex import VertexBackend

    with Emulator(data_dir=data) as emu:
        first = emu.store.list(f"projects/{PROJECT}/locations/{LOCATION}", "trainingPipelines")[0]["name"]
        target = resolve_target(env={}, template_project=PROJECT, api_endpoint=emu.vertex_endpoint)
        begin = time.perf_counter()
        backend = VertexBackend(target)
        backend.describe(first)
        first_call = time.perf_counter() - begin
        backend.describe(first)  # warm the connection
        repeat = []
        for _ in range(20):
            begin = time.perf_counter()
            backend.describe(first)
            repeat.append(time.perf_counter() - begin)
        walls = []
        env = {**os.environ, "VERTEX_API_ENDPOINT": emu.vertex_endpoint}
        for _ in range(args.runs):
            begin = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "vertexdist", "status", first],
                env=env,
                capture_output=True,
                check=True,
            )
            walls.append(time.perf_counter() - begin)
    print(f"   after import, client creation + one Get: {first_call * 1000:.0f} ms (goal < 500 ms)")
    print(f"   further Gets: median {statistics.median(repeat) * 1000:.1f} ms")
    print(f"   `vertexdist status JOB` in a fresh interpreter (imports included): {median(walls)}")


if __name__ == "__main__":
    main()
