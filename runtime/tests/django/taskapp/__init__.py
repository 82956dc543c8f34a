"""A Django app whose `@task` functions the in-process tests of the task backend enqueue."""
