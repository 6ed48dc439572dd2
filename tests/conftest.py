"""Fixtures shared across test folders: the repository root, file trees, and a template with `build`
beside a small build context (used by the image-building tests and the local backend's host runs)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
STAGING_BUCKET = "vd-staging"


def _torch_extensions_dir() -> Path:
    """A torch JIT-extension cache of this venv's own. torch's default, ~/.cache/torch_extensions/py311_cpu,
    is keyed by neither the venv nor its site-packages path, so two venvs on one machine (CI's and the
    engineers') rebuild each other's DeepSpeed shared-memory op on every job: 70-230 s of g++ per DeepSpeed
    job on 2 loaded cores, instead of one build per venv. The replicas inherit it from the test process."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    tag = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    return cache / "torch_extensions" / f"venv-{tag}"


os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(_torch_extensions_dir()))


def _start_early(item: pytest.Item) -> tuple[float, bool]:
    """How long a test may run (its `timeout` mark) and whether it is `slow`: the longest first."""
    timeout = item.get_closest_marker("timeout")
    longest = float(timeout.args[0]) if timeout and timeout.args else 0.0
    return -longest, item.get_closest_marker("slow") is None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest test files start first (stable otherwise): `make test` hands whole files to two workers,
    and a long file handed out last would leave one worker waiting on it alone."""
    first_seen: dict[str, int] = {}
    keys: dict[str, tuple[float, bool]] = {}
    for index, item in enumerate(items):
        path = str(item.path)
        first_seen.setdefault(path, index)
        keys[path] = min(keys.get(path, (0.0, True)), _start_early(item))
    items.sort(key=lambda item: (*keys[str(item.path)], first_seen[str(item.path)]))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """A test that leaves SIGINT ignored or blocked in the suite's process is named (a warning) and undone:
    every command a later test starts would inherit it, and its Ctrl-C tests would wait out their timeouts
    (tests/interrupts.py)."""
    yield
    handler = signal.getsignal(signal.SIGINT)
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    if handler is signal.SIG_IGN or blocked:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        how = "blocked" if blocked else "ignored"
        item.warn(pytest.PytestWarning(f"{item.nodeid} left SIGINT {how} in the suite's process (undone)"))


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """torch in the suite's own process on one thread, for a reference model trained here: its default, a
    thread per core, has the threads spin against the jobs' processes on 2 shared cores (test_ddp's
    reference model, 64 steps of a small MLP: 26-40 s on 2 threads at load average 11, 1-2 s on one)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def write_tree(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Create `files` (relative path -> content) under `root`."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Callable[[Mapping[str, str | bytes]], Path]:
    def make(files: Mapping[str, str | bytes]) -> Path:
        return write_tree(tmp_path / "ctx", files)

    return make


TEMPLATE = """\
display_name: built-job
project: vertexdist-demo
location: us-central1
staging_bucket: gs://{bucket}/staging
machine_type: n1-standard-4
replica_count: 2
build:
{build}
"""


def template_text(build: str, bucket: str = STAGING_BUCKET) -> str:
    return TEMPLATE.format(bucket=bucket, build=textwrap.indent(textwrap.dedent(build).strip("\n"), "  "))


@pytest.fixture
def built_template(tmp_path: Path) -> Callable[..., Path]:
    """A template file beside a small build context (`ctx/`) with a Dockerfile and a package."""

    def make(build: str | None = None, files: Mapping[str, str | bytes] | None = None) -> Path:
        write_tree(
            tmp_path / "ctx",
            files
            or {
                "Dockerfile": "FROM python:3.11-slim\nCOPY app/ /app/app/\n"
                'ENTRYPOINT ["python", "-m", "app.task"]\n',
                "app/__init__.py": "",
                "app/task.py": "print('hello from app.task')\n",
            },
        )
        path = tmp_path / "job.yaml"
        path.write_text(
            template_text(
                build
                or """
                context: ctx
                dockerfile: ctx/Dockerfile
                repository: us-central1-docker.pkg.dev/vertexdist-demo/trainers
                """
            )
        )
        return path

    return make


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def write_files() -> Callable[[Path, Mapping[str, str | bytes]], Path]:
    return write_tree


class ExampleChecks:
    """What a run of examples/ddp or examples/fsdp (2 replicas x 2 processes) must show in its logs and
    outputs; shared by the local-run and the emulator tests (importlib mode keeps helpers in fixtures)."""

    ROOT = REPO_ROOT / "examples"
    DONE = re.compile(
        r"^rank (?P<rank>\d+)/(?P<world>\d+) \(node (?P<node>\d+), "
        r"local rank (?P<local>\d+)/(?P<local_world>\d+)\): done, (?P<rest>.*)$"
    )
    HOLDS = re.compile(r"holds (\d+) of (\d+) parameters, full parameters sha256 (\w+)")

    RESTART = "----- vertexdist: job restart"

    @classmethod
    def last_attempt(cls, log: Path) -> list[str]:
        """The lines of the job's last attempt: a whole-job restart (restart_job_on_worker_restart, which
        the examples set) reruns every rank, and only the attempt that succeeded is the job's result."""
        text = log.read_text()
        return text[text.rfind(cls.RESTART) :].splitlines() if cls.RESTART in text else text.splitlines()

    @classmethod
    def done_lines(cls, logs: Sequence[Path]) -> list[dict[str, str]]:
        """Every rank's last line, with the replica whose log it is in."""
        found = []
        for log in logs:
            for line in cls.last_attempt(log):
                match = cls.DONE.match(line)
                if match:
                    found.append({**match.groupdict(), "replica": log.stem})
        return found

    @staticmethod
    def check_ranks(ranks: list[dict[str, str]]) -> None:
        """4 distinct global ranks in a world of 4, local ranks 0 and 1 on each of the 2 replicas."""
        assert sorted(int(r["rank"]) for r in ranks) == [0, 1, 2, 3]
        assert {(r["world"], r["local_world"]) for r in ranks} == {("4", "2")}
        by_replica: dict[str, set[str]] = {}
        for r in ranks:
            by_replica.setdefault(r["replica"], set()).add(r["local"])
        assert by_replica == {"workerpool0-0": {"0", "1"}, "workerpool1-0": {"0", "1"}}
        assert {(r["replica"], r["node"]) for r in ranks} == {("workerpool0-0", "0"), ("workerpool1-0", "1")}

    @classmethod
    def check_ddp(cls, logs: Sequence[Path], gcs_root: Path) -> None:
        ranks = cls.done_lines(logs)
        cls.check_ranks(ranks)
        assert len({r["rest"] for r in ranks}) == 1, "the ranks ended with different parameters"
        assert [p.name for p in gcs_root.rglob("*.pt")] == ["model.pt"]
        lines = [line for log in logs for line in cls.last_attempt(log)]
        assert len([line for line in lines if line.startswith("Saved the model")]) == 1

    @classmethod
    def check_fsdp(cls, logs: Sequence[Path], gcs_root: Path) -> None:
        ranks = cls.done_lines(logs)
        cls.check_ranks(ranks)
        shares = [m for r in ranks if (m := cls.HOLDS.match(r["rest"]))]
        assert len(shares) == 4
        held = [int(m.group(1)) for m in shares]
        total = {int(m.group(2)) for m in shares}.pop()
        assert all(0.2 < h / total < 0.3 for h in held), f"not a quarter each: {held} of {total}"
        assert sum(held) >= total
        assert len({m.group(3) for m in shares}) == 1, "the shards do not make one model"
        [checkpoint] = {p.parent for p in gcs_root.rglob("*.distcp")}
        names = sorted(p.name for p in checkpoint.iterdir())
        assert names == [".metadata", "__0_0.distcp", "__1_0.distcp", "__2_0.distcp", "__3_0.distcp"]


class StrategyChecks(ExampleChecks):
    """What runs of examples/deepspeed, pipeline, tensor_parallel and horovod_to_ddp (2 replicas x 2
    processes) must show; the scripts' own functions give the unsplit reference the tests compare with."""

    DEEPSPEED = re.compile(
        r"ZeRO stage (\d), holds (\d+) of (\d+) parameters and (\d+) of (\d+) Adam moments,"
        r" full parameters sha256 (\w+)"
    )
    PIPELINE = re.compile(
        r"stage (\d+) of (\d+), schedule (\w+), (\d+) micro-batches, gradient error (\S+),"
        r" final loss (\S+), stage sha256 (\w+)"
    )
    MESH = re.compile(
        r"mesh dp (\d+)/(\d+) tp (\d+)/(\d+), holds (\d+) of (\d+) parameters, blocks.0.up.weight shard"
        r" \((\d+), (\d+)\), first-step loss error (\S+), full parameters sha256 (\w+)"
    )
    STEP_LOSS = re.compile(r"^Step (\d+), loss (\S+)$")

    @staticmethod
    def script(name: str, file: str = "train.py") -> Any:
        """An example's script as a module, to rebuild its model and data here (it reads no env at import)."""
        import importlib.util

        path = ExampleChecks.ROOT / name / file
        spec = importlib.util.spec_from_file_location(f"example_{name}_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    @classmethod
    def lines(cls, logs: Sequence[Path]) -> list[str]:
        return [line for log in logs for line in cls.last_attempt(log)]

    @classmethod
    def step_losses(cls, logs: Sequence[Path]) -> list[float]:
        found = [m for line in cls.lines(logs) if (m := cls.STEP_LOSS.match(line))]
        return [float(m.group(2)) for m in sorted(found, key=lambda m: int(m.group(1)))]

    @classmethod
    def check_deepspeed(cls, logs: Sequence[Path], stage: int) -> str:
        """ZeRO partitions over the 4 ranks; every rank ends with the same model. Returns its checksum."""
        ranks = cls.done_lines(logs)
        cls.check_ranks(ranks)
        found = [m for r in ranks if (m := cls.DEEPSPEED.search(r["rest"]))]
        assert len(found) == 4, ranks
        for m in found:
            zero, params, total, moments = int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4))
            assert zero == stage
            assert 0.24 < moments / total < 0.26, f"Adam state not a quarter per rank: {moments} of {total}"
            share = params / total
            assert (0.24 < share < 0.26) if stage == 3 else share == 1.0, f"{params} of {total} parameters"
        assert len({m.group(6) for m in found}) == 1, "the ranks ended with different models"
        return found[0].group(6)

    @staticmethod
    def deepspeed_checkpoint(checkpoints: Path, tag: str, stage: int) -> list[str]:
        """The files engine.save_checkpoint wrote for `tag`: every rank's optimizer shard (and with ZeRO-3,
        its model shard; before that rank 0's whole model)."""
        names = sorted(p.name for p in (checkpoints / tag).iterdir())
        optim = [f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in range(4)]
        model = (
            [f"zero_pp_rank_{r}_mp_rank_00_model_states.pt" for r in range(4)]
            if stage == 3
            else ["mp_rank_00_model_states.pt"]
        )
        assert names == sorted(optim + model), names
        return names

    @classmethod
    def check_pipeline(cls, logs: Sequence[Path], model_dir: Path, schedule: str) -> None:
        """Stage i on rank i, the first step's gradients the unsplit model's, and the trained stages equal
        to the unsplit model trained here on the same batches."""
        import torch

        ranks = cls.done_lines(logs)
        cls.check_ranks(ranks)
        stages = {int(r["rank"]): m for r in ranks if (m := cls.PIPELINE.search(r["rest"]))}
        assert sorted(stages) == [0, 1, 2, 3]
        for rank, m in stages.items():
            assert (int(m.group(1)), int(m.group(2)), m.group(3)) == (rank, 4, schedule)
            assert float(m.group(5)) < 1e-6, f"stage {rank}'s gradients differ from the unsplit model's"
        assert len({m.group(6) for m in stages.values()}) == 1

        example = cls.script("pipeline")
        width, steps, batch, lr, seed = 16, 5, 32, 0.1, 0  # the script's defaults, the template's steps
        blocks = example.make_blocks(4, width, seed)
        model = torch.nn.Sequential(*blocks)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        losses = []
        with one_torch_thread():
            for step in range(steps):
                x, y = example.make_batch(step, batch, width, seed)
                optimizer.zero_grad()
                loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
                loss.backward()
                optimizer.step()
                losses.append(float(loss.detach()))
        assert abs(float(stages[3].group(6)) - losses[-1]) < 1e-5
        assert [abs(a - b) < 1e-5 for a, b in zip(cls.step_losses(logs), losses, strict=True)] == [
            True
        ] * steps
        assert sorted(p.name for p in model_dir.iterdir()) == [f"stage{i}.pt" for i in range(4)]
        for i, block in enumerate(blocks):
            saved = torch.load(model_dir / f"stage{i}.pt")
            for name, tensor in block.state_dict().items():
                assert torch.allclose(saved[name], tensor, atol=1e-5), f"stage {i} {name} differs"

    @classmethod
    def check_tensor_parallel(cls, logs: Sequence[Path]) -> None:
        """The mesh is (nodes, processes per node); each weight split 2 ways by TP and 2 by FSDP; the
        losses are those of the unsplit model trained here on the whole batch."""
        import torch

        ranks = cls.done_lines(logs)
        cls.check_ranks(ranks)
        found = {int(r["rank"]): (r, m) for r in ranks if (m := cls.MESH.search(r["rest"]))}
        assert sorted(found) == [0, 1, 2, 3]
        for r, m in found.values():
            dp, dp_size, tp, tp_size = (int(m.group(i)) for i in range(1, 5))
            assert (dp, dp_size, tp, tp_size) == (int(r["node"]), 2, int(r["local"]), 2)
            held, total = int(m.group(5)), int(m.group(6))
            assert 0.2 < held / total < 0.3, f"not about a quarter: {held} of {total}"
            assert (int(m.group(7)), int(m.group(8))) == (16, 16)  # up.weight (64, 16): /2 TP rows, /2 FSDP
            assert float(m.group(9)) < 1e-5
        assert len({m.group(10) for _, m in found.values()}) == 1, "the shards do not make one model"

        example = cls.script("tensor_parallel")
        torch.manual_seed(0)
        model = example.Model(16, 64, 2)
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
        expected = []
        with one_torch_thread():
            for step in range(4):
                x, y = example.make_batch(step, 32, 16, 0)
                optimizer.zero_grad()
                loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
                loss.backward()
                optimizer.step()
                expected.append(float(loss.detach()))
        got = cls.step_losses(logs)
        assert len(got) == 4 and all(abs(a - b) < 1e-4 for a, b in zip(got, expected, strict=True)), (
            got,
            expected,
        )

    AVERAGE = re.compile(r"validation loss (\S+), average (\S+), parameters sha256 (\w+)")

    @classmethod
    def check_horovod_to_ddp(cls, logs: Sequence[Path], gcs_root: Path) -> None:
        """DDP kept the ranks in step, the all-reduced metric is the mean of the ranks' own, one save."""
        ranks = cls.done_lines(logs)
        cls.check_ranks(ranks)
        found = [m for r in ranks if (m := cls.AVERAGE.search(r["rest"]))]
        assert len(found) == 4 and len({m.group(3) for m in found}) == 1, "the ranks ended apart"
        [average] = {float(m.group(2)) for m in found}
        assert abs(average - sum(float(m.group(1)) for m in found) / 4) < 1e-5
        assert len({m.group(1) for m in found}) == 4, "every rank scores its own held-out shard"
        assert [p.name for p in gcs_root.rglob("*.pt")] == ["model.pt"]


@pytest.fixture
def examples() -> type[StrategyChecks]:
    return StrategyChecks


def _wheel(out_dir: Path, name: str, version: str, files: Mapping[str, str]) -> Path:
    """A minimal pure-Python wheel, written by hand (no build backend, no network)."""
    import base64
    import hashlib
    import zipfile

    info = f"{name}-{version}.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    members[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: vertexdist-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = []
    for rel, text in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{rel},sha256={digest},{len(text.encode())}")
    members[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = out_dir / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for rel, text in members.items():
            archive.writestr(rel, text)
    return path


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with one tiny requirement, `vdreqdemo` (VALUE = 42), for offline pip (`--find-links`)."""
    folder = tmp_path_factory.mktemp("wheelhouse")
    _wheel(folder, "vdreqdemo", "1.0", {"vdreqdemo/__init__.py": "VALUE = 42\n"})
    return folder


@pytest.fixture
def offline_pip(wheelhouse: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip in jobs started from this process installs from `wheelhouse` only, and builds sdists with the
    setuptools already here (no build isolation, which would fetch setuptools from an index)."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse))
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")
    return wheelhouse


@pytest.fixture(scope="session")
def pip_freeze() -> Callable[[], str]:
    """`pip freeze --all` of the interpreter vertexdist runs in: a job that changes it changed the host."""
    import subprocess
    import sys

    def freeze() -> str:
        argv = [sys.executable, "-m", "pip", "freeze", "--all"]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    return freeze


def _gcs_snapshot() -> dict[str, tuple[int, int]] | None:
    """The host's own /gcs: every entry's size and mtime, or None while there is no /gcs at all."""
    root = Path("/gcs")
    if not root.exists() and not root.is_symlink():
        return None
    found = {"": (0, root.lstat().st_mtime_ns)}
    if root.is_dir() and not root.is_symlink():
        for path in root.rglob("*"):
            info = path.lstat()
            found[str(path.relative_to(root))] = (info.st_size, info.st_mtime_ns)
    return found


@pytest.fixture
def host_gcs() -> Iterator[dict[str, tuple[int, int]] | None]:
    """Fails the test if it created or changed anything on the host's own /gcs (vertexdist never may)."""
    before = _gcs_snapshot()
    yield before
    assert _gcs_snapshot() == before, "the host's own /gcs was created or changed"


class Nobody:
    """Runs commands as the unprivileged user `nobody` (from root, through setpriv), with a Python that user
    can execute and that sees this environment's packages and this checkout."""

    def __init__(self, python: str, base: Path) -> None:
        import pwd

        entry = pwd.getpwnam("nobody")
        self.uid, self.gid = entry.pw_uid, entry.pw_gid
        self.python = python
        self.base = base  # a folder every user may pass through (pytest's temp folder is root's alone)
        self.home = self.folder("home")

    def folder(self, name: str) -> Path:
        """A new folder that `nobody` owns."""
        import os

        path = self.base / name
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, self.uid, self.gid)
        return path

    def argv(self, *argv: str) -> list[str]:
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", *argv]

    def env(self, **extra: str) -> dict[str, str]:
        import os

        keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "NO_GCE_CHECK")}
        return {**keep, "HOME": str(self.home), "PYTHONPATH": str(REPO_ROOT), **extra}


def _runs_as_nobody(nobody: Nobody, python: str) -> str:
    """'' if `nobody` can run `python`, and that Python can start itself again (as local-run starts its
    replicas) and import what a job needs; otherwise what went wrong."""
    import subprocess

    check = (
        "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import torch, yaml, vertexdist'],"
        " check=True)"
    )
    try:
        result = subprocess.run(
            nobody.argv(python, "-c", check),
            env=nobody.env(),
            cwd="/",
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return "" if result.returncode == 0 else (result.stderr.strip().splitlines() or ["failed"])[-1]


@pytest.fixture(scope="session")
def nobody() -> Iterator[Nobody]:
    """The user `nobody`, with a Python it can run: this one if it can, else a virtual environment made
    from a system interpreter of the same version that sees this one's packages. Skips, saying why, when
    this is not root, there is no setpriv or no such user, or no Python works for it."""
    import os
    import shutil
    import subprocess
    import sys
    import sysconfig
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("switching to the user nobody needs root, and these tests run as another user")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: no way to run a command as nobody")
    try:
        import pwd

        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("this machine has no user `nobody`")
    # pytest's own temp folder is root's alone (0700): nobody's files go to a folder of its own.
    base = Path(tempfile.mkdtemp(prefix="vertexdist-nobody-"))
    base.chmod(0o755)
    try:
        probe = Nobody(sys.executable, base)
        why = _runs_as_nobody(probe, sys.executable)
        python = sys.executable
        if why:
            version = f"python{sys.version_info.major}.{sys.version_info.minor}"
            system = shutil.which(version, path="/usr/local/bin:/usr/bin:/bin")
            if system is None:
                pytest.skip(f"nobody cannot run {sys.executable} ({why}) and there is no system {version}")
            venv = base / "venv"
            subprocess.run([system, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
            site = Path(venv, "lib", version, "site-packages")
            parent = sysconfig.get_paths()["purelib"]
            (site / "_vertexdist_tests.pth").write_text(f"import site; site.addsitedir({parent!r})\n")
            python = str(venv / "bin" / "python")
            second = _runs_as_nobody(probe, python)
            if second:
                pytest.skip(
                    f"nobody cannot run {sys.executable} ({why}) nor a {version} environment ({second})"
                )
        yield Nobody(python, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def no_user_namespaces() -> Callable[[Sequence[str]], list[str]]:
    """`wrap(argv)`: argv run as a user that may make no user namespace, so /gcs cannot be mapped for it:
    in a user namespace of its own whose limit is reached (the kernel answers ENOSPC, as it does where
    user.max_user_namespaces is 0), mapped to a user other than root. The host's own limit is not touched.
    Skips where this machine has no user namespaces to restrict."""
    import shutil
    import subprocess

    def wrap(argv: Sequence[str]) -> list[str]:
        script = (
            "echo 1 > /proc/sys/user/max_user_namespaces"
            ' && exec unshare --user --map-user=1000 --map-group=1000 "$@"'
        )
        return ["unshare", "--user", "--map-root-user", "sh", "-c", script, "sh", *argv]

    if shutil.which("unshare") is None:
        pytest.skip("util-linux unshare is not installed")
    probe = subprocess.run(wrap(["true"]), capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no user namespace to restrict here: {probe.stderr.strip()}")
    return wrap


# ----- contract tests, cold and warm (issue 26) ------------------------------------------------------------
#
# A test that takes the `replica_start` fixture runs twice: cold, as replicas always start, and warm, with
# every replica that can be forked forked from a warm pool (`vertexdist.local.warm_pool`): the session's
# pool for local-run's path (`--warm`, or in process), a `--warm` emulator's own for the emulator's. A test
# that parametrizes `replica_start` itself (`["cold"]`, say) chooses its own modes.

COLD_LINE = "starting this replica cold"
WARM_IDLE_S = 3600.0  # longer than any session's gap between warm tests; stopped at the end in any case


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "replica_start" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [name.strip() for name in names.split(",")]
        if "replica_start" in names:
            return
    metafunc.parametrize("replica_start", ["cold", "warm"], indirect=True)


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


@pytest.fixture(scope="session")
def warm_pool_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One warm pool per session (per xdist worker), so torch is imported once for every warm variant;
    stopped and waited for at the end (its replicas die with it: PR_SET_PDEATHSIG)."""
    import os
    import signal
    import time

    from vertexdist.local.warm_pool import start_pool

    path = tmp_path_factory.mktemp("warm-pool") / "pool.sock"
    pid = start_pool(path, idle_s=WARM_IDLE_S)
    try:
        yield path
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)


class ReplicaStart:
    """How a contract test's replicas start (`mode`: cold or warm), and, for warm, the check after the
    test: the pool forked replicas for it, it is the same pool (started once, CUDA never initialised), and
    no replica started cold but for a reason the test expects (`expect_cold`)."""

    def __init__(self, mode: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
        self.mode = mode
        self.warm = mode == "warm"
        self._request = request
        self._monkeypatch = monkeypatch
        self._roots: dict[Path, set[Path]] = {}
        self._pool: tuple[Path, int, int] | None = None  # (socket, the pool's pid, replicas it had forked)
        self._expected: tuple[str, ...] = ()
        self._forks = True

    @property
    def socket(self) -> Path:
        """The session's warm pool (started on first use; an emulator's tests never start it)."""
        return Path(self._request.getfixturevalue("warm_pool_socket"))

    def _need_pool(self, path: Path | None = None) -> None:
        """Count the forks of `path`'s pool (default: the session's, which `local-run --warm` then finds
        through VERTEXDIST_WARM_SOCKET) from now on."""
        from vertexdist.local.warm_pool import SOCKET_VARIABLE

        if self._pool is not None and (path is None or path == self._pool[0]):
            return
        if path is None:
            path = self.socket
            self._monkeypatch.setenv(SOCKET_VARIABLE, str(path))
        self._use_pool(path)

    @property
    def flags(self) -> list[str]:
        return ["--warm"] if self.warm else []

    def local_run(self, python: str | None = None) -> list[str]:
        """`python -m vertexdist local-run` (with `--warm` for warm: the session's pool, through the
        environment)."""
        import sys

        if self.warm:
            self._need_pool()
        return [python or sys.executable, "-m", "vertexdist", "local-run", *self.flags]

    def watch(self, root: Path, pool: Path | None = None) -> None:
        """Check the replica logs that appear under `root`, and count the forks of `pool` (default: the
        session's), for the warm variant."""
        if not self.warm:
            return
        self._roots[root] = set(self._logs(root))
        if pool is not None:
            self._need_pool(pool)

    def expect_cold(self, *reasons: str, forks: bool = True) -> None:
        """Replicas of this test may start cold for these reasons (a `-c` stand-in, a missing program);
        `forks=False`: none of them can be forked at all."""
        self._expected = (*self._expected, *reasons)
        self._forks = forks

    def spawner(self) -> Any:
        """The runner's spawner: None (cold), or one that forks from the session's pool and never starts
        a pool of its own in its place."""
        if not self.warm:
            return None
        from vertexdist.local.warm_pool import WarmSpawner

        self._need_pool()
        assert self._pool is not None
        return WarmSpawner(self._pool[0], start=False)

    def start_job(
        self,
        spec: Mapping[str, Any],
        ctx: Any,
        *,
        run_dir: Path,
        fetch_package: Callable[[str], Path],
        cache_dir: Path | None = None,
        **kwargs: Any,
    ) -> Any:
        """cold: `start_job`, as the emulator starts a job; warm: local-run's path (its request's replicas
        on this host) with the warm spawner."""
        from vertexdist.local import start_job

        if not self.warm:
            return start_job(
                spec, ctx, run_dir=run_dir, fetch_package=fetch_package, cache_dir=cache_dir, **kwargs
            )
        from vertexdist.local.launch import schedule
        from vertexdist.local.request import build_request
        from vertexdist.wire.job_spec import parse_job_spec

        job = parse_job_spec(spec)
        uris = dict.fromkeys(uri for pool in job.pools for uri in pool.package_uris)
        limits = {"max_restarts": kwargs.pop("max_restarts")} if "max_restarts" in kwargs else {}
        request = build_request(
            job,
            ctx,
            run_dir=run_dir,
            sdists={uri: fetch_package(uri) for uri in uris},
            cache_dir=cache_dir or run_dir / "packages",
            **limits,
        )
        return schedule(request, spawner=self.spawner(), **kwargs)

    @staticmethod
    def _logs(root: Path) -> list[Path]:
        return sorted(log for log in root.glob("**/logs/*.log") if log.is_file())

    def _use_pool(self, path: Path) -> None:
        from vertexdist.local.warm_pool import ping

        answer = ping(path)
        assert answer is not None, f"no warm pool answers at {path}"
        self._pool = (path, int(answer["pid"]), int(answer["forked"]))

    def _forked(self) -> int:
        from vertexdist.local.warm_pool import ping

        assert self._pool is not None
        path, pid, before = self._pool
        answer = ping(path)
        assert answer is not None, f"the warm pool at {path} is gone"
        assert answer["pid"] == pid, "another warm pool answers: the test's pool was not the one used"
        assert answer["cuda_initialized"] is False
        return int(answer["forked"]) - before

    def check(self) -> None:
        import time

        if not self.warm:
            return
        assert self._pool is not None, "the warm variant started nothing warm (no local_run, spawner, watch)"
        deadline = time.monotonic() + 15  # a detached job's replicas may be forked just after the test
        while self._forks and self._forked() == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        forked = self._forked()
        assert forked > 0 or not self._forks, "the warm pool forked no replica for this test"
        logs = [log for root, before in self._roots.items() for log in self._logs(root) if log not in before]
        assert logs, "no replica log: no replica ran"
        for log in logs:
            for line in log.read_text(errors="replace").splitlines():
                if COLD_LINE in line:
                    assert any(why in line for why in self._expected), f"{log}: {line}"


@pytest.fixture
def replica_start(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[ReplicaStart]:
    """cold or warm (see above); for warm, the test's tmp_path is watched for replica logs."""
    start = ReplicaStart(getattr(request, "param", "cold"), request, monkeypatch)
    if start.warm:
        start.watch(Path(request.getfixturevalue("tmp_path")))
    yield start
    start.check()
