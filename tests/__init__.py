"""wireup test code: unit tests, integration tests and the local testbed."""
