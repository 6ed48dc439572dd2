"""Names the templates and the requests share: the SDK's package of a single script, the bundled trainer,
and the rules for labels and display names."""

from __future__ import annotations

SCRIPT_PACKAGE = "aiplatform_custom_trainer_script"  # the SDK's package name for a single script
BUNDLED_TRAINER = "trainer_pkg"

# Labels and display names, one rule for the templates (`spec.rules`) and the emulator's API
# (`emulator.vertex.validation`). GCP's label rules (https://cloud.google.com/resource-manager/docs/labels-overview,
# "Requirements for labels", which Vertex's `labels` fields point to): at most 64 labels; a key is 1-63
# characters, starting with a lowercase letter or an international character; keys and values (0-63) hold
# only lowercase letters, digits, underscores and dashes, international characters allowed. Vertex's own
# comment on the field says 64 characters; we keep GCP's stricter 63. A display name is at most 128
# characters of any UTF-8 (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.customJobs).
MAX_LABELS = 64
MAX_LABEL_CHARS = 63
MAX_DISPLAY_NAME_CHARS = 128


def _letter(char: str) -> bool:
    """A lowercase letter, or a letter with no case (an international character such as 日)."""
    return char.isalpha() and char == char.lower() and not char.istitle()


def _label_char(char: str) -> bool:
    return char in "_-" or char.isdecimal() or _letter(char)


def label_key_problem(key: str) -> str | None:
    """Why `key` cannot be a label key (None when it can)."""
    if not key:
        return "a label key must not be empty"
    if len(key) > MAX_LABEL_CHARS:
        return f"label key {key[:20]!r}... is {len(key)} characters long; at most {MAX_LABEL_CHARS}"
    if not _letter(key[0]):
        return f"label key {key!r} must start with a lowercase letter"
    bad = next((c for c in key if not _label_char(c)), None)
    if bad is not None:
        return f"label key {key!r} holds {bad!r}; keys hold lowercase letters, digits, _ and -"
    return None


def label_value_problem(value: str) -> str | None:
    """Why `value` cannot be a label value (None when it can)."""
    if len(value) > MAX_LABEL_CHARS:
        return f"label value {value[:20]!r}... is {len(value)} characters long; at most {MAX_LABEL_CHARS}"
    bad = next((c for c in value if not _label_char(c)), None)
    if bad is not None:
        return f"label value {value!r} holds {bad!r}; values hold lowercase letters, digits, _ and -"
    return None


def labels_count_problem(count: int) -> str | None:
    return f"{count} labels; at most {MAX_LABELS}" if count > MAX_LABELS else None


def display_name_problem(name: str) -> str | None:
    """Why `name` cannot be a display name (None when it can)."""
    if not name:
        return "the display name must not be empty"
    if len(name) > MAX_DISPLAY_NAME_CHARS:
        return f"the display name is {len(name)} characters long; at most {MAX_DISPLAY_NAME_CHARS}"
    return None
