"""One training process (DDP or FSDP): rendezvous, train with resumable state, checkpoint, save the model.

Started by `trainer_pkg.launch` (one per GPU or CPU slot) or directly by torchrun. Its place comes from
torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus a few
TRAINER_PKG_* ones the launcher sets.
"""

from __future__ import annotations

import contextlib
import datetime
import faulthandler
import importlib
import json
import os
import random
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from trainer_pkg import checkpoint
from trainer_pkg.config import TrainConfig, local_path
from trainer_pkg.data import Dataset, EpochShard, feature_scaling, load_dataset, load_validation
from trainer_pkg.errors import TrainerError, is_lost_peer
from trainer_pkg.hypertune import MetricReporter
from trainer_pkg.model import build_model
from trainer_pkg.process_exit import exit_now
from trainer_pkg.resume_lines import STOPPED
from trainer_pkg.scalars import Scalars
from trainer_pkg.strategies import Strategy, build_strategy

CONFIG_VARIABLE = "TRAINER_PKG_CONFIG"
ERROR_FILE_VARIABLE = "TRAINER_PKG_ERROR_FILE"
PARENT_VARIABLE = "TRAINER_PKG_PARENT_PID"
DEVICE_VARIABLE = "TRAINER_PKG_DEVICE"
THREADS_VARIABLE = "TRAINER_PKG_THREADS"
LISTEN_FD_VARIABLE = "TRAINER_PKG_LISTEN_FD"
OWN_STORE_VARIABLE = "TRAINER_PKG_OWN_STORE"

EXIT_STOPPED = 143  # 128 + SIGTERM: stopped on request after a checkpoint
# Ranks agree on stopping with one tiny all-reduce: first after this many steps, then about every
# STOP_CHECK_S seconds (the same all-reduce agrees on the next interval, at most STOP_CHECK_MAX_STEPS). A
# SIGTERM waits that long; every check is a step's worth of synchronisation that trains nothing.
STOP_CHECK_STEPS = 8
STOP_CHECK_S = 1.0
STOP_CHECK_MAX_STEPS = 512
# TensorBoard: rank 0's batch loss every this many steps (one host sync each); accuracy per epoch on at
# most this many training rows (one forward pass on rank 0).
SCALAR_EVERY_STEPS = 10
ACCURACY_ROWS = 10_000


@dataclass(frozen=True)
class WorkerPlace:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    master_addr: str
    master_port: int
    device: str = "cpu"
    threads: int | None = None
    own_store: bool = (
        False  # True: rank 0 hosts the TCPStore (our launcher); False: env:// (torchrun's agent store)
    )
    listen_fd: int | None = None
    error_file: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerPlace:
        def number(name: str, default: str | None = None) -> int:
            raw = env.get(name, default)
            if raw is None:
                raise TrainerError(
                    f"{name} is not set; start workers with `python -m trainer_pkg.task` or torchrun"
                )
            try:
                return int(raw)
            except ValueError:
                raise TrainerError(f"{name}={raw!r} is not an integer") from None

        device = env.get(DEVICE_VARIABLE) or ("cuda" if torch.cuda.is_available() else "cpu")
        return cls(
            rank=number("RANK"),
            local_rank=number("LOCAL_RANK", "0"),
            world_size=number("WORLD_SIZE"),
            local_world_size=number("LOCAL_WORLD_SIZE", "1"),
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=number("MASTER_PORT"),
            device=device,
            threads=number(THREADS_VARIABLE) if env.get(THREADS_VARIABLE) else None,
            own_store=env.get(OWN_STORE_VARIABLE) == "1",
            listen_fd=number(LISTEN_FD_VARIABLE) if env.get(LISTEN_FD_VARIABLE) else None,
            error_file=env.get(ERROR_FILE_VARIABLE),
        )


class StopRequest:
    """SIGTERM (Vertex's preemption notice) or SIGINT asks for a checkpoint and a clean stop."""

    requested = False

    @classmethod
    def install(cls) -> None:
        signal.signal(signal.SIGTERM, cls._handle)
        signal.signal(signal.SIGINT, cls._handle)

    @classmethod
    def _handle(cls, signum: int, frame: FrameType | None) -> None:
        cls.requested = True


class Stopped(Exception):
    """Every rank agreed to stop; the checkpoint is written."""


@dataclass
class Progress:
    epoch: int = 0
    position: int = 0  # samples of this epoch's order already consumed, across all ranks
    global_step: int = 0
    loss_sum: torch.Tensor = field(default_factory=lambda: torch.zeros((), dtype=torch.float64))
    saved_step: int = -1
    first_step_pending: bool = True  # for the start-up metric: the first step this process takes
    next_stop_check: int = STOP_CHECK_STEPS  # the global step at which the ranks next agree on stopping
    stop_checked_at: tuple[int, float] = (0, 0.0)  # (global step, time) of the last agreement


def _rendezvous(place: WorkerPlace, config: TrainConfig, backend: str) -> None:
    timeout = datetime.timedelta(seconds=config.rdzv_timeout)
    where = f"{place.master_addr}:{place.master_port}"
    if not place.own_store:
        dist.init_process_group(backend, init_method="env://", rank=place.rank, world_size=place.world_size)
        return
    try:
        store = _tcp_store(place, timeout)
    except RuntimeError as exc:  # DistStoreError / DistNetworkError are RuntimeErrors
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "EADDRINUSE" in text or "address already in use" in text.lower():
            raise TrainerError(
                f"rendezvous port {place.master_port} is already in use on this node ({text})"
            ) from None
        if place.rank == 0:
            raise TrainerError(
                f"rendezvous at {where} timed out after {config.rdzv_timeout:g} s waiting for the other "
                f"{place.world_size - 1} rank(s) ({text}); is every node started?"
            ) from None
        raise TrainerError(
            f"could not join the rendezvous at {where} within {config.rdzv_timeout:g} s ({text}); "
            "is the chief (workerpool0) running?"
        ) from None
    # The rendezvous timeout bounds joining; collectives (rank 0 writing a large checkpoint while the others
    # wait at a barrier, say) get at least the five minutes a slow checkpoint write on /gcs may need.
    collective_timeout = max(timeout, datetime.timedelta(minutes=5))
    dist.init_process_group(
        backend, store=store, rank=place.rank, world_size=place.world_size, timeout=collective_timeout
    )


def _tcp_store(place: WorkerPlace, timeout: datetime.timedelta) -> dist.TCPStore:
    is_master = place.rank == 0
    args = (place.master_addr, place.master_port, place.world_size, is_master, timeout)
    if is_master and place.listen_fd is not None:
        try:
            return dist.TCPStore(*args, wait_for_workers=True, master_listen_fd=place.listen_fd)
        except TypeError:  # torch without master_listen_fd: free the launcher's socket and bind the port anew
            os.close(place.listen_fd)
    return dist.TCPStore(*args, wait_for_workers=True)


def _rank_state(progress: Progress) -> dict[str, Any]:
    return {
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python_rng": random.getstate(),
        "loss_sum": progress.loss_sum.detach().cpu(),
    }


def _restore_rank_state(state: Mapping[str, Any], progress: Progress) -> None:
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    random.setstate(state["python_rng"])
    progress.loss_sum = state["loss_sum"].to(progress.loss_sum.device)


class Worker:
    """One rank's training run; rank 0 also writes checkpoints, metrics and the model."""

    def __init__(self, config: TrainConfig, place: WorkerPlace) -> None:
        self.config = config
        self.place = place
        self.is_chief = place.rank == 0
        self.model_dir = local_path(config.model_dir)
        self.checkpoint_dir = local_path(config.checkpoint_dir)
        self.device = torch.device(f"cuda:{place.local_rank}" if place.device == "cuda" else "cpu")
        self.scalars = Scalars()

    # --- output, rank 0 only -------------------------------------------------------------------
    def _metric(self, **fields: Any) -> None:
        if not self.is_chief:
            return
        self.model_dir.mkdir(parents=True, exist_ok=True)
        with (self.model_dir / "metrics.jsonl").open("a") as handle:
            handle.write(json.dumps({**fields, "time": time.time()}) + "\n")

    def _say(self, message: str) -> None:
        if self.is_chief:
            print(message, flush=True)

    # --- the run ----------------------------------------------------------------------------------
    def run(self) -> None:
        if self.place.threads:
            torch.set_num_threads(self.place.threads)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        _rendezvous(self.place, self.config, "nccl" if self.device.type == "cuda" else "gloo")
        try:
            if self.is_chief:
                self.scalars = Scalars.open(self.config.tensorboard_dir)
            self._setup()
            self._train()
        finally:
            # No barrier here: _train ends with one on success, and after a failure a peer may be gone
            # (a barrier would wait for it until the group's timeout). docs/launchers/torchrun.md,
            # "Ending a script safely".
            self.scalars.close()
            dist.destroy_process_group()

    def _setup(self) -> None:
        config = self.config
        self.dataset = load_dataset(config)
        self.model = build_model(self.dataset.features.shape[1], config.hidden, config.seed)
        self.model.set_scaling(*feature_scaling(self.dataset))
        self.model.to(self.device)
        self.strategy: Strategy = build_strategy(config.strategy, self.model, config.lr)
        self._score_accuracy = self.scalars.enabled
        if self.strategy.name == "fsdp":  # the accuracy's forward is a collective: all ranks or none
            wanted = torch.tensor([1.0 if self.scalars.enabled else 0.0], device=self.device)
            dist.all_reduce(wanted, op=dist.ReduceOp.MAX)
            self._score_accuracy = bool(wanted.item())
        self.progress = Progress(loss_sum=torch.zeros((), dtype=torch.float64, device=self.device))
        self._loss_scales: dict[int, torch.Tensor] = {}
        self._resume()
        # Scaled once: the model's scaling is elementwise, so every batch gets the values it would compute.
        with torch.no_grad():
            scaled = self.model.scale(self.dataset.features.to(self.device))
        self.on_device = Dataset(scaled, self.dataset.labels.to(self.device), self.dataset.feature_names)
        self.validation: Dataset | None = None
        # Under fsdp the forward is a collective: every rank scores the held-out rows, rank 0 reports.
        if config.hp_metric_tag and (self.is_chief or self.strategy.name == "fsdp"):
            held_out = load_validation(config)
            self.validation = Dataset(
                held_out.features.to(self.device), held_out.labels.to(self.device), held_out.feature_names
            )
            self.reporter = MetricReporter(os.environ)

    def _train(self) -> None:
        config, place, progress = self.config, self.place, self.progress
        self._say(
            f"training: {len(self.dataset)} samples, {config.epochs} epochs, world size {place.world_size}, "
            f"batch {config.batch_size} per rank, device {self.device.type}, strategy {self.strategy.name}"
        )
        StopRequest.install()
        progress.next_stop_check = progress.global_step + STOP_CHECK_STEPS
        progress.stop_checked_at = (progress.global_step, time.perf_counter())
        while progress.epoch < config.epochs:
            epoch_start, start = time.perf_counter(), progress.position
            self._train_epoch()
            self._end_epoch(time.perf_counter() - epoch_start, len(self.dataset) - start)
            self._report_tuning_metric()
            self._checkpoint()
            self._stop_if_asked()
        spread = self.strategy.spread()
        if spread is not None and spread != 0.0:
            raise TrainerError(f"ranks ended with different parameters (largest difference {spread:g})")
        self._metric(
            event="done",
            global_step=progress.global_step,
            world_size=place.world_size,
            strategy=self.strategy.name,
            param_spread=spread,
        )
        weights = self.strategy.model_state()
        if self.is_chief:
            self.model_dir.mkdir(parents=True, exist_ok=True)
            checkpoint.write_atomic(self.model_dir / "model.pt", lambda handle: torch.save(weights, handle))
            self._say(f"saved {self.model_dir / 'model.pt'}")
        dist.barrier()

    def _train_epoch(self) -> None:
        config, place, progress = self.config, self.place, self.progress
        shard = EpochShard.build(
            self.on_device,
            seed=config.seed,
            epoch=progress.epoch,
            start=progress.position,
            rank=place.rank,
            world_size=place.world_size,
            batch_size=config.batch_size,
        )
        strategy, scales = self.strategy, self._loss_scales
        for batch in shard.batches():
            # The gradient of the global batch's mean loss: each rank's summed loss times a scale that fits
            # how the strategy syncs (a sum, or a mean over ranks), one tensor per global batch size.
            scale = scales.get(batch.global_size)
            if scale is None:
                factor = strategy.loss_scale(batch.global_size, place.world_size)
                scale = scales[batch.global_size] = torch.tensor(factor, device=self.device)
            loss_sum = strategy.step(batch.features, batch.labels, scale)
            progress.loss_sum += loss_sum
            progress.position = batch.end
            progress.global_step += 1
            if self.scalars.enabled and progress.global_step % SCALAR_EVERY_STEPS == 0:
                batch_rows = max(1, int(batch.labels.shape[0]))
                self.scalars.add("train/loss", float(loss_sum.detach()) / batch_rows, progress.global_step)
            if progress.first_step_pending:
                progress.first_step_pending = False
                self._metric(event="first_step", global_step=progress.global_step)
            if config.checkpoint_every and progress.global_step % config.checkpoint_every == 0:
                self._checkpoint()
            if progress.global_step >= progress.next_stop_check:
                self._stop_if_asked()

    def _report_tuning_metric(self) -> None:
        """Score the model on the validation rows and report it for the tuning service (epoch = step)."""
        if self.validation is None:
            return
        with torch.no_grad():
            logits = self.strategy.logits(self.validation.features)
            labels = self.validation.labels
            if self.config.hp_metric == "val_loss":
                value = float(F.binary_cross_entropy_with_logits(logits, labels))
            else:
                value = float(((logits > 0).float() == labels).float().mean())
        if not self.is_chief:
            return
        self.reporter.report(self.config.hp_metric_tag, value, global_step=self.progress.epoch)
        self.scalars.add(f"epoch/{self.config.hp_metric}", value, self.progress.epoch)
        self._say(
            f"epoch {self.progress.epoch}  {self.config.hp_metric_tag} {value:.4f} (reported for tuning)"
        )

    def _accuracy(self) -> float:
        """The model on (at most ACCURACY_ROWS of) the training rows: the share it gets right.

        `on_device` holds the features already scaled. Under fsdp the forward is a collective, so every rank
        runs it (`_score_accuracy` is agreed at setup); under ddp rank 0 alone does.
        """
        with torch.no_grad():
            features = self.on_device.features[:ACCURACY_ROWS]
            labels = self.on_device.labels[:ACCURACY_ROWS]
            logits = self.model.logits_of_scaled(features)
            return float(((logits > 0).float() == labels).float().mean())

    def _end_epoch(self, seconds: float, samples: int) -> None:
        progress = self.progress
        total = progress.loss_sum.clone()
        dist.all_reduce(total)
        loss = float(total) / len(self.dataset)
        rate = samples / seconds if seconds > 0 else 0.0
        self._say(
            f"epoch {progress.epoch + 1}/{self.config.epochs}  loss {loss:.4f}  samples/s {rate:,.0f}  "
            f"step {progress.global_step}"
        )
        if self._score_accuracy:
            accuracy = self._accuracy()
            self.scalars.add("epoch/loss", loss, progress.epoch + 1)
            self.scalars.add("epoch/accuracy", accuracy, progress.epoch + 1)
            self.scalars.add("epoch/samples_per_s", rate, progress.epoch + 1)
        self._metric(
            event="epoch",
            epoch=progress.epoch + 1,
            loss=loss,
            samples_per_s=rate,
            samples=samples,
            seconds=seconds,
            global_step=progress.global_step,
            world_size=self.place.world_size,
        )
        progress.epoch += 1
        progress.position = 0
        progress.loss_sum.zero_()

    # --- stopping, checkpoints --------------------------------------------------------------------
    def _stop_if_asked(self) -> None:
        """Every rank at the same step: does any rank want to stop, and at which step do they ask again."""
        progress, now = self.progress, time.perf_counter()
        steps, since = progress.global_step - progress.stop_checked_at[0], now - progress.stop_checked_at[1]
        interval = progress.next_stop_check - progress.stop_checked_at[0]
        if steps > 0 and since > 0:
            interval = max(1, min(STOP_CHECK_MAX_STEPS, int(steps * STOP_CHECK_S / since)))
        # One all-reduce, MAX: the stop flag, and minus each rank's interval, so the shortest one wins.
        agreed = torch.tensor([1.0 if StopRequest.requested else 0.0, -float(interval)], device=self.device)
        dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
        flag, shortest = agreed.tolist()
        progress.next_stop_check = progress.global_step + max(1, int(-shortest))
        progress.stop_checked_at = (progress.global_step, time.perf_counter())
        if flag == 0:
            return
        self._checkpoint()
        self._say(STOPPED.format(step=self.progress.global_step))
        raise Stopped

    def _checkpoint(self) -> None:
        if self.progress.saved_step == self.progress.global_step:
            return
        with _timed_save():
            self._save_checkpoint()

    def _save_checkpoint(self) -> None:
        progress = self.progress
        rank_states: list[Any] = [None] * self.place.world_size
        dist.all_gather_object(rank_states, _rank_state(progress))
        model_state, optimizer_state = self.strategy.model_state(), self.strategy.optimizer_state()
        if self.is_chief:
            state = {
                "model_signature": self.model.signature(),
                "model": model_state,
                "optimizer": optimizer_state,
                "strategy": self.strategy.name,
                "epoch": progress.epoch,
                "position": progress.position,
                "global_step": progress.global_step,
                "world_size": self.place.world_size,
                "batch_size": self.config.batch_size,
                "seed": self.config.seed,
                "dataset_size": len(self.dataset),
                "ranks": rank_states,
            }
            checkpoint.save(
                self.checkpoint_dir, progress.global_step, state, keep=self.config.keep_checkpoints
            )
        progress.saved_step = progress.global_step
        dist.barrier()  # a checkpoint counts once every rank knows it is on disk

    def _resume(self) -> None:
        found: list[Any] = [None]
        if self.is_chief:
            loaded = checkpoint.load_newest(self.checkpoint_dir)
            found[0] = (str(loaded.path), loaded.state) if loaded else None
        # One reader: the other ranks get the checkpoint over the process group, not from a shared disk.
        dist.broadcast_object_list(found, src=0)
        if found[0] is None:
            return
        path, state = found[0]
        self._check_compatible(path, state)
        progress = self.progress
        self.strategy.load(state["model"], state["optimizer"])
        progress.epoch = state["epoch"]
        progress.position = state["position"]
        progress.global_step = progress.saved_step = state["global_step"]
        ranks = state["ranks"]
        if len(ranks) == self.place.world_size:
            _restore_rank_state(ranks[self.place.rank], progress)
        elif self.is_chief:
            # Another world size resumes at the same sample position; the partial-epoch loss moves to rank 0.
            total = sum((r["loss_sum"] for r in ranks), torch.zeros((), dtype=torch.float64))
            progress.loss_sum = total.to(self.device)
        ran = state.get("strategy", "ddp")
        switched = (
            f" (written under {ran}, continuing under {self.strategy.name})"
            if ran != self.strategy.name
            else ""
        )
        self._say(
            f"resumed from {path}: epoch {progress.epoch + 1}, {progress.position} samples into it, "
            f"step {progress.global_step}{switched}"
        )
        self._metric(event="resumed", checkpoint=path, global_step=progress.global_step)

    def _check_compatible(self, path: str, state: Mapping[str, Any]) -> None:
        ours = self.model.signature()
        if state.get("model_signature") != ours:
            theirs = state.get("model_signature") or {}
            raise TrainerError(
                f"checkpoint {path} is for a different model ({_describe(theirs)}), this run builds "
                f"{_describe(ours)}; use another checkpoint directory (AIP_CHECKPOINT_DIR) or remove it"
            )
        if state["dataset_size"] != len(self.dataset) or state["seed"] != self.config.seed:
            raise TrainerError(
                f"checkpoint {path} was written for {state['dataset_size']} samples with seed "
                f"{state['seed']}, this run has {len(self.dataset)} samples with seed {self.config.seed}; "
                "it cannot resume that epoch"
            )


def _describe(signature: Mapping[str, Any]) -> str:
    return (
        f"{signature.get('kind', '?')} with {signature.get('in_features', '?')} features, "
        f"hidden {signature.get('hidden', '?')}"
    )


def watch_parent(env: Mapping[str, str]) -> None:
    """Die with the replica process even if it is SIGKILLed (Linux: PR_SET_PDEATHSIG)."""
    expected = env.get(PARENT_VARIABLE)
    if not expected:
        return
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(expected):  # the parent died before the prctl above took effect
        os._exit(1)


def _record_error(place: WorkerPlace | None, env: Mapping[str, str], reason: str) -> None:
    path = env.get(ERROR_FILE_VARIABLE)
    if path:
        with contextlib.suppress(OSError):
            Path(path).write_text(reason + "\n")
    where = f"rank {place.rank}: " if place else ""
    print(f"trainer_pkg: {where}error: {reason}", file=sys.stderr, flush=True)


# Finished workers stay referenced until the process ends through exit_now(): freeing DDP drops the last
# reference to the gloo process group, whose destructor was seen to hang (about one run in three on this
# 2-core machine) once the peers had exited, after training had finished and the model was saved.
_KEEP_UNTIL_EXIT: list[Worker] = []


def _timed_save() -> contextlib.AbstractContextManager[None]:
    """The health watcher's timer of a checkpoint save (`vertexdist_launcher.health.checkpoint`): the goodput
    ledger's checkpointing time and last saved step. Without the launcher, nothing."""
    health = sys.modules.get("vertexdist_launcher.health")
    timer = getattr(health, "checkpoint", None)
    return timer() if timer is not None else contextlib.nullcontext()


def start_health_watcher(env: Mapping[str, str]) -> None:
    """The rank's health watcher (steps, where it is, heartbeats: `vertexdist_launcher.health`), and its
    stdout and stderr writing whole lines into the replica's log (`vertexdist_launcher.whole_lines`). The
    launcher ships in every package and image vertexdist builds; run by hand without it, the trainer has
    neither."""
    with contextlib.suppress(ImportError):
        importlib.import_module("vertexdist_launcher.whole_lines").install()
        importlib.import_module("vertexdist_launcher.health").start(env)


def run_worker(config: TrainConfig, env: Mapping[str, str]) -> int:
    """Train as the rank `env` describes; the exit status for the process (0, 1, or EXIT_STOPPED).

    End the process with exit_now() afterwards (trainer_pkg.process_exit), not by returning to Python.
    """
    place: WorkerPlace | None = None
    start_health_watcher(env)
    try:
        place = WorkerPlace.from_env(env)
        worker = Worker(config, place)
        _KEEP_UNTIL_EXIT.append(worker)
        worker.run()
        return 0
    except Stopped:
        return EXIT_STOPPED
    except TrainerError as exc:
        _record_error(place, env, exc.message)
        return exc.exit_code
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        if not is_lost_peer(first_line):  # a lost peer is another rank's story; anything else may be a bug
            traceback.print_exc()
        _record_error(place, env, f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__)
        return 1
    finally:  # the rank's last heartbeat: the process ends with os._exit, which runs no atexit handler
        health = sys.modules.get("vertexdist_launcher.health")
        if health is not None:
            with contextlib.suppress(Exception):
                health.finish()


def main() -> int:
    watch_parent(os.environ)
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` prints where a stuck worker is
    raw = os.environ.get(CONFIG_VARIABLE)
    if not raw:
        print(
            f"trainer_pkg: error: {CONFIG_VARIABLE} is not set; run `python -m trainer_pkg.task`",
            file=sys.stderr,
        )
        return 2
    exit_now(run_worker(TrainConfig.from_json(raw), os.environ))


if __name__ == "__main__":
    sys.exit(main())
