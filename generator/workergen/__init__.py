"""workergen: generate production-grade Celery worker projects.

Library entry points: `workergen.template_source.locate_template` (where the
template is), `workergen.questions.load_questionnaire` (its questions),
`workergen.answers` (defaults, validation, collection) and
`workergen.render.render_project` (render with copier, all or nothing).
"""

__version__ = "0.1.0"
"""The release of workergen; the package's version is read from here when it is built."""
