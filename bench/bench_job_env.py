"""What a job's own environment costs: a requirements job's first run, its second (cached), and a container
replica's sandbox, each against the no-requirements path (the package installed without dependencies).

All offline: the requirement is a tiny local wheel (`--find-links`), the package a reproducible sdist. Ratios
are against the no-deps install of the same package in the same run; the cached environment should cost
next to nothing (ratio well under 1 of a cold one).

    .venv/bin/python bench/bench_job_env.py
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vertexdist.local.isolated_container import make_sandboxes  # noqa: E402
from vertexdist.local.plan import LaunchPlan, ReplicaLaunch  # noqa: E402
from vertexdist.local.requirements_env import ensure_env, plan_env  # noqa: E402
from vertexdist.packaging import build_sdist, install_package  # noqa: E402


def _wheel(folder: Path) -> None:
    info = "vdreqdemo-1.0.dist-info"
    files = {
        "vdreqdemo/__init__.py": "VALUE = 42\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: vdreqdemo\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{k},sha256={base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b'=').decode()},{len(v)}"
        for k, v in files.items()
    ]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(folder / "vdreqdemo-1.0-py3-none-any.whl", "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "wheels").mkdir()
        _wheel(root / "wheels")
        os.environ.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(root / "wheels"))
        package = root / "benchpkg"
        package.mkdir()
        (package / "__init__.py").write_text("")
        sdist = build_sdist(
            SimpleNamespace(package=package, script=None, requirements=["vdreqdemo"]), root / "dist"
        )
        baseline = timed(lambda: install_package(sdist.path, root / "cache"))
        env = plan_env([sdist.path], root / "cache" / "envs")
        assert env is not None
        cold = timed(lambda: ensure_env(env))
        warm = timed(lambda: ensure_env(env))
        replica = ReplicaLaunch(
            "workerpool0-0", 0, 0, "container", ("python3",), {}, root, root / "l.log", ""
        )
        plan = LaunchPlan("1", root / "run", (replica,), None, 0)
        sandbox = timed(lambda: make_sandboxes(plan))
    print(f"no-deps package install (baseline)   {baseline:7.3f} s  1.00x")
    print(f"requirements env, first job (cold)   {cold:7.3f} s  {cold / baseline:5.2f}x")
    print(f"requirements env, second job (cache) {warm:7.3f} s  {warm / baseline:5.2f}x")
    print(f"container replica sandbox            {sandbox:7.3f} s  {sandbox / baseline:5.2f}x")


if __name__ == "__main__":
    main()
