"""`local-run --docker` of an unchanged template against `local-run` on the host.

The shipped container template (job_templates/a2-4g-x2-container.yaml: the repository's Dockerfile and the
bundled trainer) with a short run: 2 replicas x 1 process, gloo on CPU, 1 epoch of 256 samples. Its first
`--docker` run builds the image (on the local stand-in base where the template's cannot be pulled) and is
printed apart; the timed `--docker` runs find the image by its content-hashed tag and start the containers
without building. The host runs start each replica's ENTRYPOINT from the build context.
Target: local-run --docker / local-run <= 1.5.

Needs a Docker daemon (DOCKER_HOST, or the default socket): `python tests/docker_daemon.py -- python
bench/bench_docker.py` starts the suite's private one as root.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml
from interleaved import compare, local_run

from vertexdist.container.docker import docker_daemon_answers

REPEATS = 3
REPO = Path(__file__).resolve().parent.parent
TRAINER_ARGS = ["--epochs=1", "--samples=256", "--batch-size=32", "--data=synthetic", "--seed=0"]


def short_template(workdir: Path) -> Path:
    """The shipped container template, its paths absolute and its run short."""
    template = yaml.safe_load((REPO / "job_templates" / "a2-4g-x2-container.yaml").read_text())
    template["build"]["context"] = str(REPO)
    template["build"]["dockerfile"] = str(REPO / "Dockerfile")
    template["trainer"] = {"args": TRAINER_ARGS, "env": {"OMP_NUM_THREADS": "1"}}
    path = workdir / "container-job.yaml"
    path.write_text(yaml.safe_dump(template))
    return path


def time_run(workdir: Path, template: Path, name: str, run: int, *flags: str) -> float:
    started = local_run(template, workdir / f"{name}-{run}", workdir, "--procs-per-replica", "1", *flags)
    return time.time() - started


def main() -> None:
    if not docker_daemon_answers():
        # `make bench` runs every script: where no daemon answers there is nothing to measure, said so.
        print(
            "bench_docker: skipped, no Docker daemon answers (as root: python tests/docker_daemon.py -- ...)"
        )
        return
    workdir = Path(tempfile.mkdtemp(prefix="bench-docker-"))
    try:
        template = short_template(workdir)
        compare(
            "job: the shipped container template, 2 replicas x 1 process, gloo/CPU, 1 epoch of 256 samples",
            ("local-run --docker", lambda run: time_run(workdir, template, "docker", run, "--docker")),
            ("local-run (host)", lambda run: time_run(workdir, template, "host", run)),
            repeats=REPEATS,
            target=1.5,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
