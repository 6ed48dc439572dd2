"""vertexdist: one YAML template to a distributed PyTorch job on Vertex AI, and the same job locally first."""

__version__ = "0.1.0"
