"""The TLS files a broker URL names (``cafile``, ``certfile``, ``keyfile``), checked by the rule
of every file rr reads on the user's word (``user_files.py``; docs/reference/cli.md, "Files rr
reads") before OpenSSL opens them: OpenSSL would wait for a FIFO's writer for ever. Both AMQP
adapters check them as they connect."""

from __future__ import annotations

from collections.abc import Mapping

from rabbitctl_retry.errors import BrokerUnreachable, escape_unprintable
from rabbitctl_retry.user_files import TLS_FILE_LIMIT_BYTES, FileRefused, check_regular_file

TLS_FILE_OPTIONS = ("cafile", "certfile", "keyfile")


def check_tls_files(options: Mapping[str, str], shown: str) -> None:
    """Each TLS file of ``options`` is a regular file of at most :data:`TLS_FILE_LIMIT_BYTES`;
    else :class:`BrokerUnreachable` (exit 69, as a TLS file that cannot be read) naming the
    option and the file; ``shown``: the URL as messages show it."""
    for option in TLS_FILE_OPTIONS:
        path = options.get(option)
        if not path:
            continue
        try:
            check_regular_file(path, limit_bytes=TLS_FILE_LIMIT_BYTES)
        except FileRefused as refused:
            if refused.missing:
                continue  # OpenSSL's own error names it, as before
            raise BrokerUnreachable(
                f"cannot connect to {shown}: {option} {escape_unprintable(path)}: {refused.reason}"
            ) from None
