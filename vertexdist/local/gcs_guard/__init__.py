"""A folder for PYTHONPATH where `/gcs` cannot be mapped: its `sitecustomize` says why (see gcs_namespace)."""
