"""The examples of README.md and docs/**/*.md, run as written (docs/reference/testing.md)."""
