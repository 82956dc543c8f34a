"""This app's jobs: the worker imports every module here (`make:job NAME --app APP` adds one)."""
