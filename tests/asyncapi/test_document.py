"""The document of asyncapi/document.py, a table of topologies (no handler module): what
RustStream's extension says for each kind of queue, rr's own beside it, the servers, the
channel ids; every document validated against the AsyncAPI 3.0.0 schema."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from rabbitctl_retry.asyncapi.document import Consumer, MessageSpec, Service, document
from rabbitctl_retry.topology.load import load_text

RAW = MessageSpec()


def contract_of(text: str, *queues: str, **more: Any) -> dict[str, Any]:
    consumers = tuple(Consumer(queue, f"svc:handle_{i}", RAW) for i, queue in enumerate(queues))
    service = Service(
        title="svc", version="1.2.3", topology=load_text(text), consumers=consumers, **more
    )
    return document(service)


@pytest.mark.parametrize(
    ("text", "extension", "rr_extension"),
    [
        (  # a classic queue: rr counts on its copies and copies a spent one to D
            "[queues.jobs]\nmax_attempts = 3\ndead_letter = 'jobs.dead'\n",
            {"maxAttempts": 3, "deadLetter": "jobs.dead"},
            {"queueType": "classic", "delay": {"mode": "memory"}},
        ),
        (  # a cap without a dead letter: RustStream's key left out
            "[queues.jobs]\nmax_attempts = 2\n",
            {"maxAttempts": 2},
            {"queueType": "classic", "delay": {"mode": "memory"}},
        ),
        (  # a quorum queue's raw delivery limit: the server hands it over limit + 1 times
            "[queues.jobs]\ntype = 'quorum'\ndelivery_limit = 6\ndead_letter = 'jobs.dead'\n",
            {"maxAttempts": 7, "deadLetter": "jobs.dead"},
            {"queueType": "quorum", "deliveryLimit": 6, "delay": {"mode": "memory"}},
        ),
        (  # a quorum queue's cap and the server's delayed retries (RabbitMQ 4.3)
            "[queues.jobs]\ntype = 'quorum'\nmax_attempts = 5\ndead_letter = 'jobs.dead'\n"
            "delay = 'server'\ndelay_min = '1s'\ndelay_max = '5m'\n",
            {"maxAttempts": 5, "deadLetter": "jobs.dead"},
            {
                "queueType": "quorum",
                "deliveryLimit": 4,
                "delay": {"mode": "server", "minMs": 1000, "maxMs": 300_000, "returns": "failed"},
            },
        ),
        (  # delay tiers: a wait queue each
            "[queues.jobs]\nmax_attempts = 4\ndead_letter = 'jobs.dead'\ndelay = 'dlx-ttl'\n"
            "delay_tiers = ['1s', '30s']\n",
            {"maxAttempts": 4, "deadLetter": "jobs.dead"},
            {
                "queueType": "classic",
                "delay": {
                    "mode": "dlx-ttl",
                    "waitQueues": ["jobs.retry.1s", "jobs.retry.30s"],
                    "tiersMs": [1000, 30_000],
                },
            },
        ),
        (  # the delayed-message plugin's exchange
            "[queues.jobs]\nmax_attempts = 4\ndelay = 'plugin-dme'\n",
            {"maxAttempts": 4},
            {"queueType": "classic", "delay": {"mode": "plugin-dme", "exchange": "jobs.delay"}},
        ),
        (  # a spent classic delivery without a dead letter is rejected: into `rejected`
            "[queues.jobs]\nmax_attempts = 2\nrejected = 'jobs.rejected'\n",
            {"maxAttempts": 2, "deadLetter": "jobs.rejected"},
            {"queueType": "classic", "delay": {"mode": "memory"}, "rejected": "jobs.rejected"},
        ),
        (  # no cap, no dead letter: no extension (a quorum queue's server default is not
            # stated: it depends on the server's version)
            "[queues.jobs]\ntype = 'quorum'\n",
            None,
            {"queueType": "quorum", "delay": {"mode": "memory"}},
        ),
    ],
)
def test_the_retry_extensions(
    text: str,
    extension: dict[str, Any] | None,
    rr_extension: dict[str, Any],
    assert_valid: Callable[[Any], None],
) -> None:
    found = contract_of(text, "jobs")
    assert_valid(found)
    receive = found["operations"]["receive_jobs"]
    assert receive.get("x-ruststream-retry") == extension
    assert receive["x-rr-retry"] == {"retryHeader": "x-ruststream-retry-count"} | rr_extension
    target = (extension or {}).get("deadLetter")
    sends = [name for name in found["operations"] if name.startswith("send_")]
    assert sends == ([f"send_{target}"] if target else [])
    if target:
        assert found["channels"][target]["address"] == target
        # the untyped handler's message travels to the dead letter
        assert found["operations"][f"send_{target}"]["messages"] == [
            {"$ref": f"#/channels/{target}/messages/jobs.message"}
        ]


def test_servers_carry_host_and_vhost_never_the_password(
    assert_valid: Callable[[Any], None],
) -> None:
    text = (
        "[broker]\nurl = ['amqp://app:s3cret@rabbit-1:5672/orders%2Feu?heartbeat=5', "
        "'amqps://app:s3cret@[::1]/orders%2Feu']\n[queues.jobs]\nmax_attempts = 2\n"
    )
    topology = load_text(text)
    found = contract_of(text, "jobs", urls=topology.broker.urls)
    assert_valid(found)
    assert found["servers"] == {
        "rabbitmq-1": {
            "host": "rabbit-1:5672",
            "protocol": "amqp",
            "protocolVersion": "0.9.1",
            "pathname": "/orders%2Feu",
        },
        "rabbitmq-2": {
            "host": "[::1]:5671",
            "protocol": "amqps",
            "protocolVersion": "0.9.1",
            "pathname": "/orders%2Feu",
        },
    }
    assert found["channels"]["jobs"]["bindings"]["amqp"]["queue"]["vhost"] == "orders/eu"
    assert "s3cret" not in repr(found)
    assert "app" not in repr(found["servers"])


def test_one_server_and_the_default_vhost() -> None:
    found = contract_of("[queues.jobs]\n", "jobs", urls=("amqp://guest:guest@localhost/",))
    assert found["servers"] == {
        "rabbitmq": {"host": "localhost:5672", "protocol": "amqp", "protocolVersion": "0.9.1"}
    }
    assert found["channels"]["jobs"]["bindings"]["amqp"]["queue"]["vhost"] == "/"


def test_a_queue_name_a_json_pointer_cannot_hold_gets_an_id_of_its_own(
    assert_valid: Callable[[Any], None],
) -> None:
    text = "[queues.'a/b']\n[queues.'a #b']\n[queues.'a_b']\n"
    found = contract_of(text, "a/b", "a #b", "a_b")
    assert_valid(found)
    assert {key: channel["address"] for key, channel in found["channels"].items()} == {
        "a_b": "a/b",
        "a__b": "a #b",
        "a_b_2": "a_b",
    }
    assert found["operations"]["receive_a_b_2"]["channel"] == {"$ref": "#/channels/a_b_2"}
    assert found["operations"]["receive_a__b"]["channel"] == {"$ref": "#/channels/a__b"}


def test_a_queue_the_topology_does_not_list() -> None:
    found = contract_of("[queues.jobs]\n", "elsewhere")
    assert found["channels"]["elsewhere"]["bindings"]["amqp"]["queue"] == {
        "name": "elsewhere",
        "vhost": "/",
    }
    assert "x-rr-retry" not in found["operations"]["receive_elsewhere"]


def test_typed_messages_travel_to_the_dead_letter_and_set_the_default_content_type(
    assert_valid: Callable[[Any], None],
) -> None:
    job = MessageSpec(
        name="Job",
        payload={"type": "object", "properties": {"id": {"type": "integer"}}},
        content_type="application/json",
    )
    service = Service(
        title="svc",
        version="1",
        topology=load_text("[queues.jobs]\nmax_attempts = 2\ndead_letter = 'jobs.dead'\n"),
        consumers=(Consumer("jobs", "svc:run", job), Consumer("jobs.dead", "svc:review", RAW)),
    )
    found = document(service)
    assert_valid(found)
    assert found["defaultContentType"] == "application/json"
    # the untyped review handler takes what arrives there: the Job
    assert found["operations"]["receive_jobs.dead"]["messages"] == [
        {"$ref": "#/channels/jobs.dead/messages/Job"}
    ]
    assert list(found["components"]["messages"]) == ["Job"]


def test_the_schema_check_catches_a_wrong_document(
    assert_valid: Callable[[Any], None],
) -> None:
    found = contract_of("[queues.jobs]\nmax_attempts = 2\n", "jobs")
    broken = copy.deepcopy(found)
    broken["operations"]["receive_jobs"]["action"] = "consume"
    with pytest.raises(AssertionError, match="consume"):
        assert_valid(broken)
    broken = copy.deepcopy(found)
    broken["channels"]["jobs"]["bindings"]["amqp"]["is"] = "table"
    with pytest.raises(AssertionError):
        assert_valid(broken)
    assert jsonschema  # the validator is jsonschema's (tests/asyncapi/conftest.py)
