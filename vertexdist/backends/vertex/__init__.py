"""The Vertex backend (Vertex AI, or the emulator that speaks its REST API), split by job:
`request` (the dry run), `clients` (GAPIC and storage clients, injectable), `retry` (the call policy),
`upload` (the sdist into the staging bucket), `status` (resources as JobStatus), `logs` (where logs are),
and `backend` (the Backend itself). Importing this package loads no Google Cloud library.
"""

from vertexdist.backends.vertex.backend import VertexBackend
from vertexdist.backends.vertex.request import Submission
from vertexdist.backends.vertex.retry import RetryPolicy
from vertexdist.backends.vertex.status import mask_text

__all__ = ["RetryPolicy", "Submission", "VertexBackend", "mask_text"]
