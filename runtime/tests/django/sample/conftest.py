pytest_plugins = ["workergen_runtime.django.testing"]
