"""The console in a real browser (Debian's headless Chromium, driven by playwright): the list shows a local
job and an emulator job; a job page shows its replicas, state, logs and a chart of the run's points; log
lines appear while a job runs; a tuning job's trials page. One console and one browser for the module.

With VERTEXDIST_DOCS_SCREENSHOTS=1 the screenshots also go to docs/guide/img/ (the console's guide page).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("playwright")

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS_IMAGES = REPO_ROOT / "docs" / "guide" / "img"
PROJECT, LOCATION = "test-proj", "us-central1"

TRAINER_TEMPLATE = """\
display_name: churn-console
project: vertexdist-demo
location: us-central1
staging_bucket: gs://vertexdist-demo/staging
container_uri: us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest
trainer:
  args: ["--epochs=3", "--samples=960", "--batch-size=32", "--data=synthetic"]
  env: {OMP_NUM_THREADS: 1}
machine_type: n1-standard-4
replica_count: 2
"""

# A user's script that writes its own scalars with TensorBoard's SummaryWriter, into AIP_TENSORBOARD_LOG_DIR
# (a gs:// folder: the emulator's replicas find it under VERTEXDIST_GCS_ROOT, as Vertex's under /gcs).
USER_SCALARS = (
    "import os\n"
    "from torch.utils.tensorboard import SummaryWriter\n"
    "folder = os.environ['VERTEXDIST_GCS_ROOT'] + '/' + os.environ['AIP_TENSORBOARD_LOG_DIR'][len('gs://'):]\n"
    "writer = SummaryWriter(folder)\n"
    "for step in range(1, 6):\n"
    "    writer.add_scalar('user/score', step * step, step)\n"
    "writer.close()\n"
    "print('wrote 5 scores', flush=True)\n"
)

# Prints a line, waits for the test's go-ahead file, prints another: the page must show both, live.
LIVE = (
    "import os, sys, time\n"
    "print('first line from the live job', flush=True)\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.05)\n"
    "print('second line from the live job', flush=True)\n"
)


def chart_points(page: Any, figure: str, dataset: int = 0) -> list[dict[str, Any]]:
    """The points Chart.js holds for one dataset of the chart in `figure` (a CSS selector)."""
    script = "([sel, n]) => Chart.getChart(document.querySelector(sel + ' canvas')).data.datasets[n].data"
    return list(page.evaluate(script, [figure, dataset]))


def state_is(page: Any, state: str) -> None:
    script = "(s) => document.getElementById('job-state').textContent === s"
    page.wait_for_function(script, arg=state, timeout=30_000)


def shot(page: Any, name: str, tmp: Path) -> None:
    page.screenshot(path=str(tmp / f"{name}.png"), full_page=True)
    if os.environ.get("VERTEXDIST_DOCS_SCREENSHOTS"):
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOCS_IMAGES / f"{name}.png"), full_page=True)


def _wait(condition: Any, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, kit: Any) -> Iterator[dict[str, Any]]:
    """Real jobs, started together: the bundled trainer (2 replicas) and a 3-trial tuning run through the
    local backends, and an emulator CustomJob whose script writes TensorBoard scalars."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import JobServiceClient, types

    from vertexdist.backends.config import Target
    from vertexdist.backends.local import LocalBackend, LocalOptions
    from vertexdist.backends.vertex import VertexBackend
    from vertexdist.console.app import build_app
    from vertexdist.console.jobs import Console
    from vertexdist.emulator import Emulator
    from vertexdist.spec.loader import load_template

    root = tmp_path_factory.mktemp("console-browser")
    runs = root / "runs"
    runs.mkdir()
    emulator = Emulator(data_dir=root / "emulator", hold_get_s=2.0)
    emulator.start()
    try:
        jobs = JobServiceClient(
            transport="rest",
            client_options={"api_endpoint": emulator.vertex_endpoint},
            credentials=AnonymousCredentials(),
        )
        command = [sys.executable, "-c", USER_SCALARS]
        spec = {
            "worker_pool_specs": [
                {
                    "machine_spec": {"machine_type": "n1-standard-4"},
                    "replica_count": 1,
                    "container_spec": {"image_uri": "example.com/standin:latest", "command": command},
                }
            ],
            "base_output_directory": {"output_uri_prefix": "gs://vd-console/out/scores"},
        }
        emulator_job = jobs.create_custom_job(
            parent=f"projects/{PROJECT}/locations/{LOCATION}",
            custom_job=types.CustomJob(display_name="emulator-scores", job_spec=spec),
        )

        template = root / "trainer" / "job.yaml"
        template.parent.mkdir()
        template.write_text(TRAINER_TEMPLATE)
        options = LocalOptions(runs_dir=runs, package_cache=root / "packages", procs_per_replica=1)
        local = LocalBackend(options)
        trainer_job = local.schedule(local.dryrun(load_template(template)))
        tuning_job = kit.run_local_tuning(runs, kit.tuning_template(root / "tune"))
        assert local.job(trainer_job).wait(300) is not None
        assert local.describe(trainer_job).state == "SUCCEEDED", local.describe(trainer_job).error
        _wait(lambda: jobs.get_custom_job(name=emulator_job.name).state == types.JobState.JOB_STATE_SUCCEEDED,
              120, "the emulator job")  # fmt: skip

        target = Target(
            project=PROJECT,
            location=LOCATION,
            api_endpoint=emulator.vertex_endpoint,
            api_transport="rest",
            storage_endpoint=emulator.storage_endpoint,
        )
        console = Console(runs, VertexBackend(target), cache_dir=root / "cache")
        with kit.serving(build_app(console, poll_s=0.2)) as base:
            yield {
                "base": base,
                "runs": runs,
                "root": root,
                "trainer": trainer_job,
                "tuning": tuning_job,
                "emulator": emulator_job.name.rsplit("/", 1)[1],
                "local": local,
            }
    finally:
        emulator.stop()


def test_list_shows_a_local_job_and_an_emulator_job(
    world: dict[str, Any], page_of: Any, tmp_path: Path
) -> None:
    page = page_of()
    page.goto(world["base"] + "/")
    trainer = page.locator(f'tr[data-ref="local/{world["trainer"]}"]')
    assert "churn-console" in trainer.inner_text() and "SUCCEEDED" in trainer.inner_text()
    assert "custom job" in trainer.inner_text() and "local" in trainer.inner_text()
    emulated = page.locator(f'tr[data-ref="vertex/customJobs/{world["emulator"]}"]')
    assert "emulator-scores" in emulated.inner_text() and "emulator" in emulated.inner_text()
    tuning = page.locator(f'tr[data-ref="local/{world["tuning"]}"]')
    assert "tuning" in tuning.inner_text()
    assert re.search(r"\$\d", trainer.inner_text())  # its cost so far, from the price table
    shot(page, "console-list", tmp_path)

    page.select_option("select[name=where]", "emulator")
    page.click("form.filters button")
    page.wait_for_url(re.compile(r"where=emulator"))
    assert page.locator("table.jobs tbody tr").count() == 1

    # The emulator job's page: its replica from the spec, its log line through Cloud Logging, its
    # script's own scalars from the emulator's Cloud Storage.
    page.goto(world["base"] + f"/jobs/vertex/customJobs/{world['emulator']}")
    page.wait_for_selector("#logs .line:has-text('wrote 5 scores')", timeout=30_000)
    assert page.locator("#job-state").inner_text() == "SUCCEEDED"
    assert page.locator('#replicas tr[data-replica="workerpool0-0"]').count() == 1
    page.wait_for_selector('figure.chart[data-tag="user/score"] canvas', timeout=30_000)
    points = chart_points(page, 'figure[data-tag="user/score"]')
    assert [(p["x"], p["y"]) for p in points] == [(s, s * s) for s in range(1, 6)]


def test_job_page_replicas_state_logs_and_the_runs_chart(
    world: dict[str, Any], page_of: Any, tmp_path: Path
) -> None:
    page = page_of()
    page.goto(world["base"] + f"/jobs/local/{world['trainer']}")
    assert page.locator("#job-state").inner_text() == "SUCCEEDED"
    for replica in ("workerpool0-0", "workerpool1-0"):
        row = page.locator(f'#replicas tr[data-replica="{replica}"]')
        assert "SUCCEEDED" in row.inner_text() and row.locator(".exit").inner_text() == "0"
    page.wait_for_selector("#logs .line:has-text('epoch 3/3')", timeout=30_000)
    printed = [
        float(m.group(1))
        for m in re.finditer(r"epoch \d/3  loss (\d\.\d+)", page.locator("#logs").inner_text())
    ]
    assert len(printed) == 3
    page.wait_for_selector('figure.chart[data-tag="epoch/loss"] canvas', timeout=30_000)
    charted = chart_points(page, 'figure[data-tag="epoch/loss"]')
    # The chart's points are the run's: one per epoch, the loss the trainer printed for it.
    assert [p["x"] for p in charted] == [1, 2, 3]
    assert [round(p["y"], 4) for p in charted] == printed
    assert page.locator('figure.chart[data-tag="epoch/accuracy"]').count() == 1
    assert page.locator('figure.chart[data-tag="train/loss"]').count() == 1
    assert "SUCCEEDED" in page.locator("#timeline").inner_text()
    # The Ranks panel: one row per rank of the trainer's two replicas, from their heartbeats.
    page.wait_for_selector("#ranks-table tbody tr", timeout=15_000)
    assert page.locator("#ranks-table tbody tr td:nth-child(2)").all_inner_texts() == [
        "workerpool0-0",
        "workerpool1-0",
    ]
    shot(page, "console-job", tmp_path)

    page.select_option("#log-replica", "workerpool1-0")
    page.wait_for_selector("#logs .line", timeout=15_000)
    _wait(lambda: page.locator("#logs .line").count() > 0 and not page.locator("#log-live").inner_text(),
          15, "the filtered lines")  # fmt: skip
    assert set(page.locator("#logs .line .who").all_inner_texts()) == {"workerpool1-0"}


def test_log_lines_appear_while_the_job_runs(
    world: dict[str, Any], page_of: Any, kit: Any, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    job = kit.run_local_job(
        world["runs"], [{**kit.command_pool(""), "containerSpec": {
            "imageUri": "example.com/standin:latest", "command": [sys.executable, "-c", LIVE, str(go)]}}],
        "live-job", wait=False,
    )  # fmt: skip
    page = page_of()
    page.goto(world["base"] + f"/jobs/local/{job}")
    page.wait_for_selector("#logs .line:has-text('first line from the live job')", timeout=30_000)
    state_is(page, "RUNNING")
    assert page.locator("#job-ended").inner_text() == "—"
    page.evaluate("() => { window.stillTheSamePage = true; }")
    assert page.locator("#logs .line:has-text('second line')").count() == 0
    go.write_text("go")
    page.wait_for_selector("#logs .line:has-text('second line from the live job')", timeout=30_000)
    state_is(page, "SUCCEEDED")
    assert page.evaluate("() => window.stillTheSamePage") is True  # no reload: the lines came live
    page.wait_for_selector("#timeline li:has-text('exit code 0')", timeout=15_000)  # the timeline too
    row = page.locator('#replicas tr[data-replica="workerpool0-0"]')
    _wait(lambda: row.locator(".exit").inner_text() == "0", 15, "the replica's exit code")
    # The header too: Ended and Duration as the job ended, not as the page was loaded (issue 36 item 7).
    _wait(lambda: page.locator("#job-ended").inner_text().endswith(" UTC"), 15, "the header's end")
    assert page.locator("#job-duration").inner_text() != "—"


def test_tuning_trials_page(world: dict[str, Any], page_of: Any, tmp_path: Path) -> None:
    page = page_of()
    page.goto(world["base"] + f"/jobs/local/{world['tuning']}")
    rows = page.locator("table.trials tbody tr")
    assert rows.count() == 3
    scores = [float(rows.nth(i).locator("td").nth(4).inner_text()) for i in range(3)]
    best = page.locator("table.trials tr.best")
    assert best.count() == 1 and "best" in best.inner_text()
    assert float(best.locator("td").nth(4).inner_text()) == max(scores)
    for parameter in ("x", "units"):
        page.wait_for_selector(f'#trial-charts figure[data-parameter="{parameter}"] canvas', timeout=15_000)
    assert len(chart_points(page, 'figure[data-parameter="x"]', 1)) == 1  # the best trial, drawn apart
    page.wait_for_selector('#metrics figure.chart[data-tag="score"] canvas', timeout=15_000)
    shot(page, "console-trials", tmp_path)
    # A trial's own page: its job's replica and its log.
    page.click("table.trials tbody tr:first-child td:first-child a")
    page.wait_for_selector("#logs .line:has-text('step 3 score')", timeout=30_000)
    assert page.locator('#replicas tr[data-replica="workerpool0-0"]').count() == 1
