"""Rank health: a watcher in every worker, a daemon thread that needs nothing from the user's script.

- Steps are counted by a global optimizer step post-hook (`torch.optim.optimizer.
  register_optimizer_step_post_hook`), registered once the script itself has imported torch (this module
  never imports it); a loop with no optimizer calls `vertexdist_launcher.health.step()` once a step (after
  the first such call the hook stops counting, so a step is never counted twice).
- Ten times a second it samples the main thread's frames (`sys._current_frames`; gloo and NCCL waits
  release the GIL, so it runs while the main thread is blocked) and reads them as computing, waiting in a
  collective (a `torch.distributed` frame, or the all-reduce DDP runs inside backward) or loading data
  (a DataLoader, a socket or file read). The share of samples spent waiting gives the rank's own step time.
- A heartbeat, one JSON object: locally (vertexdist's runner sets `VERTEXDIST_HEALTH_DIR`) a file per rank in
  the run folder every `FILE_EVERY_S`; on Vertex one structured line in the replica's log every
  `LOG_EVERY_S` (three a minute), which Cloud Logging keeps at no extra cost.
- Locally the job's monitor decides that the job is hung and writes `verdict.json`: every rank then prints
  all its threads' stacks into its log (and `stacks/`), flushed, and exits `HUNG_EXIT` only once every rank
  of the job has left its dump (or `DUMP_WAIT_S` passed): a rank that exited first would have its launcher
  (torchrun) stop its replica's other ranks before they wrote theirs. A `stacks-*` request file makes each
  rank write its stacks to `stacks/rank-N.txt` now (`vertexdist ranks --stacks`). On Vertex, where no monitor
  runs, a rank that made no progress for `hang_timeout` decides so itself; it waits for its replica's
  other local ranks' dumps (marker files in `DUMPS_VARIABLE`'s folder, which the torchrun launcher makes per
  replica) and, while other replicas' ranks may still be deciding, for `remote_grace_s`.
- A fault plan's `hang` and `slow` faults (`VERTEXDIST_HEALTH_FAULTS`) act from the same step hook, so they
  reach an unchanged script.

Standard library only; every error in the watcher is swallowed: it must never hurt the training.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Mapping
from types import FrameType
from typing import Any

DIR_VARIABLE = "VERTEXDIST_HEALTH_DIR"  # local runs: where heartbeats go
CONFIG_VARIABLE = "VERTEXDIST_HEALTH"  # {"hang_timeout": seconds | null, "straggler_ratio": 1.5}
FAULTS_VARIABLE = "VERTEXDIST_HEALTH_FAULTS"  # [{"kind": "hang" | "slow", "local_rank": 0, ...}]
DUMPS_VARIABLE = "VERTEXDIST_DUMPS_DIR"  # Vertex: a folder the replica's local ranks share for dump markers
HUNG_EXIT = 124  # a rank stopped because the job hung (as timeout(1) exits); the reason HUNG
DEFAULT_HANG_TIMEOUT_S = 1800.0
DEFAULT_STRAGGLER_RATIO = 1.5
SAMPLE_S = 0.1
FILE_EVERY_S = 2.0
LOG_EVERY_S = 20.0
WINDOW = 20  # steps over which step times are averaged
LOG_KEY = "vertexdist_health"
VERDICT_FILE = "verdict.json"
BEATS_DIR = "ranks"
STACKS_DIR = "stacks"
REQUEST_PREFIX = "stacks-"
DUMPED_SUFFIX = ".dumped"  # `stacks/rank-N.dumped`: rank N has written its hang dump (log and stacks file)
DUMP_WAIT_S = 10.0  # the longest a hung rank waits for the other ranks' dumps before it exits
# A hang's dump in the replica's log (stderr): the verdict line, then `DUMP_MARK` and the rank's stacks.
VERDICT_MARK = "vertexdist_launcher: "
DUMP_MARK = "vertexdist_launcher: stacks of "

_LIBRARIES = {"torch", "numpy", "deepspeed", "transformers", "accelerate", "lightning", "pytorch_lightning"}
_OWN_DIR = os.path.dirname(os.path.abspath(__file__))
_STDLIB = os.path.dirname(os.__file__)
_READS = ("socket.py", "ssl.py", "selectors.py", "client.py", "urllib3", "requests", "gcsfs", "fsspec")


def _library(filename: str) -> bool:
    """Not the user's code: the standard library, this launcher, torch and its kind."""
    path = os.path.abspath(filename)
    if path.startswith(_OWN_DIR) or filename.startswith("<"):
        return True
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            top = path.split(marker, 1)[1].split("/", 1)[0]
            return top in _LIBRARIES or top.endswith(".py")
    return path.startswith(_STDLIB)


def classify(frames: list[tuple[str, int, str]], distributed: bool = True) -> dict[str, str]:
    """What a thread does, from its frames (outermost first): state, where (the innermost frame of the
    user's code, `function (file:line)`), at (its `file:line`) and, when waiting, in what. Pure."""
    state, what = "computing", ""
    for filename, _line, function in reversed(frames):
        if "/torch/distributed/" in filename and function not in ("wrapper", "_get_default_group"):
            state, what = "waiting", f"the {function}"
            break
        if "/torch/autograd/" in filename and function == "backward" and distributed:
            state, what = "waiting", "the all-reduce of backward"
            break
        if "/torch/utils/data/" in filename or any(r in filename for r in _READS):
            state = "loading"
            break
        if filename.startswith(_OWN_DIR) and function == "_block":
            state = "loading"
            break
    mine = [f for f in frames if not _library(f[0])] or frames[-1:]
    if not mine:
        return {"state": state, "where": "", "what": what, "at": ""}
    filename, line, function = mine[-1]
    at = f"{os.path.basename(filename)}:{line}"
    return {"state": state, "where": f"{function} ({at})", "what": what, "at": at}


def _frames(frame: FrameType | None) -> list[tuple[str, int, str]]:
    found = []
    while frame is not None:
        found.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return found[::-1]


def all_stacks() -> str:
    """Every thread's stack, as a traceback prints it."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        parts.append(f"Thread {names.get(ident, ident)!s} (most recent call last):\n")
        parts.append("".join(traceback.format_stack(frame)))
    return "".join(parts)


def _replica(env: Mapping[str, str]) -> str:
    with contextlib.suppress(Exception):  # no CLUSTER_SPEC, or not Vertex's shape: the single replica
        task = json.loads(env.get("CLUSTER_SPEC", "{}")).get("task", {})
        return f"{task['type']}-{int(task['index'])}"
    return "workerpool0-0"


def _number(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "")
    return int(raw) if raw.isdigit() else default


def log_line(beat: Mapping[str, Any]) -> str:
    """A heartbeat as one structured line of the replica's log (Vertex): JSON that Cloud Logging keeps as
    the entry's `jsonPayload`, its `message` the text `vertexdist logs` shows."""
    message = f"vertexdist health: rank {beat.get('rank')} step {beat.get('step')}"
    return json.dumps({"message": message, LOG_KEY: dict(beat)})


def parse_log_line(line: str | Mapping[str, Any]) -> dict[str, Any] | None:
    """The heartbeat in a line `log_line` wrote: its text, or the JSON payload Cloud Logging made of it;
    None for any other line. Pure."""
    payload: Any = line
    if isinstance(line, str):
        text = line.strip()
        if not (text.startswith("{") and LOG_KEY in text):
            return None
        try:
            payload = json.loads(text)
        except ValueError:
            return None
    beat = payload.get(LOG_KEY) if isinstance(payload, Mapping) else None
    if not isinstance(beat, Mapping) or not isinstance(beat.get("rank"), int):
        return None
    return dict(beat)


def dumped_marker(name: str | int) -> str:
    """The file that says rank `name` (a global rank, or `local-N-R` on Vertex) has written its dump."""
    return f"rank-{name}{DUMPED_SUFFIX}"


def missing_dumps(folder: str, names: list[str]) -> list[str]:
    """Those of `names` (ranks) that have no dump marker in `folder` yet."""
    try:
        present = set(os.listdir(folder))
    except OSError:
        present = set()
    return [n for n in names if dumped_marker(n) not in present]


def wait_for_dumps(folder: str, names: list[str], bound_s: float, until: float = 0.0) -> list[str]:
    """Wait until every one of `names` has dumped, at most `bound_s`, and at least until the monotonic time
    `until`; the names still missing."""
    deadline = time.monotonic() + bound_s
    missing = missing_dumps(folder, names)
    while (missing or time.monotonic() < until) and time.monotonic() < deadline:
        time.sleep(0.05)
        missing = missing_dumps(folder, names)
    return missing


def dump_text(verdict: str, stacks: str) -> str:
    """What a hung rank writes into its log before it exits: the verdict, then its stacks."""
    return f"{VERDICT_MARK}{verdict}\n{DUMP_MARK}{stacks}"


class Watcher:
    """One rank's watcher (see the module's text); `start` runs its thread."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.rank = _number(env, "RANK", 0)
        self.local_rank = _number(env, "LOCAL_RANK", 0)
        self.world_size = _number(env, "WORLD_SIZE", 1)
        self.local_world_size = _number(env, "LOCAL_WORLD_SIZE", 1)
        self.restart = _number(env, "TORCHELASTIC_RESTART_COUNT", 0)
        self.dumps_dir = env.get(DUMPS_VARIABLE) or None
        self.replica = _replica(env)
        self.dir = env.get(DIR_VARIABLE) or None
        config: dict[str, Any] = {}
        with contextlib.suppress(Exception):
            config = dict(json.loads(env.get(CONFIG_VARIABLE) or "{}"))
        timeout = config.get("hang_timeout", DEFAULT_HANG_TIMEOUT_S)
        self.hang_timeout: float | None = None
        with contextlib.suppress(Exception):
            self.hang_timeout = float(timeout) if timeout else None
        self.faults: list[dict[str, Any]] = []
        with contextlib.suppress(Exception):
            self.faults = [
                f
                for f in json.loads(env.get(FAULTS_VARIABLE) or "[]")
                if int(f.get("local_rank", 0)) == self.local_rank and f.get("replica") == self.replica
            ]
        self.steps = 0
        self.manual = False
        self.started_at = time.time()
        self.first_step_at: float | None = None
        self.last_step_at: float | None = None
        self.durations: deque[float] = deque(maxlen=WINDOW)
        self.samples: deque[str] = deque(maxlen=int(WINDOW * 5 / SAMPLE_S))
        self.sample_steps: deque[int] = deque(maxlen=int(WINDOW * 5 / SAMPLE_S))
        self.last: dict[str, str] = {"state": "starting", "where": "", "what": "", "at": ""}
        self.main = threading.main_thread().ident
        self.hooked = False
        self.hook_handle: Any = None
        self.stopping = False
        self.requests_seen: set[str] = set()

    # ----- steps ----------------------------------------------------------------------------------
    def on_step(self) -> None:
        now = time.time()
        if self.last_step_at is not None:
            self.durations.append(now - self.last_step_at)
        else:
            self.first_step_at = now
        self.last_step_at = now
        self.steps += 1
        for fault in self.faults:
            if fault.get("kind") == "slow":
                time.sleep(float(fault.get("delay", 0.0)))
            elif fault.get("kind") == "hang" and self._hang_due(fault):
                self.faults.remove(fault)
                self._block(fault)
                return

    def _hang_due(self, fault: Mapping[str, Any]) -> bool:
        if fault.get("after_step") is not None:
            return self.steps >= int(fault["after_step"])
        return time.time() - self.started_at >= float(fault.get("after") or 0.0)

    def _block(self, fault: Mapping[str, Any]) -> None:
        """A fault plan's `hang`: this rank blocks here, as if its data read never returned."""
        from . import say

        say(f"rank {self.rank} blocks at step {self.steps} (a fault plan's hang)")
        threading.Event().wait()

    def _hook(self, _optimizer: object, _args: object, _kwargs: object) -> None:
        if not self.manual:
            self.on_step()

    def _register(self) -> None:
        optimizer = sys.modules.get("torch.optim.optimizer")
        register = getattr(optimizer, "register_optimizer_step_post_hook", None)
        if register is not None:
            self.hook_handle = register(self._hook)
            self.hooked = True

    # ----- the thread -----------------------------------------------------------------------------
    def sample(self) -> None:
        frame = sys._current_frames().get(self.main) if self.main is not None else None
        if frame is None:
            return
        self.last = classify(_frames(frame), self.world_size > 1)
        self.samples.append(self.last["state"])
        self.sample_steps.append(self.steps)

    def beat(self) -> dict[str, Any]:
        now = time.time()
        mean = sum(self.durations) / len(self.durations) if self.durations else None
        # The samples of the last WINDOW finished steps: not the start-up, nor a step still under way.
        low = max(1, self.steps - WINDOW)
        window = [s for s, n in zip(self.samples, self.sample_steps, strict=True) if low <= n < self.steps]
        wait_share = window.count("waiting") / len(window) if window else 0.0
        state = self.last["state"] if self.steps else "starting"
        return {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "replica": self.replica,
            "world_size": self.world_size,
            "pid": os.getpid(),
            "step": self.steps,
            "first_step_at": self.first_step_at,
            "last_step_at": self.last_step_at,
            "step_s": mean,
            "steps_per_s": 1.0 / mean if mean else None,
            "wait_share": round(wait_share, 3),
            "own_step_s": mean * (1.0 - wait_share) if mean is not None else None,
            "state": state,
            "where": self.last["where"],
            "what": self.last["what"],
            "at": self.last["at"],
            "written_at": now,
        }

    def finish(self) -> None:
        """The rank's last heartbeat, as its process ends: its final step count, state `exited`."""
        if self.dir is None or self.stopping:
            return
        with contextlib.suppress(Exception):
            beat = {**self.beat(), "state": "exited"}
            self.write_file(os.path.join(BEATS_DIR, f"rank-{self.rank}.json"), json.dumps(beat))

    def _path(self, *parts: str) -> str:
        assert self.dir is not None
        return os.path.join(self.dir, *parts)

    def write_file(self, name: str, text: str) -> None:
        path = self._path(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temp = f"{path}.{os.getpid()}.tmp"
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, path)

    def write_beat(self) -> None:
        if self.dir is not None:
            self.write_file(os.path.join(BEATS_DIR, f"rank-{self.rank}.json"), json.dumps(self.beat()))
        elif self.steps:  # Vertex: one structured line in the replica's log, once the rank steps
            print(log_line(self.beat()), flush=True)

    def _requests(self) -> None:
        """A stacks request (`vertexdist ranks --stacks`), or the monitor's verdict."""
        assert self.dir is not None
        try:
            names = os.listdir(self.dir)
        except OSError:
            return
        if VERDICT_FILE in names:
            verdict = ""
            with (
                contextlib.suppress(OSError, ValueError),
                open(self._path(VERDICT_FILE), encoding="utf-8") as f,
            ):
                verdict = str(json.load(f).get("verdict", ""))
            self.stop_hung(verdict)
        for name in names:
            if name.startswith(REQUEST_PREFIX) and name not in self.requests_seen:
                self.requests_seen.add(name)
                self.write_file(os.path.join(STACKS_DIR, f"rank-{self.rank}.txt"), self.stacks_text())

    def stacks_text(self) -> str:
        return f"rank {self.rank} ({self.replica}, local rank {self.local_rank}) at step {self.steps}\n" + (
            all_stacks()
        )

    def stop_hung(self, verdict: str) -> None:
        """The job is hung: every thread's stack into this rank's log (and the stacks folder), then, once the
        other ranks have theirs too (at most `DUMP_WAIT_S`), exit."""
        if self.stopping:
            return
        self.stopping = True
        self.dump(verdict)
        self.await_dumps()
        os._exit(HUNG_EXIT)

    def dump(self, verdict: str) -> None:
        """The verdict and this rank's stacks into its log, flushed; locally its stacks file and last
        heartbeat too; then its marker, which tells the other ranks that it is done."""
        text = self.stacks_text()
        with contextlib.suppress(Exception):
            print(dump_text(verdict, text), file=sys.stderr)
            sys.stderr.flush()
        with contextlib.suppress(Exception):
            if self.dir is not None:
                self.write_file(os.path.join(STACKS_DIR, f"rank-{self.rank}.txt"), text)
                self.write_file(os.path.join(BEATS_DIR, f"rank-{self.rank}.json"), json.dumps(self.beat()))
                self.write_file(os.path.join(STACKS_DIR, dumped_marker(self.rank)), verdict)
            else:  # Vertex: the last heartbeat is a log line too
                print(log_line(self.beat()), flush=True)
        if self.dumps_dir is not None:
            with contextlib.suppress(OSError):
                marker = os.path.join(self.dumps_dir, dumped_marker(self._local_name(self.local_rank)))
                with open(marker, "w", encoding="utf-8") as handle:
                    handle.write(verdict)

    def _local_name(self, local_rank: int) -> str:
        return f"local-{local_rank}-{self.restart}"

    def remote_grace_s(self) -> float:
        """Vertex: how long a rank that decided the hang waits for other replicas' ranks to decide too. The
        ranks of a hung job stopped stepping within a step of each other, and each looks ten times a second,
        so they decide within about a step (two, for safety) and two samples of this rank; at most
        `DUMP_WAIT_S`."""
        if self.world_size <= self.local_world_size:
            return 0.0
        step_s = sum(self.durations) / len(self.durations) if self.durations else 0.0
        return min(DUMP_WAIT_S, 1.0 + 2 * SAMPLE_S + 2 * step_s)

    def await_dumps(self) -> list[str]:
        """Wait (at most `DUMP_WAIT_S`) until every rank this rank can see has dumped: locally every rank of
        the job (the run folder's markers); on Vertex its replica's local ranks, and `remote_grace_s` for
        the others. The ranks still missing."""
        if self.dir is not None:
            ranks = [str(r) for r in range(self.world_size)]
            return wait_for_dumps(self._path(STACKS_DIR), ranks, DUMP_WAIT_S)
        until = time.monotonic() + self.remote_grace_s()
        if self.dumps_dir is None or self.local_world_size <= 1:
            while time.monotonic() < until:
                time.sleep(0.05)
            return []
        local = [self._local_name(n) for n in range(self.local_world_size)]
        return wait_for_dumps(self.dumps_dir, local, DUMP_WAIT_S, until=until)

    def _own_hang(self) -> None:
        """Vertex (no monitor): this rank made no progress for hang_timeout since its last step."""
        if self.hang_timeout is None or self.last_step_at is None:
            return
        idle = time.time() - self.last_step_at
        if idle > self.hang_timeout:
            where = self.last["where"]
            self.stop_hung(
                f"hung: no progress for {idle:.0f}s; rank {self.rank} is in {where} at step {self.steps}"
            )

    def run(self) -> None:
        next_beat = 0.0
        every = FILE_EVERY_S if self.dir is not None else LOG_EVERY_S
        first_written = False
        while True:
            time.sleep(SAMPLE_S)
            try:
                if not self.hooked and not self.manual:
                    self._register()
                self.sample()
                if self.dir is not None:
                    self._requests()
                else:
                    self._own_hang()
                now = time.monotonic()
                if now >= next_beat or (self.steps and not first_written):  # the first step: at once
                    first_written = first_written or self.steps > 0
                    self.write_beat()
                    next_beat = now + every
            except Exception:  # the watcher never hurts the training
                time.sleep(1.0)


_WATCHER: Watcher | None = None


def start(env: Mapping[str, str] | None = None) -> Watcher | None:
    """Start this process's watcher (once); None where vertexdist did not start it (no run folder, not on
    Vertex) or `health: {hang_timeout: never}` switched the Vertex side off."""
    global _WATCHER
    env = os.environ if env is None else env
    if _WATCHER is not None:
        return _WATCHER
    if not env.get(DIR_VARIABLE) and "CLUSTER_SPEC" not in env:
        return None
    try:
        watcher = Watcher(env)
        if "torch.optim.optimizer" in sys.modules:
            watcher._register()
        threading.Thread(target=watcher.run, name="vertexdist-health", daemon=True).start()
        atexit.register(watcher.finish)
    except Exception:  # the watcher never stops the training: without it the rank runs unwatched
        return None
    _WATCHER = watcher
    return watcher


def declared_hung(env: Mapping[str, str]) -> bool:
    """Whether the local job's monitor has called this job hung (its verdict is in the health folder): a
    replica whose ranks then ended (by their own exit, or losing a peer that exited first) exits HUNG_EXIT."""
    folder = env.get(DIR_VARIABLE)
    return bool(folder) and os.path.exists(os.path.join(str(folder), VERDICT_FILE))


def finish() -> None:
    """Write this rank's last heartbeat now: for a process that ends with `os._exit` (no atexit handlers)."""
    if _WATCHER is not None:
        _WATCHER.finish()


def step() -> None:
    """Mark one step of this rank's training: for a loop with no torch optimizer. Once called, the
    optimizer hook stops counting, so a step is never counted twice. Does nothing without a watcher."""
    watcher = _WATCHER
    if watcher is not None:
        watcher.manual = True
        watcher.on_step()
