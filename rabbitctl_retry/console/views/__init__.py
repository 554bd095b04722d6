"""Pure. Every page of ``rr console`` as HTML, from plain data (docs/reference/console.md), one
module per page; :mod:`.base` holds what they share (escaping, the page frame, links)."""
