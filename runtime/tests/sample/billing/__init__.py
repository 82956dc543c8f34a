"Background workers for billing"

from workergen_runtime.project import bind

from . import project

bind(project)
