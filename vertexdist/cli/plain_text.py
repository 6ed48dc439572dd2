"""Replica lines for output that is not a terminal: a terminal would act on colour and cursor codes and on a
carriage return (a progress bar redrawn in place); a file, a pipe or a script gets them as bytes. What a
terminal would show is kept: the text, without escape sequences, from the last carriage return on."""

from __future__ import annotations

import re

# CSI (colours, cursor moves: ESC [ ... final byte), OSC (ESC ] ... BEL or ESC \), and two-byte escapes.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")


def plain(line: str) -> str:
    """`line` as a terminal leaves it, for output that is not one."""
    return _ESCAPES.sub("", line.rstrip("\r").rsplit("\r", 1)[-1])
