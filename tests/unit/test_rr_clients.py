"""Which connections are rr's (``server.is_rr_client``): by what rr's own client says of
itself, and by the names rr gives its connections (docs/reference/cli.md, "Consumers that are not
rr")."""

from __future__ import annotations

import pytest

from rabbitctl_retry.server import RR_CLIENT_PRODUCT, is_rr_client
from rabbitctl_retry.transport.native_login import Login
from rabbitctl_retry.transport.url import parse_broker_url


@pytest.mark.parametrize(
    ("product", "connection_name", "rr"),
    [
        ("rr", None, True),  # rr's own client, whatever the URL named the connection
        ("rr", "orders service", True),
        ("aiormq", "rr run svc:main on host-1", True),  # RR_AMQP_CLIENT=aiormq, rr run
        ("aiormq", "rr run svc:main on host-1 (worker 2)", True),
        ("aiormq", "rr", True),  # any other rr command
        ("aiormq", "orders service", False),  # a URL's ?name= with aiormq: not known
        ("aiormq", None, False),  # aio-pika, FastStream
        ("Pika Python Client Library", "svc-a", False),
        ("py-amqp", None, False),  # kombu, Celery
        ("amqplib", "rr-like", False),
        (None, "rrun", False),
        (None, None, False),
        ("RR", None, False),
    ],
)
def test_rr_is_known_by_its_product_or_the_names_it_gives(
    product: str | None, connection_name: str | None, rr: bool
) -> None:
    assert is_rr_client(product, connection_name) is rr


def test_rr_s_own_client_says_what_the_rule_reads() -> None:
    login = Login.of(parse_broker_url("amqp://guest:guest@localhost/"), "rr")
    properties = login.client_properties
    assert properties["product"] == RR_CLIENT_PRODUCT
    assert properties["connection_name"] == "rr"
    assert is_rr_client(properties["product"], properties["connection_name"])
