"""Secret-looking values in a request (env entries named SECRET, TOKEN, PASSWORD, KEY, CREDENTIAL), masked
for every printout, and their values, to mask them in log text too. Pure.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "********"
_SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|KEY|CREDENTIAL", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def secret_values(spec: dict[str, Any]) -> tuple[str, ...]:
    """The values of a CustomJobSpec's secret-looking env entries, to mask them in text (logs)."""
    values = []
    for pool in spec.get("workerPoolSpecs") or []:
        code = (pool or {}).get("pythonPackageSpec") or (pool or {}).get("containerSpec") or {}
        for entry in code.get("env") or []:
            if is_secret_name(str(entry.get("name", ""))) and entry.get("value"):
                values.append(str(entry["value"]))
    return tuple(dict.fromkeys(values))


def mask_text(text: str, secrets: tuple[str, ...]) -> str:
    """Text with every secret value replaced (longest first, so overlapping values stay hidden)."""
    for value in sorted(secrets, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def secret_env(obj: Any) -> dict[str, str]:
    """Every secret-looking `{name, value}` env entry anywhere in `obj` (a request of any kind), by name."""
    found: dict[str, str] = {}
    if isinstance(obj, list):
        for item in obj:
            found.update(secret_env(item))
    elif isinstance(obj, dict):
        name, value = obj.get("name"), obj.get("value")
        if set(obj) == {"name", "value"} and isinstance(name, str) and is_secret_name(name) and value:
            found[name] = str(value)
        for item in obj.values():
            found.update(secret_env(item))
    return found


def restore_secrets(obj: Any, values: dict[str, str]) -> Any:
    """A copy of `obj` whose masked secret env entries get their values back from `values` (by name)."""
    if isinstance(obj, list):
        return [restore_secrets(item, values) for item in obj]
    if not isinstance(obj, dict):
        return obj
    if set(obj) == {"name", "value"} and obj["value"] == MASK and obj["name"] in values:
        return {"name": obj["name"], "value": values[obj["name"]]}
    return {key: restore_secrets(value, values) for key, value in obj.items()}


def mask_values(obj: Any, secrets: tuple[str, ...]) -> Any:
    """A copy of `obj` (JSON-like) with every secret value masked in each of its strings (`mask_text`)."""
    if isinstance(obj, str):
        return mask_text(obj, secrets)
    if isinstance(obj, list):
        return [mask_values(item, secrets) for item in obj]
    if isinstance(obj, dict):
        return {key: mask_values(value, secrets) for key, value in obj.items()}
    return obj


def mask_secrets(obj: Any) -> Any:
    """A copy of `obj` with secret-looking values masked, for printing.

    Masks `{name, value}` env entries whose name looks secret (SECRET, TOKEN, PASSWORD, KEY, CREDENTIAL),
    and string values under UPPER_CASE keys that look secret (env and build-arg mappings).
    """
    if isinstance(obj, list):
        return [mask_secrets(item) for item in obj]
    if not isinstance(obj, dict):
        return obj
    if set(obj) == {"name", "value"} and isinstance(obj["name"], str) and is_secret_name(obj["name"]):
        return {"name": obj["name"], "value": MASK}
    masked: dict[Any, Any] = {}
    for key, value in obj.items():
        if isinstance(key, str) and key.isupper() and is_secret_name(key) and isinstance(value, str):
            masked[key] = MASK
        else:
            masked[key] = mask_secrets(value)
    return masked
