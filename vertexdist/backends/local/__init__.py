"""The local backend: a template's job on this machine, behind the same interface as the Vertex backend.

- `backend`: `LocalBackend` (the interface; a run folder per job).
- `prepare`: a template made ready to run here, template jobs and tuning trials alike (`prepare_run`:
  the job id, run folder, gs:// namespace and replica context; `prepare_request`), and `LocalOptions`.
- `tuning`: a tuning template's study, its trials run as local jobs by `trials` (`LocalTrialLauncher`).
- `logs`: a job's replica log files as pages of log lines; `resume`: continuing an earlier run's folder.

The replicas themselves run on the local runtime (`vertexdist.local`: environment, plan, ports, runner,
watchdog, containers), which the emulator runs its jobs on too.
"""

from vertexdist.backends.local.backend import LocalBackend, UnknownLocalJob
from vertexdist.backends.local.prepare import LocalOptions

__all__ = ["LocalBackend", "LocalOptions", "UnknownLocalJob"]
