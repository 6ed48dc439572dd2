"""Container builds: the deterministic build context and its hash, ignore rules, the Cloud Build request,
and the Cloud Build / docker CLI edges (issue 6).

Public entry points (import them from their modules; this package imports nothing heavy):
- `vertexdist.container.ensure.plan_build(template)` / `ensure_image(template, ...)`: what `submit` calls.
- `vertexdist.container.host.host_job_spec(spec, image_uri=..., context=..., dockerfile=...)`: what
  `local-run` calls to run the built image's pools on the host without Docker (`host_command_for_build`
  for one process); `vertexdist.container.docker.docker_run_argv` for `local-run --docker`.
- `python -m vertexdist.container tag CONTEXT`: the content tag, with the standard library only (used by
  `cloudbuild.yaml` on a bare Python image).
"""
