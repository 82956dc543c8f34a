"""Every job and cron module imports: a broken one fails here, before a worker meets it."""

import importlib

import pytest
from workergen_runtime.discovery import job_modules


@pytest.mark.parametrize("module", job_modules())
def test_the_module_imports(module: str) -> None:
    importlib.import_module(module)
