"""Hyperparameter tuning on this machine: the study (search, early stopping, failure rule) and the loop that
runs its trials. Shared by `local-run` on a tuning template and the emulator's HyperparameterTuningJobs.

Pure parts: `space` (values, grids, trial arguments), `search` (grid, random, bayesian), `stopping` (median,
decay curve), `hypertune` (reading cloudml-hypertune reports), `study` (the trials and the job's outcome),
`trials` (a trial's CustomJobSpec). Edges: `driver` (the loop, over any trial launcher) and
`vertexdist.backends.local.trials` (trials as local jobs). Vertex itself uses Vizier; this is a local
stand-in for it.
"""
