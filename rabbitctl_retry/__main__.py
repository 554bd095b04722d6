"""``python -m rabbitctl_retry`` runs the ``rr`` command line."""

from rabbitctl_retry.cli import main

main()
