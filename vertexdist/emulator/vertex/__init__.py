"""The emulated Vertex AI services, a module (or a service module and its REST routes' module) each.

`jobs` (CustomJob and TrainingPipeline), `tuning` / `tuning_api` (HyperparameterTuningJob), `models` /
`models_api` (Model Registry), `metadata`, `tensorboard` and `experiments` over `experiment_store` (Vertex AI
Experiments), `persistent_resources`, and what they share: `operations` (long-running operations), `deletion`,
`validation`. A new Vertex service gets its own module here (e.g. `pipelines`), its routes in the shared table
of `vertexdist.emulator.routes`.
"""
