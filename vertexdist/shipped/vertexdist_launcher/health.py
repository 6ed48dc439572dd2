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
- The emulator watches as Vertex does (`LOGS_VARIABLE`): heartbeat lines in the log and each rank's own hang
  decision, beside the run folder's files (where its ranks wait for every rank's dump, as locally); its
  monitor decides nothing, it takes up the first rank's verdict.
- A fault plan's `hang` and `slow` faults (`VERTEXDIST_HEALTH_FAULTS`) act from the same step hook, so they
  reach an unchanged script. So does the aim of a `preempt` or `maintenance` fault with `after_step`: at that
  step the rank writes its heartbeat and `reached-<replica>` in the health folder, and waits there for the
  platform's SIGTERM (the local runner's or the emulator's preemption reads the file). The SIGTERM releases
  it once the script's own handler has run, so the script acts on the notice as on a real preemption (the
  bundled trainer checkpoints and stops within the grace); without a handler the signal ends the rank.
- Checkpoint saves: `with vertexdist_launcher.health.checkpoint(): save(...)` times a save and marks the
  step it saved (the bundled trainer does so); the heartbeat carries the saves' count, their time and the
  last saved step, for the goodput ledger (`vertexdist goodput`). A save writes a heartbeat at once, so the
  last saved step is known exactly however the rank ends afterwards.

Standard library only; every error in the watcher is swallowed: it must never hurt the training.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Iterator, Mapping
from types import FrameType
from typing import Any

DIR_VARIABLE = "VERTEXDIST_HEALTH_DIR"  # local runs: where heartbeats go
CONFIG_VARIABLE = "VERTEXDIST_HEALTH"  # {"hang_timeout": seconds | null, "straggler_ratio": 1.5}
FAULTS_VARIABLE = "VERTEXDIST_HEALTH_FAULTS"  # [{"kind": "hang" | "slow", "local_rank": 0, ...}]
# The job's private mark (set by vertexdist when it creates the job): every heartbeat and verdict line the
# watcher writes into the log carries it, and readers take only lines with it. The watcher takes it out of
# the process's environment as it starts, so the script, and what it runs, is not handed it.
MARK_VARIABLE = "VERTEXDIST_HEALTH_MARK"
ROLE_VARIABLE = "VERTEXDIST_HEALTH_ROLE"  # a watched process that is no training rank: "ray driver"
# "1": watch as on Vertex (heartbeat lines in the log, each rank's own hang decision) beside the run folder's
# files, which stay for what only the platform does (the emulator's: step-aimed faults, shell, live stacks).
LOGS_VARIABLE = "VERTEXDIST_HEALTH_LOGS"
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
REACHED_PREFIX = "reached-"  # + replica: a step-aimed preemption's step was reached (a fault plan's)
STEP_AIMED = ("preempt", "maintenance")
DUMPED_SUFFIX = ".dumped"  # `stacks/rank-N.dumped`: rank N has written its hang dump (log and stacks file)
DUMP_WAIT_S = 10.0  # the longest a hung rank waits for the other ranks' dumps before it exits
# A hang's dump in the replica's log (stderr): the verdict line, then `DUMP_MARK` and the rank's stacks.
VERDICT_MARK = "vertexdist_launcher: "
DUMP_MARK = "vertexdist_launcher: stacks of "
# A script ships as SCRIPT_PACKAGE/task.py (the SDK's layout, `vertexdist.packaging`), with SOURCE_FILE beside
# it holding the user's own file name: frames and stacks are named by it (train.py), not by the copy.
SCRIPT_PACKAGE = "aiplatform_custom_trainer_script"
SOURCE_FILE = "vertexdist_source.txt"
THREAD_NAME = "vertexdist-health"

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


_SHOWN: dict[str, str] = {}


def shown_name(filename: str) -> str:
    """The file name a frame is shown by: the user's own script's for the packaged copy of a script (read
    once from SOURCE_FILE beside it), else the file's base name."""
    base = os.path.basename(filename)
    if base != "task.py" or os.path.basename(os.path.dirname(filename)) != SCRIPT_PACKAGE:
        return base
    found = _SHOWN.get(filename)
    if found is None:
        found = base
        with (
            contextlib.suppress(OSError, UnicodeError),
            open(os.path.join(os.path.dirname(filename), SOURCE_FILE), encoding="utf-8") as handle,
        ):
            found = handle.read().strip() or base
        _SHOWN[filename] = found
    return found


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
    at = f"{shown_name(filename)}:{line}"
    return {"state": state, "where": f"{function} ({at})", "what": what, "at": at}


def top_frame(frames: list[tuple[str, int, str]]) -> str:
    """The innermost frame, in the user's code or the library it waits in: `function (place:line)`, the
    place a library's own path (`pyarrow/_fs.pyx`) or the file's name. Pure."""
    if not frames:
        return ""
    filename, line, function = frames[-1]
    place = os.path.basename(filename)
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in filename:
            place = filename.split(marker, 1)[1]
    if filename.startswith(_STDLIB + os.sep):
        place = os.path.relpath(filename, _STDLIB)
    return f"{function} ({place}:{line})"


class _TermHold:
    """Holds the main thread until SIGTERM arrives. Made in the main thread, it puts its own handler in
    front of the script's (which it calls first, then gives back its place); made in another thread (no
    handler can be set there) or where SIGTERM's action is the default one (the signal ends the process
    then), it holds until the process ends."""

    POLL_S = 0.05

    def __init__(self) -> None:
        self.arrived = False
        self.previous: Any = None
        self.installed = False
        with contextlib.suppress(Exception):  # ValueError: not the main thread
            previous = signal.getsignal(signal.SIGTERM)
            if previous not in (signal.SIG_DFL, None):
                self.previous = previous
                signal.signal(signal.SIGTERM, self._on_term)
                self.installed = True

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self.arrived = True  # a flag, no lock: a handler may run while this thread holds any lock
        if callable(self.previous):
            self.previous(signum, frame)

    def wait(self) -> None:
        if not self.installed:
            threading.Event().wait()
        try:
            while not self.arrived:
                time.sleep(self.POLL_S)  # the handler runs in this thread, between two sleeps' ticks
        finally:
            with contextlib.suppress(Exception):
                signal.signal(signal.SIGTERM, self.previous)


def _frames(frame: FrameType | None) -> list[tuple[str, int, str]]:
    found = []
    while frame is not None:
        found.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return found[::-1]


def _stack_text(frame: FrameType) -> str:
    """One thread's stack as a traceback prints it, the packaged script named by the user's own file, and
    the launcher's frames before the user's code (runpy, vertexdist_launcher) left out."""
    summary = traceback.extract_stack(frame)  # the source lines are read here, by the real paths
    first = next((i for i, f in enumerate(summary) if not _library(f.filename)), 0)
    for entry in summary:
        shown = shown_name(entry.filename)
        if shown != os.path.basename(entry.filename):
            entry.filename = shown
    kept = traceback.StackSummary.from_list(list(summary)[first:])
    skipped = f"  ({first} launcher frames before your code left out)\n" if first else ""
    return skipped + "".join(kept.format())


def all_stacks() -> str:
    """Every thread's stack, as a traceback prints it: the main thread (the training) first, the watcher's
    own thread left out."""
    names = {t.ident: t.name for t in threading.enumerate()}
    main = threading.main_thread().ident
    parts = []
    frames = sorted(sys._current_frames().items(), key=lambda item: item[0] != main)
    for ident, frame in frames:
        if names.get(ident) == THREAD_NAME:
            continue
        parts.append(f"Thread {names.get(ident, ident)!s} (most recent call last):\n")
        parts.append(_stack_text(frame))
    return "".join(parts)


def _replica(env: Mapping[str, str]) -> str:
    with contextlib.suppress(Exception):  # no CLUSTER_SPEC, or not Vertex's shape: the single replica
        task = json.loads(env.get("CLUSTER_SPEC", "{}")).get("task", {})
        return f"{task['type']}-{int(task['index'])}"
    return "workerpool0-0"


def _number(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "")
    return int(raw) if raw.isdigit() else default


def log_line(beat: Mapping[str, Any], mark: str = "") -> str:
    """A heartbeat as one structured line of the replica's log (Vertex): JSON that Cloud Logging keeps as
    the entry's `jsonPayload`, its `message` the text `vertexdist logs` shows; with the job's mark."""
    message = f"vertexdist health: rank {beat.get('rank')} step {beat.get('step')}"
    return json.dumps({"message": message, LOG_KEY: {**beat, "mark": mark} if mark else dict(beat)})


def verdict_line(verdict: str, rank: int, mark: str = "") -> str:
    """The verdict of a rank that found the job hung, as one structured line (with the job's mark)."""
    body: dict[str, Any] = {"verdict": verdict, "rank": rank}
    if mark:
        body["mark"] = mark
    return json.dumps({"message": f"vertexdist health: {verdict}", LOG_KEY: body})


_INTS = ("rank", "local_rank", "world_size", "pid", "step")
_TIMES = ("first_step_at", "last_step_at", "step_s", "steps_per_s", "own_step_s", "written_at")
_TEXTS = ("replica", "state", "where", "what", "at")
_MAX_INT = 2**31 - 1
_MAX_TEXT = 4096


def _int_field(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_INT


def _number_field(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and value == value  # not NaN
        and 0 <= value < float("inf")
    )


def checked_beat(beat: Any) -> dict[str, Any] | None:
    """A heartbeat with each field of the type its writer gives it (integers, non-negative finite numbers or
    null, strings of at most 4 KiB, a share in [0, 1]), its rank below its world size; None for anything
    else, so one bad line (`"step": "abc"`) is skipped and never breaks a reader. Other keys are kept only
    as short scalars."""
    if not isinstance(beat, Mapping):
        return None
    if not _int_field(beat.get("rank")):
        return None
    found: dict[str, Any] = {"rank": beat["rank"]}
    for key in _INTS[1:]:
        if key in beat and beat[key] is not None:
            if not _int_field(beat[key]):
                return None
            found[key] = beat[key]
    for key in _TIMES:
        if key in beat:
            if beat[key] is not None and not _number_field(beat[key]):
                return None
            found[key] = beat[key]
    for key in _TEXTS:
        if key in beat:
            if not isinstance(beat[key], str) or len(beat[key]) > _MAX_TEXT:
                return None
            found[key] = beat[key]
    if "wait_share" in beat:
        share = beat["wait_share"]
        if not (_number_field(share) and share <= 1):
            return None
        found["wait_share"] = share
    for key, value in beat.items():  # a field a newer watcher writes: kept when it is a short scalar
        if key not in found and key not in ("mark", "wait_share") and isinstance(key, str):
            scalar = value is None or isinstance(value, bool | int) or _number_field(value)
            if scalar or (isinstance(value, str) and len(value) <= _MAX_TEXT):
                found[key] = value
    if found.get("world_size", 1) < 1 or found["rank"] >= found.get("world_size", _MAX_INT):
        return None
    return found


def _payload(line: str | Mapping[str, Any]) -> Any:
    if isinstance(line, str):
        text = line.strip()
        if not (text.startswith("{") and LOG_KEY in text):
            return None
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return None
    return line


def _marked(body: Any, mark: str | None) -> bool:
    return isinstance(body, Mapping) and (mark is None or body.get("mark") == mark)


def parse_log_line(line: str | Mapping[str, Any], mark: str | None = None) -> dict[str, Any] | None:
    """The heartbeat in a line `log_line` wrote: its text, or the JSON payload Cloud Logging made of it,
    type-checked (`checked_beat`) and, where the job has a mark, carrying it; None for any other. Pure."""
    payload = _payload(line)
    beat = payload.get(LOG_KEY) if isinstance(payload, Mapping) else None
    if not isinstance(beat, Mapping) or not _marked(beat, mark) or "verdict" in beat:
        return None
    return checked_beat(beat)


def parse_verdict_line(line: str | Mapping[str, Any], mark: str | None = None) -> tuple[int, str] | None:
    """(rank, verdict) of a line `verdict_line` wrote, carrying the job's mark where it has one. Pure."""
    payload = _payload(line)
    body = payload.get(LOG_KEY) if isinstance(payload, Mapping) else None
    if not isinstance(body, Mapping) or not _marked(body, mark):
        return None
    verdict, rank = body.get("verdict"), body.get("rank")
    if not isinstance(verdict, str) or not verdict or len(verdict) > _MAX_TEXT:
        return None
    if not isinstance(rank, int) or not _int_field(rank):
        return None
    return rank, verdict


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


def dump_text(verdict: str, stacks: str, rank: int = 0, mark: str = "") -> str:
    """What a hung rank writes into its log before it exits: the verdict (as text, and as a structured line
    with the job's mark), then its stacks."""
    return f"{verdict_line(verdict, rank, mark)}\n{VERDICT_MARK}{verdict}\n{DUMP_MARK}{stacks}"


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
        self.logs = self.dir is None or env.get(LOGS_VARIABLE) == "1"  # as on Vertex (LOGS_VARIABLE)
        self.mark = env.get(MARK_VARIABLE, "")
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
        self.started_at = time.time()
        self.first_step_at: float | None = None
        self.last_step_at: float | None = None
        self.checkpoint_s = 0.0
        self.checkpoints = 0
        self.checkpoint_step: int | None = None
        self.durations: deque[float] = deque(maxlen=WINDOW)
        self.samples: deque[str] = deque(maxlen=int(WINDOW * 5 / SAMPLE_S))
        self.sample_steps: deque[int] = deque(maxlen=int(WINDOW * 5 / SAMPLE_S))
        self.last: dict[str, str] = {"state": "starting", "where": "", "what": "", "at": "", "top": ""}
        self.role = str(env.get(ROLE_VARIABLE, ""))  # "ray driver": a Ray job's driver, watched as a rank
        # A process that is no training rank counts no optimizer steps (a driver's own torch work would
        # start a hang clock that its long wait in tuner.fit() would then run out).
        self.manual = bool(self.role)
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
            elif fault.get("kind") in STEP_AIMED and self.steps >= int(fault.get("after_step") or 0):
                self.faults.remove(fault)
                self._reached(fault)
                return

    def on_checkpoint(self, seconds: float, saved: bool = True) -> None:
        """A save took `seconds`; `saved`: it completed, at the step count reached so far."""
        self.checkpoint_s += max(0.0, seconds)
        if saved:
            self.checkpoints += 1
            self.checkpoint_step = self.steps
        with contextlib.suppress(Exception):  # at once: the saved step must outlive a kill that follows
            self.write_beat()

    def _hang_due(self, fault: Mapping[str, Any]) -> bool:
        if fault.get("after_step") is not None:
            return self.steps >= int(fault["after_step"])
        return time.time() - self.started_at >= float(fault.get("after") or 0.0)

    def _block(self, fault: Mapping[str, Any]) -> None:
        """A fault plan's `hang`: this rank blocks here, as if its data read never returned."""
        from . import say

        # The plan counts the steps made; a verdict names the step a rank is in, one more: say both.
        made = self.steps
        say(f"rank {self.rank} blocks after step {made}, in step {made + 1} (a fault plan's hang)")
        threading.Event().wait()

    def _reached(self, fault: Mapping[str, Any]) -> None:
        """A step-aimed preemption's step: the heartbeat and the mark the platform waits for, then this rank
        waits for its signal (the step count the fault meets is this one, however fast the machine). The
        SIGTERM releases it, after the script's own handler ran, so the script acts on the notice as on a
        real preemption (the bundled trainer checkpoints and stops); a script with no handler is ended by
        the signal itself."""
        from . import say

        if self.dir is None:
            return
        held = _TermHold()  # before the mark: the platform's SIGTERM may follow it at once
        with contextlib.suppress(Exception):
            self.write_beat()
            self.write_file(f"{REACHED_PREFIX}{self.replica}", str(self.steps))
        say(f"rank {self.rank} reached step {self.steps}: the fault plan's {fault.get('kind')} lands here")
        held.wait()

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
        frames = _frames(frame)
        self.last = {**classify(frames, self.world_size > 1), "top": top_frame(frames)}
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
            "checkpoint_s": round(self.checkpoint_s, 6),
            "checkpoints": self.checkpoints,
            "checkpoint_step": self.checkpoint_step,
            "state": state,
            "where": self.last["where"],
            "what": self.last["what"],
            "at": self.last["at"],
            "top": self.last.get("top", ""),
            "role": self.role,
            "written_at": now,
        }

    def finish(self) -> None:
        """The rank's last heartbeat, as its process ends: its final step count, state `exited`."""
        if self.dir is None or self.stopping:
            return
        with contextlib.suppress(Exception):
            self._take_uncaught()
            beat = {**self.beat(), "state": "exited"}
            self.write_file(os.path.join(BEATS_DIR, f"rank-{self.rank}.json"), json.dumps(beat))

    def _take_uncaught(self) -> None:
        """Where the main thread's uncaught exception was raised (the interpreter keeps it as
        `sys.last_traceback` before atexit), instead of the last sample: a script that failed at its second
        line's import is shown there, not at line 1 where the watcher last saw it."""
        tb = getattr(sys, "last_traceback", None)
        frames: list[tuple[str, int, str]] = []
        while tb is not None:
            frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame.f_code.co_name))
            tb = tb.tb_next
        if frames:
            self.last = {**classify(frames, self.world_size > 1), "top": top_frame(frames)}

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

    def write_beat(self, line: bool = True) -> None:
        """The heartbeat: the run folder's file; on Vertex one structured line in the replica's log, once the
        rank steps. Where both are written (`logs` with a folder), `line` False leaves the line to its own
        pace (`LOG_EVERY_S`, not the file's)."""
        if self.dir is not None:
            self.write_file(os.path.join(BEATS_DIR, f"rank-{self.rank}.json"), json.dumps(self.beat()))
        if self.logs and self.steps and (line or self.dir is None):
            print(log_line(self.beat(), self.mark), flush=True)

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
            print(dump_text(verdict, text, self.rank, self.mark), file=sys.stderr)
            sys.stderr.flush()
        with contextlib.suppress(Exception):
            if self.dir is not None:
                self.write_file(os.path.join(STACKS_DIR, f"rank-{self.rank}.txt"), text)
                self.write_file(os.path.join(BEATS_DIR, f"rank-{self.rank}.json"), json.dumps(self.beat()))
                self.write_file(os.path.join(STACKS_DIR, dumped_marker(self.rank)), verdict)
            if self.logs:  # Vertex: the last heartbeat is a log line too
                print(log_line(self.beat(), self.mark), flush=True)
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
        next_beat = next_line = 0.0
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
                if self.logs:
                    self._own_hang()
                now = time.monotonic()
                first = bool(self.steps) and not first_written  # the first step: at once
                if now >= next_beat or first:
                    first_written = first_written or self.steps > 0
                    self.write_beat(line=False)
                    next_beat = now + every
                if self.logs and self.dir is not None and self.steps and (now >= next_line or first):
                    print(log_line(self.beat(), self.mark), flush=True)  # the file's beside: its own pace
                    next_line = now + LOG_EVERY_S
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
        if env is os.environ:  # the script, and what it starts, is not handed the job's mark
            os.environ.pop(MARK_VARIABLE, None)
        if "torch.optim.optimizer" in sys.modules and not watcher.manual:
            watcher._register()
        threading.Thread(target=watcher.run, name=THREAD_NAME, daemon=True).start()
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


@contextlib.contextmanager
def checkpoint() -> Iterator[None]:
    """Time one checkpoint save of this rank: `with health.checkpoint(): torch.save(...)`, on every rank
    that takes part in the save (those that wait for it too). The goodput ledger counts the time as
    checkpointing, and the step count reached as saved (a save that raises counts its time, not the step).
    Does nothing without a watcher."""
    started = time.time()
    saved = False
    try:
        yield
        saved = True
    finally:
        watcher = _WATCHER
        if watcher is not None:
            watcher.on_checkpoint(time.time() - started, saved)


def checkpoint_saved(seconds: float) -> None:
    """The same as `checkpoint()`, for a save the script timed itself: it took `seconds`, and is complete."""
    watcher = _WATCHER
    if watcher is not None:
        watcher.on_checkpoint(seconds)
