"""Managed jobs (`submit --managed`): a controller that starts a new attempt when capacity is taken away.

- `reasons`: an ended attempt (or a refused create) -> its `Reason` (docs/reference/vertex.md §8.6).
- `policy`: a reason and the attempts so far -> the next place to try, or stop. Pure.
- `store`: the durable state, SQLite under `.vertexdist/`; each transition is written before it is acted on.
- `attempts`: what the controller asks of a backend (create with a label, find by label, read, cancel), for
  the Vertex backend (Vertex or the emulator) and the local backend.
- `controller`: the loop joining them; `vertexdist managed resume` runs it again after a kill.
"""
