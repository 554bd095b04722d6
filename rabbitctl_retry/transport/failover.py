"""Several broker URLs: connect to the first that answers (docs/reference/cli.md, "Several hosts").

The nodes of a cluster are given as a list of URLs (``--url`` more than once, ``$RR_URL``
with spaces between them, or ``[broker] url = [...]``). rr tries them in the order given and
takes the first that answers; a lost connection (``rr run`` reconnecting) starts again from the
first, so a node that comes back is used again and the order stays the operator's choice.

Only an unreachable broker moves rr on to the next URL. A refused login or vhost, or a URL rr
refuses, ends the attempt at once: every node of one cluster shares its users and vhosts, so
the next would refuse the same, and trying them all would only hide the answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from rabbitctl_retry.errors import BrokerUnreachable
from rabbitctl_retry.transport.base import Connection, Connector


async def connect_any(connector: Connector, urls: Sequence[str]) -> Connection:
    """A connection to the first of ``urls`` that answers (see the module doc).

    Raises what ``connector`` raises for a refused login or a refused URL; when no URL
    answers, :class:`BrokerUnreachable` naming each one's failure (passwords censored, as in
    every error the adapter raises)."""
    if not urls:
        raise ValueError("no broker URL")
    failures: list[BrokerUnreachable] = []
    for url in urls:
        try:
            return await connector(url)
        except BrokerUnreachable as error:
            failures.append(error)
    if len(failures) == 1:
        raise failures[0]
    raise BrokerUnreachable(
        f"none of the {len(failures)} brokers answered: "
        + "; ".join(error.message for error in failures)
    )
