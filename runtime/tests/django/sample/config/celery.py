import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
from workergen_runtime.django import setup

from . import workers

app = setup(workers)
