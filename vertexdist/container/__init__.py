"""Container images, and only their building: the deterministic build context and its hash, ignore rules,
the Cloud Build request, the registry check, and the Cloud Build / docker build edges (issue 6). Running
replicas from an image (on the host or as containers) is the local backend's (`vertexdist.local`).

Public entry points (import them from their modules; this package imports nothing heavy):
- `vertexdist.container.ensure.plan_build(template)` / `ensure_image(template, ...)`: what `submit` calls.
- `python -m vertexdist.container tag CONTEXT`: the content tag, with the standard library only (used by
  `cloudbuild.yaml` on a bare Python image).
"""
