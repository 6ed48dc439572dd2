"""The bundled DDP trainer shipped to Vertex AI. Depends on torch and the standard library only."""
