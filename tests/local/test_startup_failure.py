"""A replica that failed while its script was importing (issue 42, item 10): the exception line and the
import's own file and line, read from its log even under torchrun's summary box. Pure."""

from __future__ import annotations

from pathlib import Path

from vertexdist.local.startup_failure import startup_failure
from vertexdist.shipped.vertexdist_launcher import health

TORCHRUN_LOG = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "<frozen runpy>", line 198, in _run_module_as_main
[rank0]:   File "/venv/lib/site-packages/aiplatform_custom_trainer_script/task.py", line 4, in <module>
[rank0]:     import nosuchmod
[rank0]: ModuleNotFoundError: No module named 'nosuchmod'
E1206 23:01:02.123000 123 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1)
Traceback (most recent call last):
  File "/venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
task.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-06_23:01:02
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 123)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_the_import_error_under_torchruns_box_is_found_with_its_line() -> None:
    found = startup_failure(TORCHRUN_LOG.splitlines())
    assert found is not None
    assert found.exception == "ModuleNotFoundError: No module named 'nosuchmod'"
    assert found.text() == "ModuleNotFoundError: No module named 'nosuchmod' (task.py, line 4)"


def test_the_packaged_script_is_named_by_the_users_file(tmp_path: Path) -> None:
    package = tmp_path / health.SCRIPT_PACKAGE
    package.mkdir()
    (package / health.SOURCE_FILE).write_text("train.py")
    log = [
        "Traceback (most recent call last):",
        f'  File "{package}/task.py", line 3, in <module>',
        "    from mylib import thing",
        "ImportError: cannot import name 'thing' from 'mylib' (/x/mylib.py)",
    ]
    found = startup_failure(log)
    assert found is not None and found.text().endswith("(train.py, line 3)")


def test_a_syntax_error_is_one_and_a_failure_in_training_is_not() -> None:
    syntax = ['  File "/job/train.py", line 7', "    def f(:", "          ^", "SyntaxError: invalid syntax"]
    found = startup_failure(syntax)
    assert found is not None and found.text() == "SyntaxError: invalid syntax (train.py, line 7)"
    training = [
        "Traceback (most recent call last):",
        '  File "/job/train.py", line 40, in <module>',
        "    loss.backward()",
        "RuntimeError: Connection closed by peer",
    ]
    assert startup_failure(training) is None
    assert startup_failure([]) is None
