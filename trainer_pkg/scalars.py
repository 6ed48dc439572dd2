"""Rank 0's TensorBoard scalars: loss per step, loss and accuracy per epoch, in `AIP_TENSORBOARD_LOG_DIR`.

Written with torch's own `torch.utils.tensorboard.SummaryWriter`, which needs the `tensorboard` package;
where that is not installed (it is optional: the trainer needs torch and the standard library only) the
run writes no scalars and is otherwise the same. Vertex TensorBoard reads this folder; so does
`vertexdist ui`. A `gs://` folder is written through its Cloud Storage FUSE path (`config.local_path`).
"""

from __future__ import annotations

from typing import Any

from trainer_pkg.config import local_path

FLUSH_S = 2  # seconds between flushes, so charts of a running job stay close behind it


class Scalars:
    def __init__(self, writer: Any | None = None) -> None:
        self._writer = writer

    @classmethod
    def open(cls, folder: str) -> Scalars:
        """A writer into `folder`; one that writes nothing when `folder` is "" or tensorboard is absent."""
        if not folder:
            return cls()
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # no `tensorboard` package: no scalars, silently (see above)
            return cls()
        path = local_path(folder)
        path.mkdir(parents=True, exist_ok=True)
        return cls(SummaryWriter(log_dir=str(path), flush_secs=FLUSH_S))

    @property
    def enabled(self) -> bool:
        return self._writer is not None

    def add(self, tag: str, value: float, step: int) -> None:
        if self._writer is not None:
            self._writer.add_scalar(tag, value, global_step=step)

    def close(self) -> None:
        """Flush and close; safe to call twice (the process ends with os._exit, which runs no destructors)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
