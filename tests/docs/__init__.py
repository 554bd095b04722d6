"""The examples of README.md and docs/*.md, run as written (docs/testing.md)."""
