"""Reports and metrics assembled from records through the registry; make run's summary."""
