"""A tuning trial for the console's tests: reports `score` at each of `--steps` steps with cloudml-hypertune.

score = 1 - (x - 0.3)^2 - (units - 4)^2 / 100, approached step by step.
"""

import argparse

import hypertune

parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float, default=0.0)
parser.add_argument("--units", type=int, default=1)
parser.add_argument("--steps", type=int, default=3)
args, _unknown = parser.parse_known_args()

best = 1 - (args.x - 0.3) ** 2 - (args.units - 4) ** 2 / 100
reporter = hypertune.HyperTune()
for step in range(1, args.steps + 1):
    value = best - 0.1 / step
    print(f"step {step} score {value:.4f}", flush=True)
    reporter.report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="score", metric_value=value, global_step=step
    )
