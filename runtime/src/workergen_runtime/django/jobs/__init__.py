"""Jobs of the app "workergen_runtime.django", found like every installed app's `<app>.jobs`."""
