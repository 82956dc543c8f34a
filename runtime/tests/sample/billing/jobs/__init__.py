"""Your jobs: every module here (and in sub-packages) is discovered by the worker."""
