"""What a node says, parsed (text in, dict out)."""
