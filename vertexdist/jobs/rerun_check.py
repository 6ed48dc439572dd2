"""What `rerun` may take from a run record, checked against the job itself. Pure.

A run record sits in the bucket the job writes, so the job (or anyone who can write that bucket) can change
it. The job's own resource, as Vertex returns it, is what was sent: its spec, labels and display name, and
its `vertexdist-request` label, a hash of the whole rendered request. A record is used only where it agrees
with all of them; secret env values, kept masked in the record and shown masked by `describe`, come from
where the user keeps them; a package is put back only at a URI the job's spec names, and only with the
SHA-256 that URI's content-addressed folder names.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

from vertexdist.errors import VertexdistError
from vertexdist.render.custom_job import JOB_FOLDER
from vertexdist.render.health_mark import without_mark
from vertexdist.render.request_hash import REQUEST_HASH_LABEL, REQUEST_RESOURCES, request_hash
from vertexdist.render.secrets import MASK, mask_secrets

_SHOWN = 12  # differences listed at most


class RecordMismatch(VertexdistError):
    """The run record is not what the job was sent: rerun refuses (exit 1)."""


def _leaves(obj: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        for key in sorted(obj, key=str):
            yield from _leaves(obj[key], f"{path}.{key}" if path else str(key))
        if not obj:
            yield path, {}
    elif isinstance(obj, list):
        for index, item in enumerate(obj):
            yield from _leaves(item, f"{path}[{index}]")
        if not obj:
            yield path, []
    else:
        yield path, obj


def differences(recorded: Any, actual: Any) -> list[str]:
    """`path: record says X, the job has Y` for each leaf where two JSON-like values differ (pure)."""
    mine, theirs = dict(_leaves(recorded)), dict(_leaves(actual))
    found = []
    for path in sorted(set(mine) | set(theirs)):
        if path not in theirs:
            found.append(f"{path}: the record says {_short(mine[path])}, the job has no such field")
        elif path not in mine:
            found.append(f"{path}: the record has no such field, the job has {_short(theirs[path])}")
        elif mine[path] != theirs[path]:
            found.append(f"{path}: the record says {_short(mine[path])}, the job has {_short(theirs[path])}")
    return found


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _resource(request: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(request, dict):
        for key in REQUEST_RESOURCES:
            if isinstance(request.get(key), dict):
                return key, request[key]
    raise RecordMismatch(
        "the run record's request is not a training pipeline or tuning job request",
        hint="the record's folder was changed; submit the template again",
    )


def _spec_of(resource: dict[str, Any]) -> Any:
    return resource.get("trainingTaskInputs", resource.get("trialJobSpec"))


def _refuse(name: str, found: list[str], why: str) -> RecordMismatch:
    shown = "\n  ".join(found[:_SHOWN])
    more = f"\n  (and {len(found) - _SHOWN} more)" if len(found) > _SHOWN else ""
    return RecordMismatch(
        f"the run record of {name} is not what the job was sent ({why}); rerun sends nothing:"
        f"\n  {shown}{more}",
        hint="someone who can write the job's bucket changed the record; submit the template again instead",
    )


def check_against_job(
    record: Any, name: str, *, display_name: str, labels: Mapping[str, str], spec: Any
) -> list[str]:
    """The differences between the record's request and job `name` as Vertex returns it (its display name,
    labels and spec, secret values masked on both sides); empty when they agree."""
    if not isinstance(record, dict):
        return ["the record is not a JSON object"]
    found = []
    if record.get("job") != name:
        found.append(f"job: the record says {_short(record.get('job'))}, the job is {name}")
    _, resource = _resource(record.get("request"))
    if resource.get("displayName") != display_name:
        found.append(
            f"displayName: the record says {_short(resource.get('displayName'))}, the job has "
            f"{_short(display_name)}"
        )
    found += [f"labels.{d}" for d in differences(resource.get("labels") or {}, dict(labels))]
    found += [f"spec.{d}" for d in differences(mask_secrets(_spec_of(resource)), mask_secrets(spec))]
    return found


def verified_request(
    record: Any,
    name: str,
    *,
    display_name: str,
    labels: Mapping[str, str],
    spec: Any,
    secrets: Mapping[str, str],
    secrets_from: str,
) -> dict[str, Any]:
    """The request job `name` was sent, rebuilt from its record only where the record agrees with the job and
    its request-hash label, with its secret env values from `secrets` (the user's); raises RecordMismatch or
    MissingSecrets otherwise."""
    found = check_against_job(record, name, display_name=display_name, labels=labels, spec=spec)
    if found:
        raise _refuse(name, found, "it differs from the job")
    request = fill_secrets(record["request"], secrets, secrets_from)
    expected = labels.get(REQUEST_HASH_LABEL)
    if not expected:
        raise RecordMismatch(
            f"{name} has no {REQUEST_HASH_LABEL} label, so its record cannot be checked; rerun sends nothing",
            hint="jobs submitted by vertexdist carry it; submit the template again instead",
        )
    if expected not in _hashes(request):
        raise _refuse(
            name,
            [
                f"labels.{REQUEST_HASH_LABEL}: the job has {expected}, the record's request (with the secret "
                f"values from {secrets_from}) hashes to {request_hash(_rendered(without_mark(request)))}"
            ],
            "its request does not hash to the job's label: a field, or a secret value, is not the one sent",
        )
    return request


def _rendered(request: dict[str, Any]) -> dict[str, Any]:
    """The request with its job folder put back to the placeholder it was hashed with."""
    rendered = copy.deepcopy(request)
    _, resource = _resource(rendered)
    spec = _spec_of(resource)
    output = (spec or {}).get("baseOutputDirectory") if isinstance(spec, dict) else None
    prefix = output.get("outputUriPrefix") if isinstance(output, dict) else None
    if isinstance(output, dict) and isinstance(prefix, str) and "/" in prefix:
        output["outputUriPrefix"] = f"{prefix.rsplit('/', 1)[0]}/{JOB_FOLDER}"
    return rendered


def _hashes(request: dict[str, Any]) -> set[str]:
    """The hash of the request as sent (a resumed folder is hashed as it is) and with its job folder put back
    to the placeholder (a new folder is filled in after hashing)."""
    bare = without_mark(request)  # the health mark is put in after hashing, as the job folder is
    return {request_hash(bare), request_hash(_rendered(bare))}


class MissingSecrets(VertexdistError):
    """A masked secret env value the user's secrets do not hold (exit 2: the user must supply it)."""

    exit_code = 2


def masked_secret_names(request: Any) -> list[str]:
    """The names of the request's env entries whose value is masked, in order."""
    names: list[str] = []
    _collect_masked(request, names)
    return list(dict.fromkeys(names))


def _collect_masked(obj: Any, names: list[str]) -> None:
    if isinstance(obj, list):
        for item in obj:
            _collect_masked(item, names)
    elif isinstance(obj, dict):
        name = obj.get("name")
        if set(obj) == {"name", "value"} and isinstance(name, str) and obj.get("value") == MASK:
            names.append(name)
        for item in obj.values():
            _collect_masked(item, names)


def fill_secrets(request: Any, secrets: Mapping[str, str], secrets_from: str) -> dict[str, Any]:
    """The request with each masked secret env value from `secrets`; MissingSecrets names those it lacks."""
    missing = [n for n in masked_secret_names(request) if n not in secrets]
    if missing:
        raise MissingSecrets(
            f"the run record keeps {', '.join(missing)} masked, and {secrets_from} "
            f"{'has' if len(missing) == 1 else 'have'} no value for {'it' if len(missing) == 1 else 'them'}; "
            "rerun sends nothing",
            hint="give the values in a --secrets file (NAME: value), the template's env, or your environment",
        )
    return dict(_filled(request, secrets))


def _filled(obj: Any, secrets: Mapping[str, str]) -> Any:
    if isinstance(obj, list):
        return [_filled(item, secrets) for item in obj]
    if not isinstance(obj, dict):
        return obj
    name = obj.get("name")
    if set(obj) == {"name", "value"} and isinstance(name, str) and obj.get("value") == MASK:
        return {"name": name, "value": secrets[name]}
    return {key: _filled(value, secrets) for key, value in obj.items()}


def package_to_restore(record: Any, spec: Any) -> tuple[str, str] | None:
    """(URI, SHA-256) of the package a rerun may put back: only a URI the job's own spec names, whose
    content-addressed folder (`.../packages/<sha256[:16]>/`) names the record's SHA-256; None when the
    record keeps no package. Raises RecordMismatch otherwise."""
    package = record.get("package") if isinstance(record, dict) else None
    if not package:
        return None
    uri, sha = package.get("uri"), package.get("sha256")
    named = {u for _, u in _leaves(spec) if isinstance(u, str) and u.startswith("gs://")}
    job = record.get("job")
    if not isinstance(uri, str) or uri not in named:
        raise _refuse(
            str(job), [f"package.uri: {_short(uri)} is not a package URI the job's spec names"], "its package"
        )
    folder = uri.rsplit("/", 2)[-2] if uri.count("/") >= 4 else ""
    if not isinstance(sha, str) or len(folder) != 16 or not sha.startswith(folder):
        raise _refuse(
            str(job), [f"package.sha256: {_short(sha)} is not the digest {uri} is named by"], "its package"
        )
    return uri, sha
