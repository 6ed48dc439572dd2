"""One container task of a PipelineJob as a local process, through kfp's own executor machinery.

kfp builds the task's ExecutorInput (`kfp.local.executor_input_utils`) and resolves every `{{$...}}`
placeholder of its command (`kfp.local.placeholder_utils`), as its local runner does; a lightweight Python
component then runs `kfp.dsl.executor_main` itself. What differs from kfp's local runner is what Vertex does:
output artifacts live under the pipeline root in Cloud Storage (`gs://...`, read and written at `/gcs/...`
through the emulator's mount), and a component's `packages_to_install` go into a cached environment of the
emulator's (one per package list, reused by later tasks) instead of a pip install on every run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertexdist.local import gcs_mount
from vertexdist.private_files import make_private_dir

Artifacts = dict[str, list[dict[str, Any]]]
_PIP_LINE = re.compile(r"python3 -m pip install (.*?)(?:&&|$)", re.MULTILINE)
_KFP_PIN = re.compile(r"^kfp[=<>!~]")


@dataclass
class TaskOutcome:
    exit_code: int
    parameters: dict[str, Any] = field(default_factory=dict)
    artifacts: Artifacts = field(default_factory=dict)
    message: str = ""


def packages_to_install(command: list[str]) -> list[str]:
    """The packages a lightweight component's install preamble asks for, kfp itself left out (pure).

    The preamble is `sh -c "... python3 -m pip install --quiet ... 'six' 'attrs>=1' && python3 -m pip
    install ... 'kfp==X' '--no-deps' ... && "$0" "$@""`: kfp is what the emulator runs it with already.
    """
    if len(command) < 3 or command[:2] != ["sh", "-c"] or "pip install" not in command[2]:
        return []
    found: list[str] = []
    for match in _PIP_LINE.finditer(command[2]):
        words = shlex.split(match.group(1))
        if any(_KFP_PIN.match(w) for w in words):
            continue  # kfp's own line, with its typing-extensions marker
        found.extend(w for w in words if not w.startswith("-"))
    return found


def without_install_preamble(command: list[str]) -> list[str]:
    """The command with its pip preamble replaced by a plain exec of the rest (pure)."""
    if len(command) >= 3 and command[:2] == ["sh", "-c"] and "pip install" in command[2]:
        return ["sh", "-c", '"$0" "$@"', *command[3:]]
    return list(command)


def is_lightweight(command: list[str]) -> bool:
    return any("kfp.dsl.executor_main" in part for part in command)


class EnvironmentCache:
    """Virtual environments for `packages_to_install`, one per package list, built once and reused."""

    def __init__(self, root: Path, python: str = sys.executable) -> None:
        self.root = root
        self.python = python
        self._lock = threading.Lock()

    def python_for(self, packages: list[str], log: Path) -> str:
        if not packages:
            return self.python
        key = hashlib.sha256(json.dumps(sorted(packages)).encode()).hexdigest()[:16]
        folder = self.root / key
        python = folder / "bin" / "python"
        with self._lock:
            if (folder / ".ready").exists():
                return str(python)
            make_private_dir(self.root)
            with open(log, "ab") as out:
                steps = (
                    [self.python, "-m", "venv", "--system-site-packages", "--without-pip", str(folder)],
                    [self.python, "-m", "pip", "--python", str(python), "install", "--quiet", *packages],
                )
                for step in steps:
                    code = subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
                    if code != 0:
                        raise RuntimeError(
                            f"packages_to_install {packages} could not be installed (pip exit {code});"
                            f" see the task's log"
                        )
            (folder / ".ready").write_text(json.dumps(packages))
        return str(python)


def _kfp() -> Any:
    from kfp.local import (
        executor_input_utils,
        executor_output_utils,
        placeholder_utils,
    )

    return executor_input_utils, executor_output_utils, placeholder_utils


def executor_input(
    component: dict[str, Any],
    parameters: dict[str, Any],
    artifacts: Artifacts,
    local_root: Path,
    gcs_root: str,
) -> tuple[Any, dict[str, Any]]:
    """The task's ExecutorInput (protobuf, and as kfp's placeholders read it): inputs given, parameter
    outputs to files under `local_root`, output artifacts under `gcs_root` in Cloud Storage."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    inputs_utils, _, _ = _kfp()
    spec = json_format.ParseDict(component, pipeline_spec_pb2.ComponentSpec(), ignore_unknown_fields=True)
    made = inputs_utils.construct_executor_input(spec, dict(parameters), str(local_root), False)
    as_dict: dict[str, Any] = inputs_utils.executor_input_to_dict(made, spec)
    if artifacts:
        as_dict.setdefault("inputs", {})["artifacts"] = {k: {"artifacts": v} for k, v in artifacts.items()}
    for name, listed in as_dict.get("outputs", {}).get("artifacts", {}).items():
        for artifact in listed.get("artifacts", []):
            artifact["uri"] = f"{gcs_root.rstrip('/')}/{name}"
    parsed = json_format.ParseDict(as_dict, pipeline_spec_pb2.ExecutorInput(), ignore_unknown_fields=True)
    return parsed, as_dict


def resolve_command(
    container: dict[str, Any],
    input_dict: dict[str, Any],
    *,
    pipeline_name: str,
    task_name: str,
    pipeline_root: str,
    job_id: str,
) -> list[str]:
    """command + args with every placeholder resolved by kfp's own resolver."""
    _, _, placeholders = _kfp()
    full = [*container.get("command", []), *container.get("args", [])]
    resolved: list[str] = placeholders.replace_placeholders(
        full, input_dict, pipeline_name, task_name, pipeline_root, job_id
    )
    return resolved


def read_outcome(
    exit_code: int, component: dict[str, Any], made_input: Any, input_dict: dict[str, Any]
) -> TaskOutcome:
    """The task's output parameters (executor output and `dsl.OutputPath` files) and artifacts."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    _, output_utils, _ = _kfp()
    spec = json_format.ParseDict(component, pipeline_spec_pb2.ComponentSpec(), ignore_unknown_fields=True)
    output_file = input_dict.get("outputs", {}).get("outputFile", "")
    written = output_utils.load_executor_output(output_file) if output_file else None
    written = written or pipeline_spec_pb2.ExecutorOutput()
    merged = output_utils.merge_dsl_output_file_parameters_to_executor_output(made_input, written, spec)
    parameters = {k: output_utils.pb2_value_to_python(v) for k, v in merged.parameter_values.items()}
    parameters = output_utils.cast_protobuf_numbers(parameters, spec.output_definitions.parameters)
    artifacts: Artifacts = {
        k: list(v.get("artifacts", [])) for k, v in input_dict.get("outputs", {}).get("artifacts", {}).items()
    }
    for name, listed in json_format.MessageToDict(merged).get("artifacts", {}).items():
        declared = artifacts.get(name) or [{}]
        # The executor's output carries URI and metadata; the type is the one the task declared.
        artifacts[name] = [
            {**({"type": declared[0]["type"]} if "type" in declared[0] else {}), **a}
            for a in listed.get("artifacts", [])
        ]
    return TaskOutcome(exit_code, parameters, artifacts)


class TaskProcess:
    """A started task process (its own session, so cancel stops it and all it started)."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, cwd: Path) -> None:
        self._log = open(log, "ab")  # noqa: SIM115 - closed in wait()
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )

    def wait(self) -> int:
        try:
            return self.process.wait()
        finally:
            self._log.close()

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGTERM)


def launch(
    command: list[str],
    *,
    python: str,
    task_dir: Path,
    gcs_folder: Path,
    env: dict[str, str],
    on_start: Callable[[TaskProcess], None],
) -> int:
    """Run the resolved command with `/gcs` mapped to the emulated Cloud Storage's folder."""
    from kfp.local import subprocess_task_handler

    argv = without_install_preamble(command)
    if is_lightweight(argv):
        argv = subprocess_task_handler.replace_python_executable(argv, python)
    make_private_dir(gcs_folder)
    make_private_dir(gcs_mount.stage_dir(task_dir))
    problem = gcs_mount.problem()
    if problem is None:
        argv = list(gcs_mount.launch_argv(argv, gcs_folder, task_dir))
    else:
        env = gcs_mount.guard_env(env, problem)
    process = TaskProcess(argv, env, task_dir / "log", task_dir)
    on_start(process)
    try:
        return process.wait()
    finally:
        gcs_mount.remove_stage(task_dir)
