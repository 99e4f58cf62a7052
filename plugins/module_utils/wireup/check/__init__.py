"""wireup-check, the node-side program, its metrics and its bundle."""
