"""Host records assembled through the registry, the baseline comparison, the launch gate."""
