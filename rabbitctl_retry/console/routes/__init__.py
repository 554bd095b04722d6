"""The console's request handlers, one module per page (docs/reference/console.md); each reads and
acts through console/reads.py and renders with console/views/."""
