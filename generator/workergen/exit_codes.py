"""Exit codes of `workergen`, for scripts and CI (documented in docs/updating.md).

0 is success and 1 an error the command explains; the others say something
a script may want to act on, and never mean that the command failed to run.
"""

OK = 0
ERROR = 1
UPDATE_AVAILABLE = 10
"""`workergen check`: a newer template release exists."""
CONFLICTS = 11
"""`workergen update`: files were left with conflict markers or `.rej` files, or an
edit was kept from a file the new template version no longer ships."""
