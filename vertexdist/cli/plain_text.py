"""Text from a job (its log lines, replica names, `where`, record paths, run params, model names) made safe
to print. A terminal acts on escape sequences: colours and cursor moves (CSI), and strings that set the
window title, write the clipboard or link text (OSC, and DCS, SOS, PM, APC), each in a 7-bit (`ESC ]`) and
an 8-bit (U+009D) form; a pipe hands them on to whatever shows it later. Pure.

- `plain`: a log line for output that is not a terminal: the text a terminal would show, from the last
  carriage return on, with no escape sequence and no control character (a tab stays).
- `terminal_line`: a log line for a terminal: the job's colours (SGR: `ESC [ ... m`) and carriage returns
  stay; every other escape sequence (OSC above all) and control character goes.
- `cell`: one data cell of a table or a `describe` line: no escape sequence, no control character (tabs
  and line breaks become spaces), no bidirectional override (which would show text in another order).
"""

from __future__ import annotations

import re

# OSC, DCS, SOS, PM and APC strings, up to their terminator (BEL or ST, 7-bit or 8-bit) or the text's end.
_STRINGS = re.compile(r"(?:\x1b[\]P^_X]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?")
# CSI sequences (colours, cursor moves), 7-bit and 8-bit.
_CSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?")
_SGR = re.compile(r"\x1b\[[0-9;:]*m")
# Any other escape: ESC and the byte after it (or a lone ESC).
_ESCAPE = re.compile(r"\x1b[ -~]?")
_BIDI = "\u202a-\u202e\u2066-\u2069"
_CONTROLS = re.compile(f"[\\x00-\\x08\\x0a-\\x1f\\x7f-\\x9f{_BIDI}]")
_LOG_CONTROLS = re.compile(
    f"[\\x00-\\x08\\x0a-\\x0c\\x0e-\\x1a\\x1c-\\x1f\\x7f-\\x9f{_BIDI}]"
)  # \t, \r and the SGR escapes stay
_SPACES = re.compile(r"[\t\n\r\x0b\x0c]")


def _no_escapes(text: str, keep_colours: bool = False) -> str:
    text = _STRINGS.sub("", text)
    if keep_colours:
        text = _CSI.sub(lambda m: m.group(0) if _SGR.fullmatch(m.group(0)) else "", text)
        return _ESCAPE.sub(lambda m: m.group(0) if m.group(0) == "\x1b[" else "", text)
    return _ESCAPE.sub("", _CSI.sub("", text))


def plain(line: str) -> str:
    """`line` as a terminal leaves it, for output that is not one."""
    return _CONTROLS.sub("", _no_escapes(line.rstrip("\r").rsplit("\r", 1)[-1]))


def terminal_line(line: str) -> str:
    """A log line for a terminal: its colours and carriage returns kept, every other escape removed."""
    return _LOG_CONTROLS.sub("", _no_escapes(line, keep_colours=True))


def cell(value: object) -> str:
    """One data cell (any value, as text) with no escape, no control character and no bidi override."""
    return _CONTROLS.sub("", _SPACES.sub(" ", _no_escapes(str(value))))
