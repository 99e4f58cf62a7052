"""Figures judged against their expectations."""
