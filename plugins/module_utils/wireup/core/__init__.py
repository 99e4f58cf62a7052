"""Shared by every layer: atomic writes, redaction, apt's versions, grammar checks, numbers."""
