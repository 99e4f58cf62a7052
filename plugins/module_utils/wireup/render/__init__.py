"""Output formats only: Markdown, HTML and PNG primitives, Prometheus' text exposition."""
