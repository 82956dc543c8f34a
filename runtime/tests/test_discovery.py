"""Every job and cron module of the project is found and imports, none listed by hand."""

import importlib

import pytest
from bound import PACKAGE

from workergen_runtime.discovery import job_modules


def test_the_projects_job_and_cron_modules_are_found() -> None:
    assert job_modules() == [f"{PACKAGE}.jobs.hello"]


@pytest.mark.parametrize("module", job_modules())
def test_the_module_imports(module: str) -> None:
    importlib.import_module(module)
