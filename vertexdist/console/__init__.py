"""`vertexdist ui`: a console for jobs in the browser — the job list, a job's replicas, timeline, live logs
and metric charts, a tuning job's trials — read through the backends, never from job files of its own.

`jobs` is the read model the pages show (one `Console` over the local runs and one Vertex or emulator
target), `refs` the jobs' addresses in URLs (anything else is a 404), `metrics` the TensorBoard scalars of
a job (tensorboard's own reader), `app` the Starlette application and `serve` its uvicorn server. The web
stack is the `[ui]` extra; nothing here is imported by the rest of vertexdist.
"""
