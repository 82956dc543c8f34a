"""Shared test set-up: tests never read the developer's .env."""

import pytest


@pytest.fixture(autouse=True)
def _no_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
