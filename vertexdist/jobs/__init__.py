"""The service layer between the CLI and the backends: what a command does, as typed calls.

- `jobs.submit`: a template to Vertex or an emulator (target, in-process emulator, duplicate check, upload,
  schedule, follow): `open_submission(SubmitRequest(...), SubmitHooks(...))`.
- `jobs.local_run`: a template on this machine (plan, start, follow, summary): `start_local`,
  `follow_local`, `start_local_tuning`, `plan_local`.
- `jobs.find`: the backend that holds a job (a Vertex name or id, a local run's id or folder), and the
  output folder of an earlier job that a new one resumes.

The CLI (`vertexdist.cli`) adds flags and printing; a recovery controller or a web console calls the same
functions. Nothing here prints or writes `os.environ`: what is shown goes through the caller's hooks and
views. Backends are reached through `vertexdist.backends.create_backend`.
"""
