"""The pre-training job fixtures (job_data, job_args) of tests/pretrain/conftest.py, loaded
under the module name tests/reliability uses, so the folders share one copy."""

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "pretrain" / "conftest.py"
_NAME = "pretrain_job_conftest"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_NAME, _PATH)
    sys.modules[_NAME] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_NAME])

job_data = sys.modules[_NAME].job_data
job_args = sys.modules[_NAME].job_args
