"""The template's `recovery:` section: what `submit --managed` does when an attempt ends without success.

Pure: no google, torch or rich. The fields are checked by pydantic; the fallback entries, merged over the
template, are checked by the template's own machine, region and strategy rules (`recovery_rules`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

# The template fields a fallback entry may change, in the order the docs list them.
FALLBACK_FIELDS: tuple[str, ...] = (
    "location",
    "machine_type",
    "accelerator_type",
    "accelerator_count",
    "replica_count",
    "scheduling_strategy",
    "staging_bucket",
)
DEFAULT_MAX_PREEMPTIONS = 10
DEFAULT_MAX_HANGS = 2


class FallbackSpec(BaseModel):
    """One place to try next when the current one has no capacity: the template fields it changes."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    location: str | None = Field(default=None, description="Vertex AI region of this fallback.")
    machine_type: str | None = Field(default=None, description="Machine type of every training node.")
    accelerator_type: str | None = Field(default=None, description="GPU type per node.")
    accelerator_count: int | None = Field(default=None, ge=0, description="GPUs per node.")
    replica_count: int | None = Field(default=None, ge=1, description="Training nodes.")
    scheduling_strategy: str | None = Field(default=None, description="STANDARD, SPOT or FLEX_START.")
    staging_bucket: str | None = Field(
        default=None, description="gs:// staging folder in the fallback's region."
    )

    @model_validator(mode="after")
    def _sets_something(self) -> FallbackSpec:
        if not self.changes():
            raise ValueError("a fallback entry must change at least one of " + ", ".join(FALLBACK_FIELDS))
        return self

    def changes(self) -> dict[str, Any]:
        """The template fields this entry sets (unset ones keep the template's value)."""
        return {name: getattr(self, name) for name in FALLBACK_FIELDS if getattr(self, name) is not None}


class RecoverySpec(BaseModel):
    """How many new attempts `submit --managed` may make, and where."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    max_preemptions: int = Field(
        default=DEFAULT_MAX_PREEMPTIONS,
        ge=0,
        description="New attempts after a preemption, a stockout or a quota refusal.",
    )
    max_restarts_on_errors: int = Field(
        default=0, ge=0, description="New attempts after the job's own code failed."
    )
    max_hangs: int = Field(
        default=DEFAULT_MAX_HANGS,
        ge=0,
        description="New attempts, from the checkpoints, after an attempt was called hung (health:).",
    )
    fallback: list[FallbackSpec] = Field(
        default_factory=list,
        description="Places tried in order when the current one has no capacity (stockout, quota).",
    )


def merged_template(t: JobTemplate, index: int) -> JobTemplate:
    """The template with fallback `index` merged over it: the job an attempt in that place submits.

    Index -1 is the template itself. The boot disk follows the new machine's default unless the template
    set one, as loading the merged file would.
    """
    if index < 0 or t.recovery is None:
        return t
    changes = t.recovery.fallback[index].changes()
    if "machine_type" in changes and "boot_disk_type" not in t.model_fields_set:
        from vertexdist.spec.catalog import machine

        row = machine(changes["machine_type"])
        if row is not None:
            changes["boot_disk_type"] = row.default_boot_disk_type
    return t.model_copy(update=changes)


def places(t: JobTemplate) -> list[JobTemplate]:
    """The template, then each fallback merged over it, in the order the controller tries them."""
    count = 0 if t.recovery is None else len(t.recovery.fallback)
    return [merged_template(t, i) for i in range(-1, count)]
