"""Each `recovery.fallback` entry, merged over the template, must itself be a valid job.

The merged template is checked with the template's own rules about the fields a fallback can change (the
machine rules, the region, the scheduling strategy, the staging bucket); each error is placed on the entry's
field that caused it, or on the entry when the clash is with a field the template kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from vertexdist.spec.findings import Finding
from vertexdist.spec.recovery import merged_template

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate


def _field_of(path: str) -> str:
    return path.split(".")[0].split("[")[0]


Rule = Callable[["JobTemplate"], Iterator[Finding]]


def fallbacks_are_valid_jobs(checks: Sequence[Rule]) -> Rule:
    """The rule that each fallback, merged over the template, passes `checks`: the template's own rules about
    the fields a fallback can change (spec.rules passes them in; this module cannot import it, which imports
    this one)."""

    def rule(t: JobTemplate) -> Iterator[Finding]:
        return _fallbacks_pass(t, checks)

    return rule


def _fallbacks_pass(t: JobTemplate, checks: Sequence[Rule]) -> Iterator[Finding]:
    if t.recovery is None:
        return
    baseline = {(f.path, f.message) for check in checks for f in check(t)}
    for index, entry in enumerate(t.recovery.fallback):
        changed = entry.changes()
        merged = merged_template(t, index)
        for check in checks:
            for finding in check(merged):
                if finding.severity != "error" or (finding.path, finding.message) in baseline:
                    continue
                name = _field_of(finding.path)
                where = f"recovery.fallback[{index}]"
                if name in changed:
                    yield Finding(f"{where}.{name}", finding.message, finding.hint)
                elif set(changed) & {"location", "machine_type", "accelerator_type", "accelerator_count"}:
                    yield Finding(
                        where,
                        f"fallback {index}, merged over the template: {finding.path}: {finding.message}",
                        finding.hint or f"set {name} in this entry too",
                    )


def strategy_needs_recovery_to_recover(t: JobTemplate) -> Iterator[Finding]:
    if t.recovery is not None and t.recovery.max_preemptions == 0 and t.recovery.fallback:
        yield Finding(
            "recovery.fallback",
            "max_preemptions is 0, so no fallback is ever tried (each one is a new attempt)",
            "raise max_preemptions, or remove the fallback list",
            "warning",
        )
