"""Hostile management APIs (docs/how-to/run-on-a-cluster.md, "Replicas"), played by a fake one of
the test's own (tests/hostile/fake_management.py).

rr never follows a redirect (no second request, so the credentials go nowhere else); an
answer that is not what the API documents — not JSON, nested too deep, too big, a key
missing or of the wrong type, an error status — is one clear error line (401/403: exit 77,
the rest 69), never 70; and when the API fails only after the declare applied its changes,
rr still prints the plan of what it did, warns in one line that the placement could not be
read, and exits 0.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from rabbitctl_retry.errors import AccessRefused, BrokerUnreachable, TransportError, exit_code_for
from rabbitctl_retry.server import NodeResources, Placement, QueueActivity, QueueHealth, QueueState
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.hostile.fake_management import (
    FAKE_NODE,
    SECRET,
    Answer,
    FakeManagement,
    connections_made,
    listening_socket,
    overview,
)
from tests.shared_node import ctl_command, current
from tests.target_line import after_target

DEEP = b"[" * 200_000 + b"]" * 200_000
"""The issue's 200,000-deep JSON document."""


def _client(fake: FakeManagement, **kwargs: Any) -> HttpManagementApi:
    return HttpManagementApi(fake.url(), vhost="shop", timeout_s=10, **kwargs)


async def _failure(fake: FakeManagement, ask: str = "nodes", **kwargs: Any) -> TransportError:
    """The error rr's client raises for what ``fake`` answers to ``ask``."""
    client = _client(fake, **kwargs)
    asks = {"nodes": client.nodes, "queue_state": partial(client.queue_state, "q1")}
    with pytest.raises(TransportError) as caught:
        await asks.get(ask, partial(client.placement, "q1"))()
    assert SECRET not in str(caught.value)
    assert f"the management API at http://svc:******@127.0.0.1:{fake.port}/" in str(caught.value)
    return caught.value


# --- redirects: never followed ---------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_is_an_error_and_the_credentials_go_nowhere_else(
    api: FakeManagement, elsewhere: FakeManagement, status: int
) -> None:
    api.answer("/api/nodes", Answer.redirect(f"{elsewhere.base()}/api/nodes", status))

    error = await _failure(api)

    assert isinstance(error, BrokerUnreachable)
    assert exit_code_for(error) == 69
    assert str(error) == (
        f"the management API at http://svc:******@127.0.0.1:{api.port}/ answered GET "
        f"/api/nodes with a redirect ({status}) to {elsewhere.base()}/api/nodes: rr follows "
        "no redirect (give it the URL of the API itself)"
    )
    assert elsewhere.seen() == []
    assert [seen.path for seen in api.seen()] == ["/api/nodes"]


async def test_a_redirect_to_ftp_opens_no_connection(api: FakeManagement) -> None:
    with listening_socket() as ftp:
        port = ftp.getsockname()[1]
        api.answer("/api/nodes", Answer.redirect(f"ftp://127.0.0.1:{port}/nodes.json"))

        error = await _failure(api)

        assert f"with a redirect (302) to ftp://127.0.0.1:{port}/nodes.json" in str(error)
        assert connections_made(ftp) == 0


async def test_a_relative_redirect_is_not_followed_either(api: FakeManagement) -> None:
    api.answer("/api/nodes", Answer.redirect("/login?next=/api/nodes", 303))

    error = await _failure(api)

    assert "with a redirect (303) to /login?next=/api/nodes" in str(error)
    assert [seen.path for seen in api.seen()] == ["/api/nodes"]


async def test_a_redirects_location_is_shown_censored(api: FakeManagement) -> None:
    api.answer("/api/nodes", Answer.redirect(f"http://evil:{SECRET}x@127.0.0.1:1/" + "a" * 500))

    error = await _failure(api)

    assert "to http://evil:******@127.0.0.1:1/aaa" in str(error)
    assert str(error).count("a" * 100) == 1  # clipped


# --- answers that are not what the API documents -----------------------------------------------

NODE_ANSWERS = [
    pytest.param(Answer(body=DEEP), "JSON nested too deep", id="200000-deep"),
    pytest.param(Answer.json([{"nom": "x"}]), "a node without a 'name'", id="no-name"),
    pytest.param(Answer.json([{"name": 5}]), "a node without a 'name'", id="name-not-text"),
    pytest.param(Answer.json([{"name": ""}]), "a node without a 'name'", id="empty-name"),
    pytest.param(Answer.json(["rabbit@a"]), "a node without a 'name'", id="not-objects"),
    pytest.param(Answer.json([]), "not a list of nodes", id="no-nodes"),
    pytest.param(Answer.json({"name": "x"}), "not a list of nodes", id="an-object"),
    pytest.param(Answer.json(None), "not a list of nodes", id="null"),
    pytest.param(Answer(body=b"<html>login</html>"), "not JSON", id="html"),
    pytest.param(Answer(body=b""), "not JSON", id="empty"),
    pytest.param(Answer(body=b'["\xff\xfe"]'), "not JSON", id="not-utf8"),
    pytest.param(Answer(body=b"1" * 5000), "not JSON", id="huge-integer"),
]


@pytest.mark.parametrize(("answer", "what"), NODE_ANSWERS)
async def test_a_nodes_answer_of_the_wrong_shape_is_exit_69(
    api: FakeManagement, answer: Answer, what: str
) -> None:
    api.answer("/api/nodes", answer)

    error = await _failure(api)

    assert isinstance(error, BrokerUnreachable)
    assert str(error) == (
        f"the management API at http://svc:******@127.0.0.1:{api.port}/ gave an unexpected "
        f"answer to GET /api/nodes ({what}; is it RabbitMQ's management plugin?)"
    )


@pytest.mark.parametrize(
    ("status", "exit_code", "words"),
    [
        (401, 77, "refused the login (401) to GET /api/nodes"),
        (403, 77, "refused the login (403) to GET /api/nodes"),
        (404, 69, "answered 404 to GET /api/nodes"),
        (500, 69, "answered 500 to GET /api/nodes"),
        (503, 69, "answered 503 to GET /api/nodes"),
        (418, 69, "answered 418 to GET /api/nodes"),
    ],
)
async def test_an_error_status_is_named_with_its_exit_code(
    api: FakeManagement, status: int, exit_code: int, words: str
) -> None:
    api.answer("/api/nodes", Answer.json({"error": "x"}, status=status))

    error = await _failure(api)

    assert exit_code_for(error) == exit_code
    assert isinstance(error, AccessRefused if exit_code == 77 else BrokerUnreachable)
    assert words in str(error)


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(Answer(raw=b"garbage\r\n\r\n"), id="no-status-line"),
        pytest.param(Answer(body=b"[]", content_length=1000), id="body-shorter-than-said"),
    ],
)
async def test_a_broken_http_answer_is_exit_69(api: FakeManagement, answer: Answer) -> None:
    api.answer("/api/nodes", answer)

    error = await _failure(api)

    assert isinstance(error, BrokerUnreachable)


async def test_an_answer_bigger_than_rr_reads_is_refused(api: FakeManagement) -> None:
    nodes = json.dumps([{"name": FAKE_NODE}]).encode()
    api.answer("/api/nodes", Answer(body=nodes))
    assert await _client(api, max_answer_bytes=len(nodes)).nodes() == (FAKE_NODE,)

    error = await _failure(api, max_answer_bytes=len(nodes) - 1)

    assert f"(more than {len(nodes) - 1} bytes;" in str(error)


PLACEMENT_ANSWERS = [
    pytest.param(Answer(body=DEEP), "JSON nested too deep", id="200000-deep"),
    pytest.param(Answer.json([]), "not a queue", id="a-list"),
    pytest.param(Answer.json({}), "no 'node' text", id="no-node"),
    pytest.param(Answer.json({"node": {"x": 1}}), "no 'node' text", id="node-not-text"),
    pytest.param(Answer.json({"members": "rabbit@a"}), "no 'node' text", id="members-a-text"),
    pytest.param(Answer.json({"members": [1, 2]}), "no 'node' text", id="members-not-texts"),
    pytest.param(
        Answer.json({"members": ["rabbit@a"], "leader": 5}), "no 'node' text", id="leader-5"
    ),
    pytest.param(Answer(body=b"nope"), "not JSON", id="not-json"),
]


@pytest.mark.parametrize(("answer", "what"), PLACEMENT_ANSWERS)
async def test_a_queue_answer_of_the_wrong_shape_is_exit_69(
    api: FakeManagement, answer: Answer, what: str
) -> None:
    api.answer("/api/queues/shop/q1", answer)

    error = await _failure(api, ask="placement")

    assert isinstance(error, BrokerUnreachable)
    assert f"gave an unexpected answer to GET /api/queues/shop/q1 ({what}" in str(error)


QUEUE_STATE_ANSWERS = [
    pytest.param(Answer.json([]), "not a queue", id="a-list"),
    pytest.param(Answer.json({}), "no 'type' text", id="no-type"),
    pytest.param(Answer.json({"type": 5}), "no 'type' text", id="type-5"),
    pytest.param(
        Answer.json({"type": "quorum", "arguments": []}), "no 'type' text", id="arguments-a-list"
    ),
    pytest.param(
        Answer.json({"type": "quorum", "policy": 1}), "no 'type' text", id="policy-not-text"
    ),
    pytest.param(
        Answer.json({"type": "quorum", "message_bytes": "15"}),
        "no 'type' text",
        id="bytes-a-text",
    ),
    pytest.param(
        Answer.json({"type": "quorum", "message_bytes": -1}), "no 'type' text", id="bytes-below-0"
    ),
    pytest.param(
        Answer.json({"type": "quorum", "message_bytes": True}), "no 'type' text", id="bytes-a-bool"
    ),
    pytest.param(Answer(body=b"nope"), "not JSON", id="not-json"),
]


@pytest.mark.parametrize(("answer", "what"), QUEUE_STATE_ANSWERS)
async def test_a_queue_state_of_the_wrong_shape_is_exit_69(
    api: FakeManagement, answer: Answer, what: str
) -> None:
    api.answer("/api/queues/shop/q1", answer)

    error = await _failure(api, ask="queue_state")

    assert isinstance(error, BrokerUnreachable)
    assert f"gave an unexpected answer to GET /api/queues/shop/q1 ({what}" in str(error)


async def test_a_queue_state_is_read(api: FakeManagement) -> None:
    api.answer(
        "/api/queues/shop/q1",
        Answer.json(
            {
                "type": "quorum",
                "arguments": {"x-queue-type": "quorum"},
                "policy": "rr.q1",
                "operator_policy": "",
                "message_bytes": 123,
            }
        ),
    )
    api.answer("/api/queues/shop/fresh", Answer.json({"type": "classic"}))  # not sampled yet
    api.answer("/api/queues/shop/missing", Answer.json({"error": "Object Not Found"}, 404))
    client = _client(api)

    assert await client.queue_state("q1") == QueueState(
        kind="quorum",
        arguments={"x-queue-type": "quorum"},
        policy="rr.q1",
        operator_policy=None,
        message_bytes=123,
    )
    assert await client.queue_state("fresh") == QueueState(kind="classic", arguments={})
    assert await client.queue_state("missing") is None


async def test_the_documented_answers_are_read(api: FakeManagement) -> None:
    api.answer("/api/nodes", Answer.json([{"name": "rabbit@b"}, {"name": "rabbit@a"}]))
    api.answer("/api/queues/shop/q1", Answer.json({"node": "rabbit@a", "name": "q1"}))
    api.answer(
        "/api/queues/shop/q2",
        Answer.json({"node": "rabbit@b", "leader": "rabbit@b", "members": ["rabbit@b", "a@x"]}),
    )
    api.answer("/api/queues/shop/missing", Answer.json({"error": "Object Not Found"}, 404))
    client = _client(api)

    assert await client.nodes() == ("rabbit@a", "rabbit@b")
    assert await client.placement("q1") == Placement(leader="rabbit@a", members=("rabbit@a",))
    assert await client.placement("q2") == Placement(leader="rabbit@b", members=("a@x", "rabbit@b"))
    assert await client.placement("missing") is None


async def test_the_credentials_go_as_basic_auth_decoded(api: FakeManagement) -> None:
    await HttpManagementApi(api.url("svc", f"{SECRET}%2Fpw"), vhost="/").nodes()
    await HttpManagementApi(f"{api.base()}/", vhost="/").nodes()

    first, second = api.seen()
    token = base64.b64encode(f"svc:{SECRET}/pw".encode()).decode()
    assert first.headers["authorization"] == f"Basic {token}"
    assert "authorization" not in second.headers


# --- rr declare through the fake API, against the real broker -----------------------------------

TOPOLOGY = "[queues.rr-mgmt]\n\n[queues.rr-mgmt-2]\n"


def _queues(url: str) -> list[str]:
    vhost = urlsplit(url).path[1:]
    result = subprocess.run(
        ctl_command("-q", "list_queues", "-p", vhost, "name", "--formatter", "json"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return sorted(row["name"] for row in json.loads(result.stdout or "[]"))


def _rr_declare(
    tmp_path: Path, url: str, management_url: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    topology = tmp_path / "topology.toml"
    topology.write_text(TOPOLOGY, encoding="utf-8")
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("RR_URL", "RR_MANAGEMENT_URL", "RR_TRACEBACK", "COLUMNS")
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "rabbitctl_retry",
            "declare",
            str(topology),
            "--url",
            url,
            "--management-url",
            management_url,
            *extra,
        ],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )


def test_rr_declare_follows_no_redirect_and_changes_nothing(
    tmp_path: Path, vhost_url: str, api: FakeManagement, elsewhere: FakeManagement
) -> None:
    api.speak_for(current().release)  # rr declare checks /api/overview
    api.answer("/api/nodes", Answer.redirect(f"{elsewhere.base()}/api/nodes"))

    result = _rr_declare(tmp_path, vhost_url, api.url())

    assert result.returncode == 69, result.stderr
    assert after_target(result.stderr).startswith("rr: error: the management API at ")
    assert "with a redirect (302)" in after_target(result.stderr)
    assert after_target(result.stderr).count("\n") == 1
    assert SECRET not in result.stdout + result.stderr
    assert elsewhere.seen() == []
    assert _queues(vhost_url) == []


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(Answer(body=DEEP), id="200000-deep"),
        pytest.param(Answer.json([{"nom": "x"}]), id="no-name"),
        pytest.param(Answer.json({"error": "x"}, status=500), id="500"),
    ],
)
def test_rr_declare_refuses_a_bad_nodes_answer_before_changing_anything(
    tmp_path: Path, vhost_url: str, api: FakeManagement, answer: Answer
) -> None:
    api.speak_for(current().release)  # rr declare checks /api/overview
    api.answer("/api/nodes", answer)

    result = _rr_declare(tmp_path, vhost_url, api.url())

    assert result.returncode == 69, result.stderr
    assert after_target(result.stderr).startswith("rr: error: the management API at ")
    assert after_target(result.stderr).count("\n") == 1
    assert "internal error" not in after_target(result.stderr)
    assert SECRET not in result.stdout + result.stderr
    assert _queues(vhost_url) == []


AFTER_APPLY = [
    pytest.param(Answer.json({"error": "x"}, status=500), "answered 500", id="500"),
    pytest.param(Answer(body=DEEP), "JSON nested too deep", id="200000-deep"),
    pytest.param(Answer.json({"members": "rabbit@a"}), "no 'node' text", id="wrong-shape"),
    pytest.param(Answer.json({}, status=403), "refused the login (403)", id="403"),
]


@pytest.mark.parametrize(("answer", "words"), AFTER_APPLY)
def test_a_management_failure_after_the_apply_still_prints_the_plan_json(
    tmp_path: Path, vhost_url: str, api: FakeManagement, answer: Answer, words: str
) -> None:
    api.speak_for(current().release)  # rr declare checks /api/overview
    api.answer("/api/queues/", answer, prefix=True)

    result = _rr_declare(tmp_path, vhost_url, api.url(), "--output", "json")

    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert [(op["name"], op["status"], op["placement"]) for op in document["operations"]] == [
        ("rr-mgmt", "created", None),
        ("rr-mgmt-2", "created", None),
    ]
    assert words in document["placement_error"]
    assert after_target(result.stderr).startswith(
        "rr: warning: the declare is done, but where the queues live could not be read: "
        f"the management API at http://svc:******@127.0.0.1:{api.port}/ "
    )
    assert words in after_target(result.stderr)
    assert after_target(result.stderr).count("\n") == 1
    assert SECRET not in result.stdout + result.stderr
    assert _queues(vhost_url) == ["rr-mgmt", "rr-mgmt-2"]


def _columns(header: str) -> list[str]:
    return [word for word in header.split() if word != "┃"]


def test_a_management_failure_after_the_apply_still_prints_the_plan_table(
    tmp_path: Path, vhost_url: str, api: FakeManagement
) -> None:
    api.speak_for(current().release)  # rr declare checks /api/overview
    api.answer("/api/queues/", Answer.json({"error": "x"}, status=500), prefix=True)

    result = _rr_declare(tmp_path, vhost_url, api.url())

    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert _columns(header) == ["op", "name", "status", "arguments", "detail"]  # no members
    assert sum("rr-mgmt" in row and "created" in row for row in rows) == 2
    assert after_target(result.stderr).startswith(
        "rr: warning: the declare is done, but where the queues "
    )
    assert "answered 500 to GET /api/queues/" in after_target(result.stderr)
    assert after_target(result.stderr).count("\n") == 1
    assert _queues(vhost_url) == ["rr-mgmt", "rr-mgmt-2"]


def test_the_placement_is_shown_when_the_api_answers(
    tmp_path: Path, vhost_url: str, api: FakeManagement
) -> None:
    api.speak_for(current().release)  # rr declare checks /api/overview
    result = _rr_declare(tmp_path, vhost_url, api.url())

    assert result.returncode == 0, result.stderr
    assert after_target(result.stderr) == ""
    assert _columns(result.stdout.splitlines()[0])[-1] == "members"
    assert result.stdout.count(FAKE_NODE) == 2
    vhost = urlsplit(vhost_url).path[1:]
    assert sorted(seen.path for seen in api.seen()) == [
        "/api/nodes",
        "/api/overview",
        f"/api/queues/{vhost}/rr-mgmt",
        f"/api/queues/{vhost}/rr-mgmt-2",
        f"/api/vhosts/{vhost}",  # the vhost's default queue type
    ]


def test_a_vhost_answer_that_fails_is_a_warning_and_the_declare_goes_on(
    tmp_path: Path, vhost_url: str, api: FakeManagement
) -> None:
    """The vhost's default queue type decides nothing for rr declare (every queue is declared
    with its type): an API that fails to tell it is one warning line, and the queues are
    declared."""
    api.speak_for(current().release)
    vhost = urlsplit(vhost_url).path[1:]
    api.answer(f"/api/vhosts/{vhost}", Answer(status=500))

    result = _rr_declare(tmp_path, vhost_url, api.url())

    assert result.returncode == 0, result.stderr
    shown = api.url().replace(SECRET, "******")
    assert after_target(result.stderr).splitlines() == [
        "rr: warning: the vhost's default queue type could not be read (rr declares every "
        f"queue with its type all the same): the management API at {shown} answered 500 to "
        f"GET /api/vhosts/{vhost}"
    ]
    assert sorted(_queues(vhost_url)) == ["rr-mgmt", "rr-mgmt-2"]


@pytest.mark.parametrize(
    ("told", "difference"),
    [
        (("9.9.9", None), "it runs RabbitMQ 9.9.9, the AMQP server {release}"),
        (
            ("{release}", "rabbit@elsewhere"),
            "its cluster is 'rabbit@elsewhere', the AMQP server's '{cluster}'",
        ),
    ],
    ids=["another-version", "another-cluster"],
)
def test_rr_declare_refuses_an_api_of_another_server_before_changing_anything(
    tmp_path: Path,
    vhost_url: str,
    api: FakeManagement,
    told: tuple[str, str | None],
    difference: str,
) -> None:
    """Its nodes (replicas) and its deprecated-features table (transient queues) would decide
    the plan: an API that answers for another server is refused (exit 78), nothing declared,
    nothing else asked."""
    release = current().release
    done = current().run_ctl("-q", "cluster_status", "--formatter", "json")
    cluster = json.loads(done.stdout)["cluster_name"]
    version, cluster_name = told
    api.answer("/api/overview", overview(version.format(release=release), cluster_name))

    result = _rr_declare(tmp_path, vhost_url, api.url())

    assert result.returncode == 78, result.stderr
    shown = f"http://svc:******@127.0.0.1:{api.port}/"
    assert after_target(result.stderr).startswith(
        f"rr: error: the management API at {shown} does not answer"
    )
    assert (
        f"(/api/overview: {difference.format(release=release, cluster=cluster)}); nothing was "
        "changed. Give the management URL of the server --url reaches\n"
    ) in after_target(result.stderr)
    assert SECRET not in result.stdout + result.stderr
    # the API's nodes are asked only when the cluster names differ: are they the default
    # names of two nodes of one cluster?
    asked = ["/api/overview", "/api/nodes"] if cluster_name else ["/api/overview"]
    assert [seen.path for seen in api.seen()] == asked
    assert _queues(vhost_url) == []


# --- rr status: every queue's traffic --------------------------------------------------------

ACTIVITY_PATH = (
    "/api/queues/shop?columns=name,type,messages_ready,messages_unacknowledged,"
    "message_stats.publish_details.rate,message_stats.deliver_get_details.rate"
)
CONSUMERS_PATH = "/api/consumers/shop?columns=queue.name,prefetch_count"


async def test_every_queues_traffic_is_read(api: FakeManagement) -> None:
    """What ``rr status`` reads with a management URL (docs/reference/cli.md, "rr status"), in the
    shape RabbitMQ 4.3.6 answers: counts and rates absent until its first sample."""
    api.answer(
        ACTIVITY_PATH,
        Answer.json(
            [
                {
                    "name": "work",
                    "type": "quorum",
                    "messages_ready": 3,
                    "messages_unacknowledged": 2,
                    "message_stats": {
                        "publish_details": {"rate": 1.5},
                        "deliver_get_details": {"rate": 0},
                    },
                },
                {"name": "fresh", "type": "classic"},
            ]
        ),
    )
    api.answer(
        CONSUMERS_PATH,
        Answer.json(
            [
                {"queue": {"name": "work"}, "prefetch_count": 10},
                {"queue": {"name": "work"}, "prefetch_count": 0},
            ]
        ),
    )

    assert await _client(api).queue_activity() == (
        QueueActivity("fresh", "classic", None, None, (), None, None),
        QueueActivity("work", "quorum", 3, 2, (0, 10), 1.5, 0.0),
    )


@pytest.mark.parametrize(
    ("path", "answer", "what"),
    [
        pytest.param(ACTIVITY_PATH, Answer.json({}), "not a list of queues", id="not-a-list"),
        pytest.param(ACTIVITY_PATH, Answer.json([{"name": "q"}]), "a queue without", id="no-type"),
        pytest.param(
            ACTIVITY_PATH,
            Answer.json([{"name": "q", "type": "classic", "messages_ready": -1}]),
            "a queue without",
            id="negative-count",
        ),
        pytest.param(
            ACTIVITY_PATH,
            Answer.json([{"name": "q", "type": "classic", "messages_unacknowledged": True}]),
            "a queue without",
            id="count-a-boolean",
        ),
        pytest.param(
            ACTIVITY_PATH,
            Answer.json(
                [
                    {
                        "name": "q",
                        "type": "classic",
                        "message_stats": {"publish_details": {"rate": "1"}},
                    }
                ]
            ),
            "a queue without",
            id="rate-a-text",
        ),
        pytest.param(
            CONSUMERS_PATH,
            Answer.json([{"queue": {"name": "q"}}]),
            "not a list of consumers",
            id="no-prefetch",
        ),
        pytest.param(
            CONSUMERS_PATH,
            Answer.json([{"queue": "q", "prefetch_count": 1}]),
            "not a list of consumers",
            id="queue-not-an-object",
        ),
    ],
)
async def test_a_traffic_answer_of_the_wrong_shape_is_exit_69(
    api: FakeManagement, path: str, answer: Answer, what: str
) -> None:
    api.answer(ACTIVITY_PATH, Answer.json([{"name": "q", "type": "classic"}]))
    api.answer(CONSUMERS_PATH, Answer.json([]))
    api.answer(path, answer)

    with pytest.raises(BrokerUnreachable) as caught:
        await _client(api).queue_activity()

    assert exit_code_for(caught.value) == 69
    assert f"gave an unexpected answer to GET {path} ({what}" in str(caught.value)
    assert SECRET not in str(caught.value)


# --- rr doctor: the nodes' alarms, the queues' members and depth rates ----------------------

NODES_PATH = (
    "/api/nodes?columns=name,running,mem_alarm,disk_free_alarm,mem_used,mem_limit,disk_free,"
    "disk_free_limit"
)
HEALTH_PATH = "/api/queues/shop?columns=name,type,members,online,messages_details.rate"


async def test_the_nodes_resources_are_read(api: FakeManagement) -> None:
    """What ``rr doctor`` reads of ``/api/nodes`` (docs/reference/cli.md, "rr doctor"), in the shape
    RabbitMQ 3.10.8 and 4.3.6 answer (measured): a node that does not run states no alarm."""
    api.answer(
        NODES_PATH,
        Answer.json(
            [
                {"name": "rabbit@b", "running": False},
                {
                    "name": "rabbit@a",
                    "running": True,
                    "mem_alarm": True,
                    "disk_free_alarm": False,
                    "mem_used": 1_700_000_000,
                    "mem_limit": 1_600_000_000,
                    "disk_free": 80_000_000_000,
                    "disk_free_limit": 50_000_000,
                },
            ]
        ),
    )

    assert await _client(api).node_resources() == (
        NodeResources(
            "rabbit@a", True, True, False, 1_700_000_000, 1_600_000_000, 80_000_000_000, 50_000_000
        ),
        NodeResources("rabbit@b", False),
    )


async def test_the_queues_members_and_depth_rates_are_read(api: FakeManagement) -> None:
    api.answer(
        HEALTH_PATH,
        Answer.json(
            [
                {
                    "name": "work",
                    "type": "quorum",
                    "members": ["rabbit@b", "rabbit@a"],
                    "online": ["rabbit@a"],
                    "messages_details": {"rate": 0.4},
                },
                {"name": "fresh", "type": "quorum", "members": ["rabbit@a"], "online": []},
                {"name": "dead", "type": "classic", "messages_details": {"rate": 0}},
            ]
        ),
    )

    assert await _client(api).queue_health() == (
        QueueHealth("dead", "classic", None, None, 0.0),
        QueueHealth("fresh", "quorum", ("rabbit@a",), (), None),
        QueueHealth("work", "quorum", ("rabbit@a", "rabbit@b"), ("rabbit@a",), 0.4),
    )


_RUNNING = {"name": "rabbit@a", "running": True, "mem_alarm": False, "disk_free_alarm": False}


@pytest.mark.parametrize(
    ("path", "answer", "what"),
    [
        pytest.param(NODES_PATH, Answer.json({}), "not a list of nodes", id="nodes-not-a-list"),
        pytest.param(NODES_PATH, Answer.json([]), "not a list of nodes", id="no-node"),
        pytest.param(
            NODES_PATH, Answer.json([{"name": "rabbit@a"}]), "a node without", id="no-running"
        ),
        pytest.param(
            NODES_PATH,
            Answer.json([{"name": "rabbit@a", "running": True}]),
            "a node without",
            id="running-without-alarms",
        ),
        pytest.param(
            NODES_PATH,
            Answer.json([{**_RUNNING, "mem_alarm": "true"}]),
            "a node without",
            id="alarm-a-text",
        ),
        pytest.param(
            NODES_PATH,
            Answer.json([{**_RUNNING, "mem_used": 1.5}]),
            "a node without",
            id="bytes-not-an-integer",
        ),
        pytest.param(
            NODES_PATH,
            Answer.json([{**_RUNNING, "name": ""}]),
            "a node without",
            id="empty-name",
        ),
        pytest.param(NODES_PATH, Answer(body=b"<html>"), "not JSON", id="nodes-not-json"),
        pytest.param(HEALTH_PATH, Answer.json({}), "not a list of queues", id="queues-not-a-list"),
        pytest.param(
            HEALTH_PATH,
            Answer.json([{"name": "q", "type": "quorum", "members": "rabbit@a"}]),
            "a queue without",
            id="members-a-text",
        ),
        pytest.param(
            HEALTH_PATH,
            Answer.json([{"name": "q", "type": "quorum", "online": [1]}]),
            "a queue without",
            id="online-not-names",
        ),
        pytest.param(
            HEALTH_PATH,
            Answer.json([{"name": "q", "type": "classic", "messages_details": {"rate": "1"}}]),
            "a queue without",
            id="rate-a-text",
        ),
        pytest.param(
            HEALTH_PATH,
            Answer.json([{"name": "q", "type": "classic", "messages_details": 3}]),
            "a queue without",
            id="details-not-an-object",
        ),
    ],
)
async def test_a_doctor_answer_of_the_wrong_shape_is_exit_69(
    api: FakeManagement, path: str, answer: Answer, what: str
) -> None:
    api.answer(path, answer)
    client = _client(api)

    with pytest.raises(BrokerUnreachable) as caught:
        await (client.node_resources() if path == NODES_PATH else client.queue_health())

    assert exit_code_for(caught.value) == 69
    assert f"gave an unexpected answer to GET {path} ({what}" in str(caught.value)
    assert SECRET not in str(caught.value)


# --- rr doctor, rr status: the consumers and their clients; the vhost's default type ---------

QUEUE_CONSUMERS_PATH = (
    "/api/consumers/shop?columns=queue.name,consumer_tag,ack_required,"
    "channel_details.connection_name"
)
CONNECTIONS_PATH = "/api/vhosts/shop/connections?columns=name,client_properties"
VHOST_PATH = "/api/vhosts/shop"
PIKA = "127.0.0.1:39600 -> 127.0.0.1:5675"
RR = "127.0.0.1:39626 -> 127.0.0.1:5675"


def _consumer_row(queue: str, tag: str, connection: str, ack_required: bool = True) -> Any:
    return {
        "queue": {"name": queue},
        "consumer_tag": tag,
        "ack_required": ack_required,
        "channel_details": {"connection_name": connection},
    }


async def test_every_consumer_is_read_with_its_clients_properties(api: FakeManagement) -> None:
    """In the shape RabbitMQ 4.3.6 answers (measured with pika 1.4.4, kombu's py-amqp 5.4.2,
    rr's own client and rr on aiormq): the client properties' texts, ``product_version`` for
    py-amqp's version; a consumer whose connection went between the two answers has none."""
    api.answer(
        QUEUE_CONSUMERS_PATH,
        Answer.json(
            [
                _consumer_row("jobs", "ctag1.a", PIKA),
                _consumer_row("jobs", "None1", "py-amqp"),
                _consumer_row("jobs", "amq.ctag-r", RR, ack_required=False),
                _consumer_row("jobs", "gone", "127.0.0.1:1 -> 127.0.0.1:5675"),
                {  # a new consumer, stated without its channel for a moment (4.3.6)
                    "queue": {"name": "jobs"},
                    "consumer_tag": "new",
                    "ack_required": True,
                    "channel_details": {},
                },
            ]
        ),
    )
    api.answer(
        CONNECTIONS_PATH,
        Answer.json(
            [
                {
                    "name": PIKA,
                    "client_properties": {
                        "capabilities": {"basic.nack": True},
                        "connection_name": "svc-a",
                        "product": "Pika Python Client Library",
                        "version": "1.4.4",
                    },
                },
                {
                    "name": "py-amqp",
                    "client_properties": {"product": "py-amqp", "product_version": "5.4.2"},
                },
                {
                    "name": RR,
                    "client_properties": {"product": "rr", "connection_name": "rr run svc on h"},
                },
            ]
        ),
    )

    found = await _client(api).consumers()

    assert [(c.tag, c.ack_required, c.product, c.version, c.connection_name) for c in found] == [
        ("None1", True, "py-amqp", "5.4.2", None),
        ("amq.ctag-r", False, "rr", None, "rr run svc on h"),
        ("ctag1.a", True, "Pika Python Client Library", "1.4.4", "svc-a"),
        ("gone", True, None, None, None),
        ("new", True, None, None, None),
    ]
    assert found[-1].connection is None
    assert {c.queue for c in found} == {"jobs"}


@pytest.mark.parametrize(
    ("path", "answer", "what"),
    [
        pytest.param(
            QUEUE_CONSUMERS_PATH, Answer.json({}), "not a list of consumers", id="not-a-list"
        ),
        pytest.param(
            QUEUE_CONSUMERS_PATH,
            Answer.json([{"queue": {"name": "q"}, "consumer_tag": "t", "ack_required": True}]),
            "a consumer without",
            id="no-channel-details",
        ),
        pytest.param(
            QUEUE_CONSUMERS_PATH,
            Answer.json(
                [
                    {
                        "queue": {"name": "q"},
                        "consumer_tag": "t",
                        "ack_required": True,
                        "channel_details": {"connection_name": 7},
                    }
                ]
            ),
            "a consumer without",
            id="connection-not-a-text",
        ),
        pytest.param(
            QUEUE_CONSUMERS_PATH,
            Answer.json(
                [
                    {
                        "queue": {"name": "q"},
                        "consumer_tag": "t",
                        "ack_required": "yes",
                        "channel_details": {"connection_name": "c"},
                    }
                ]
            ),
            "a consumer without",
            id="ack-required-a-text",
        ),
        pytest.param(
            CONNECTIONS_PATH,
            Answer.json([{"client_properties": {}}]),
            "not a list of connections",
            id="connection-without-a-name",
        ),
        pytest.param(
            CONNECTIONS_PATH,
            Answer.json([{"name": "c", "client_properties": ["rr"]}]),
            "not a list of connections",
            id="properties-not-an-object",
        ),
    ],
)
async def test_a_consumers_answer_of_the_wrong_shape_is_exit_69(
    api: FakeManagement, path: str, answer: Answer, what: str
) -> None:
    api.answer(QUEUE_CONSUMERS_PATH, Answer.json([]))
    api.answer(CONNECTIONS_PATH, Answer.json([]))
    api.answer(path, answer)

    with pytest.raises(BrokerUnreachable) as caught:
        await _client(api).consumers()

    assert exit_code_for(caught.value) == 69
    assert f"gave an unexpected answer to GET {path} ({what}" in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("answer", "default"),
    [
        pytest.param({"name": "shop", "default_queue_type": "quorum"}, "quorum", id="quorum"),
        pytest.param({"name": "shop", "default_queue_type": "classic"}, "classic", id="classic"),
        pytest.param({"name": "shop"}, None, id="none-stated"),
        pytest.param({"name": "shop", "default_queue_type": None}, None, id="null"),
        # RabbitMQ 3.10.8 for a vhost made without one (measured: tests/cluster/
        # test_vhost_default_queue_type.py)
        pytest.param(
            {"name": "shop", "default_queue_type": "undefined"}, None, id="undefined-3.10"
        ),
    ],
)
async def test_the_vhosts_default_queue_type_is_read(
    api: FakeManagement, answer: dict[str, Any], default: str | None
) -> None:
    api.answer(VHOST_PATH, Answer.json(answer))
    assert await _client(api).vhost_default_queue_type() == default


@pytest.mark.parametrize(
    "answer",
    [[], {"default_queue_type": 1}, {"default_queue_type": "quo\x1brum"}],
    ids=["a-list", "a-number", "a-control-character"],
)
async def test_a_vhost_answer_of_the_wrong_shape_is_exit_69(
    api: FakeManagement, answer: Any
) -> None:
    api.answer(VHOST_PATH, Answer.json(answer))
    with pytest.raises(BrokerUnreachable) as caught:
        await _client(api).vhost_default_queue_type()
    assert exit_code_for(caught.value) == 69
    assert f"gave an unexpected answer to GET {VHOST_PATH}" in str(caught.value)
