"""A trial script written for Vertex, unchanged under local-run, the emulator and the SDK: it takes its
hyperparameters as `--name=value` arguments and reports with cloudml-hypertune (`import hypertune`).

score = 1 - (x - 0.3)^2 - (units - 4)^2 / 100 (+ 0.05 with --opt=adam), approached over `--steps` steps of
`--sleep` seconds each. `--fail-even` makes trials with an even `units` exit 1 before reporting anything.
`--pid-dir` records the process id (tests check that none outlives its job). The final score is written to
`score.txt` in the trial's model folder, through /gcs as on Vertex.
"""

import argparse
import os
import sys
import time

import hypertune

parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float, default=0.0)
parser.add_argument("--units", type=int, default=1)
parser.add_argument("--opt", default="sgd")
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--fail-even", action="store_true")
parser.add_argument("--pid-dir", default="")
args, _unknown = parser.parse_known_args()

trial = os.environ.get("CLOUD_ML_TRIAL_ID", "")
print("trial", trial, "args", sys.argv[1:], flush=True)
print("model dir", os.environ.get("AIP_MODEL_DIR"), flush=True)
if args.pid_dir:
    with open(os.path.join(args.pid_dir, f"{os.getpid()}.pid"), "w") as handle:
        handle.write(trial)
if args.fail_even and args.units % 2 == 0:
    sys.exit(f"failing on purpose for units={args.units}")
final = 1.0 - (args.x - 0.3) ** 2 - (args.units - 4) ** 2 / 100 + (0.05 if args.opt == "adam" else 0.0)
reporter = hypertune.HyperTune()
for step in range(1, args.steps + 1):
    reporter.report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="score", metric_value=final - 0.1 / step, global_step=step
    )
    time.sleep(args.sleep)
model_dir = os.environ.get("AIP_MODEL_DIR", "")
if model_dir.startswith("gs://"):
    folder = model_dir.replace("gs://", "/gcs/")  # Vertex mounts every bucket at /gcs (Cloud Storage FUSE)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "score.txt"), "w") as handle:
        handle.write(str(final))
