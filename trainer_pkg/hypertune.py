"""The tuning metric, reported the way the `cloudml-hypertune` package does it (standard library only).

A Vertex tuning trial gets `CLOUD_ML_HP_METRIC_FILE` and `CLOUD_ML_TRIAL_ID`; each report rewrites that file
with the last 100 reports, one JSON object a line: `{"checkpoint_path": "", "global_step": "3",
"timestamp": 1700000000.0, "trial": "2", "<tag>": "0.91"}` (values as text, keys sorted), which is what the
service reads for the trial's measurements. The file is replaced atomically so a reader never sees half of it.
"""

from __future__ import annotations

import collections
import json
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

METRIC_FILE_VARIABLE = "CLOUD_ML_HP_METRIC_FILE"
TRIAL_VARIABLE = "CLOUD_ML_TRIAL_ID"
DEFAULT_METRIC_FILE = "/tmp/hypertune/output.metrics"  # cloudml-hypertune's default
MAX_REPORTS = 100  # cloudml-hypertune keeps the last 100


class MetricReporter:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.path = Path(env.get(METRIC_FILE_VARIABLE) or DEFAULT_METRIC_FILE)
        self.trial = str(env.get(TRIAL_VARIABLE, "0"))
        self._reports: collections.deque[dict[str, object]] = collections.deque(maxlen=MAX_REPORTS)

    def report(self, tag: str, value: float, global_step: int) -> None:
        self._reports.append(
            {
                "timestamp": time.time(),
                "trial": self.trial,
                tag: str(float(value)),
                "global_step": str(int(global_step)),
                "checkpoint_path": "",
            }
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".hypertune-")
        with os.fdopen(fd, "w") as handle:
            for entry in self._reports:
                handle.write(json.dumps(entry, sort_keys=True) + "\n")
        os.replace(tmp, self.path)
