"""The `vertexdist` command line: one typer command per file, one error boundary in `main`."""
