"""The controller's results store and its one newest-first query."""
