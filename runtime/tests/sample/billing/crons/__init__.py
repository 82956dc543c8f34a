"""Your crons: every module here (and in sub-packages) is discovered by the scheduler."""
