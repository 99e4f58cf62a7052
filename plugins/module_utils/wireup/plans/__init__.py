"""One plan module per role, named after the role; preflight.py aggregates their rules."""
