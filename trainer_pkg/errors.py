"""The error the trainer reports as a plain message (no traceback); telling a lost peer from a cause."""

from __future__ import annotations

# What a rank reports when another rank died under it (gloo, NCCL): a consequence, not the cause.
_LOST_PEER = (
    "closed by peer",
    "reset by peer",
    "broken pipe",
    "connection refused",
    "communicator was aborted",
)


def is_lost_peer(message: str) -> bool:
    return any(text in message.lower() for text in _LOST_PEER)


class TrainerError(Exception):
    """Bad input or a failed run, said in one line that names the variable, file or rank at fault."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
