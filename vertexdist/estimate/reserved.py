"""What a persistent resource costs while it waits: a template with `persistent_resource_id:` runs on
machines reserved beforehand, and Vertex bills those machines at on-demand rates for as long as the resource
exists, running a job or idle (https://cloud.google.com/vertex-ai/pricing, "Persistent resources"). Offline
we know the machines the template needs, so that is the least such a resource costs per hour (what
`vertexdist pool create --from` this template reserves).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vertexdist.estimate.costs import CostEstimate

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate


@dataclass(frozen=True)
class ReservedCost:
    resource_id: str
    idle_per_hour: float | None  # on demand; None where a machine is not in the price table

    def line(self) -> str:
        money = "no price" if self.idle_per_hour is None else f"${self.idle_per_hour:,.2f}"
        return (
            f"persistent resource {self.resource_id}: its machines cost at least {money} per hour while it"
            " exists, idle or busy (on demand); jobs on it are billed nothing more for them"
        )


def reserved_cost(t: JobTemplate, costs: CostEstimate) -> ReservedCost | None:
    """The template's persistent resource and its hourly cost while idle; None when it names none."""
    if t.persistent_resource_id is None:
        return None
    return ReservedCost(t.persistent_resource_id, costs.on_demand_per_hour)
