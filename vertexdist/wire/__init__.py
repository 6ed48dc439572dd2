"""The one reader of the Vertex wire format: proto-JSON normalisation, enum tables, the typed job spec.

Used by the Vertex backend (reading back what the service returns), the emulator (reading requests) and the
local backend (running them). Pure: no Google Cloud library, no torch, no rich.
"""

from vertexdist.wire.job_spec import JobSpec, JobSpecError, PoolSpec, parse_job_spec
from vertexdist.wire.proto_json import custom_job_spec_from_task_inputs, normalize_job_spec

__all__ = [
    "JobSpec",
    "JobSpecError",
    "PoolSpec",
    "custom_job_spec_from_task_inputs",
    "normalize_job_spec",
    "parse_job_spec",
]
