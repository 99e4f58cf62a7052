"""One module per capability and the registry that declares them (registry.py)."""
