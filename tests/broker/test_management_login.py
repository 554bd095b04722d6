"""Why the management API refused a login, as RabbitMQ 4.3.6 says it (the shared server with a
management API, 127.0.0.1:15675): a wrong password is "wrong user name or password?", a user
without the management tag "its user needs the management (or monitoring) tag"; the two
differ only in the answer's ``reason`` ("Not_Authorized", "Not management user"), both 401
(docs/reference/exit-codes.md, "Exit codes": 77)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

from rabbitctl_retry.errors import AccessRefused
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.backends import ctl
from tests.shared_node import require_broker

API = os.environ.get("RR_TEST_MANAGEMENT_HOST_4_3", "127.0.0.1:15675")

pytestmark = pytest.mark.broker


@pytest.fixture
def user_without_tags() -> Iterator[tuple[str, str]]:
    broker = require_broker("4.3")
    name, password = f"rr-notag-{secrets.token_hex(4)}", secrets.token_hex(8)
    ctl(broker, "add_user", name, password)
    try:
        yield name, password
    finally:
        ctl(broker, "delete_user", name)


async def refusal(user: str, password: str) -> str:
    api = HttpManagementApi(f"http://{user}:{password}@{API}/", vhost="/")
    with pytest.raises(AccessRefused) as refused:
        await api.nodes()
    return str(refused.value)


async def test_a_wrong_password_is_not_called_a_missing_tag() -> None:
    require_broker("4.3")
    said = await refusal("guest", "not-the-password")
    assert "refused the login (401) to GET /api/nodes: wrong user name or password?" in said
    assert "tag" not in said
    assert "not-the-password" not in said


async def test_a_user_without_the_tag_is_told_so(user_without_tags: tuple[str, str]) -> None:
    said = await refusal(*user_without_tags)
    assert (
        "refused the login (401) to GET /api/nodes: its user needs the management (or "
        "monitoring) tag (Not management user)"
    ) in said
