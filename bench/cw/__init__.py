"""cronwheel's side of the benchmark: the adapter, the handler module, the serve entry."""
