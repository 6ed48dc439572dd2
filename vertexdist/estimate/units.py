"""Numbers with units on the command line: parameter counts (350M), sizes (1.4GB) and short durations (120ms).

Each parser raises UnitError: its text names the value and what is wrong with it, its hint the accepted
forms and, where a unit is close to a known one, the likely intended value.
"""

from __future__ import annotations

import difflib
import re

_NUMBER = re.compile(r"^(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)(?P<unit>[a-zµ]*)$", re.IGNORECASE)

PARAM_UNITS: dict[str, float] = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
BYTE_UNITS: dict[str, float] = {
    "": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
}  # fmt: skip
DURATION_UNITS: dict[str, float] = {"US": 1e-6, "µS": 1e-6, "MS": 1e-3, "S": 1.0, "MIN": 60.0}

PARAMS_FORMS = "a count like 350M, 1.3B, 7B, 125K or 350000000 (K, M, B/G, T)"
BYTES_FORMS = "a size like 1.4GB, 700MB, 8GiB or 1400000000 (B, KB, MB, GB, TB; KiB, MiB, GiB, TiB)"
DURATION_FORMS = "a duration like 120ms, 0.12s or 1.5s (us, ms, s, min)"
GRAD_DTYPES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2}

_UNIT_SPELLING = {"KIB": "KiB", "MIB": "MiB", "GIB": "GiB", "TIB": "TiB", "µS": "us", "US": "us", "MS": "ms",
                  "S": "s", "MIN": "min"}  # fmt: skip


class UnitError(ValueError):
    """A value that does not parse; `hint` says what would."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def _spelled(unit: str) -> str:
    return _UNIT_SPELLING.get(unit, unit)


def _split(text: str) -> tuple[float, str, str] | None:
    """(number, unit in capitals, unit as written), or None when the text is not a number and a unit."""
    match = _NUMBER.match(text.strip().replace(" ", "").replace("_", "").replace(",", ""))
    if match is None:
        return None
    unit = match.group("unit")
    return float(match.group("number")), unit.upper(), unit


def _parse(text: str, units: dict[str, float], what: str, forms: str) -> float:
    parts = _split(text)
    if parts is None:
        raise UnitError(f"{text!r} is not {what}", f"use {forms}")
    number, unit, written = parts
    if unit not in units:
        close = difflib.get_close_matches(unit, [u for u in units if u], n=1, cutoff=0.5)
        guess = f"did you mean {parts_text(number, _spelled(close[0]))}? " if close else ""
        raise UnitError(f"{text!r} has an unknown unit {written!r}", f"{guess}use {forms}")
    value = number * units[unit]
    if value <= 0:
        raise UnitError(f"{text!r} must be more than zero", f"use {forms}")
    return value


def parts_text(number: float, unit: str) -> str:
    return f"{number:g}{unit}"


def parse_params(text: str) -> float:
    """A parameter count: 350M -> 3.5e8. A size in bytes (1.4GB) is refused, pointing to --gradient-bytes."""
    parts = _split(text)
    if parts is not None and parts[1] in ("GB", "MB", "KB", "TB", "GIB", "MIB"):
        raise UnitError(f"{text!r} is a size in bytes, not a parameter count", f"use --gradient-bytes {text}")
    return _parse(text, PARAM_UNITS, "a parameter count", PARAMS_FORMS)


def parse_bytes(text: str) -> float:
    """A size: 1.4GB -> 1.4e9 bytes, 8GiB -> 8·2**30."""
    return _parse(text, BYTE_UNITS, "a size", BYTES_FORMS)


def parse_duration_s(text: str) -> float:
    """A short duration in seconds: 120ms -> 0.12. A bare number is refused: its unit would be a guess."""
    parts = _split(text)
    if parts is not None and parts[1] == "":
        number = parts[0]
        raise UnitError(
            f"{text!r} has no unit", f"write {parts_text(number, 'ms')} or {parts_text(number, 's')}"
        )
    return _parse(text, DURATION_UNITS, "a duration", DURATION_FORMS)


FRACTION_FORMS = "a share like 20% or 0.2, at least 0 and below 100%"


def parse_fraction(text: str) -> float:
    """A share of something: 20% -> 0.2, 0.2 -> 0.2; from 0 up to (not including) 1."""
    raw = text.strip()
    percent = raw.endswith("%")
    match = _NUMBER.match(raw.removesuffix("%").strip())
    if match is None or match.group("unit"):
        raise UnitError(f"{text!r} is not a share", f"use {FRACTION_FORMS}")
    value = float(match.group("number")) / (100 if percent else 1)
    if value >= 1:
        raise UnitError(f"{text!r} leaves nothing", f"use {FRACTION_FORMS}")
    return value


def grad_bytes_per_param(dtype: str) -> int:
    key = dtype.strip().lower()
    if key not in GRAD_DTYPES:
        close = difflib.get_close_matches(key, list(GRAD_DTYPES), n=1, cutoff=0.5)
        guess = f"did you mean {close[0]}? " if close else ""
        raise UnitError(f"{dtype!r} is not a gradient dtype", f"{guess}use one of {', '.join(GRAD_DTYPES)}")
    return GRAD_DTYPES[key]


def format_count(value: float) -> str:
    """350000000 -> '350M', 1.3e9 -> '1.3B'."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def format_bytes(value: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def format_seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    return f"{value * 1e6:.3g} us"
