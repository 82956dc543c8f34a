"""One module per `workergen` command; `workergen.cli` wires them."""
