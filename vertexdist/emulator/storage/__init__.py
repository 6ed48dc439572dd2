"""The emulated Cloud Storage: the JSON API (`http`, `body`, `fields`) over the on-disk `store`, served by
`server`; `mirror` keeps it one with the jobs' `/gcs` folder, and `output_sync` publishes a job's outputs.
"""
