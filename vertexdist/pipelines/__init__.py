"""A job template as a step of a Kubeflow Pipelines (KFP v2) pipeline: `training_step(TEMPLATE, ...)`.

Needs the `pipelines` extra (kfp). See docs/guide/pipelines.md.
"""

from vertexdist.pipelines.step import (
    GCPC_IMAGE,
    custom_job_payload,
    model_upload_step,
    step_payload,
    training_step,
)

__all__ = ["GCPC_IMAGE", "custom_job_payload", "model_upload_step", "step_payload", "training_step"]
