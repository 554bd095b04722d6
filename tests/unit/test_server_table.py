"""The suite's one table of servers (tests/shared_node.py; docs/reference/testing.md, "Three
servers"): what each line is, how the environment points the suite at a contributor's own servers,
which lines a run tests on, and that scripts/rabbitmq-chroot.sh builds the nodes the table names."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.backends import EMULATED
from tests.shared_node import DEFAULT_BROKERS, REPO, chosen_versions, servers

SCRIPT = REPO / "scripts" / "rabbitmq-chroot.sh"


def test_the_table_has_three_lines_each_with_its_release_node_and_url() -> None:
    table = servers({})
    assert {
        version: (broker.release, broker.node, broker.url) for version, broker in table.items()
    } == {
        "3.10": ("3.10.8", "rabbit@localhost", "amqp://guest:guest@127.0.0.1:5672/"),
        "4.0": ("4.0.5", "rabbit4@localhost", "amqp://guest:guest@127.0.0.1:5674/"),
        "4.3": ("4.3.6", "rabbit43@localhost", "amqp://guest:guest@127.0.0.1:5675/"),
    }
    assert [(broker.major, broker.minor) for broker in table.values()] == [
        (3, 10),
        (4, 0),
        (4, 3),
    ]
    assert table["3.10"].ctl("list_vhosts") == [
        "rabbitmqctl",
        "-n",
        "rabbit@localhost",
        "list_vhosts",
    ]
    assert table["4.3"].ctl("list_vhosts") == [
        str(REPO / "scripts" / "rabbitmq43.sh"),
        "ctl-raw",
        "-n",
        "rabbit43@localhost",
        "list_vhosts",
    ]
    assert table["3.10"].chroot is None
    assert table["4.3"].chroot == Path("/var/tmp/rr-rabbitmq43")


def test_the_environment_points_a_line_at_a_server_of_ones_own() -> None:
    table = servers(
        {
            "RR_TEST_URL_4_3": "amqp://me:pw@mq43.example:5680/ci",
            "RR_TEST_NODE_4_3": "rabbit@mq43",
            "RR_TEST_CTL_4_3": "ssh mq43 'sudo rabbitmqctl'",
            "RR_RABBITMQ43_ROOT": "/srv/sid",
        }
    )
    broker = table["4.3"]
    assert broker.url == "amqp://me:pw@mq43.example:5680/ci"
    assert broker.vhost == "ci"
    assert broker.ctl("-q", "list_queues") == [
        "ssh",
        "mq43",
        "sudo rabbitmqctl",
        "-n",
        "rabbit@mq43",
        "-q",
        "list_queues",
    ]
    assert broker.chroot == Path("/srv/sid")
    assert table["4.0"] == servers({})["4.0"]  # the others keep their defaults


def test_the_older_variable_names_still_work_and_the_new_ones_win() -> None:
    older = servers(
        {
            "RR_TEST_URL": "amqp://u:p@old310:5672/",
            "RR_TEST_NODE": "rabbit@old310",
            "RR_TEST_URL_4": "amqp://u:p@old40:5672/",
        }
    )
    assert (older["3.10"].url, older["3.10"].node) == ("amqp://u:p@old310:5672/", "rabbit@old310")
    assert older["4.0"].url == "amqp://u:p@old40:5672/"
    newer = servers({"RR_TEST_URL": "amqp://u:p@old:5672/", "RR_TEST_URL_3_10": "amqp://new/"})
    assert newer["3.10"].url == "amqp://new/"


def test_rr_test_brokers_picks_the_lines_and_refuses_one_the_table_lacks() -> None:
    assert chosen_versions({}) == list(DEFAULT_BROKERS) == ["3.10", "4.0", "4.3"]
    assert chosen_versions({"RR_TEST_BROKERS": "3.10, 4.0,4.3"}) == ["3.10", "4.0", "4.3"]
    assert chosen_versions({"RR_TEST_BROKERS": "4.3"}) == ["4.3"]
    with pytest.raises(pytest.UsageError, match=r"'4\.1'.*knows the servers 3\.10, 4\.0, 4\.3"):
        chosen_versions({"RR_TEST_BROKERS": "3.10,4.1"})


def test_the_emulator_stands_in_for_the_default_lines_and_the_chosen_ones() -> None:
    assert {"3.10", "4.0"} <= set(EMULATED)
    assert set(chosen_versions()) <= set(EMULATED)
    assert {version: str(release) for version, release in EMULATED.items()} == {
        version: broker.release for version, broker in servers({}).items() if version in EMULATED
    }


def _script_entry(release: str) -> dict[str, str]:
    """The variables the chroot script sets for ``release`` (its ``case`` arm)."""
    text = SCRIPT.read_text()
    arm = re.search(rf"^  {re.escape(release)}\)\n(.*?)\n    ;;$", text, re.MULTILINE | re.DOTALL)
    assert arm is not None, f"no case arm for {release} in {SCRIPT}"
    return dict(re.findall(r'^    ([A-Z_]+)="?([^"\n]*)"?$', arm.group(1), re.MULTILINE))


def test_the_chroot_script_builds_the_nodes_the_table_names() -> None:
    listed = subprocess.run(
        ["bash", str(SCRIPT), "releases"], capture_output=True, text=True, check=True
    ).stdout.split()
    table = servers({})
    assert listed == [version for version, broker in table.items() if broker.chroot is not None]
    for release in listed:
        broker = table[release]
        entry = _script_entry(release)
        assert entry["NODE"] == broker.node
        assert int(entry["PORT"]) == urlsplit(broker.url).port
        assert entry["ROOT"].endswith(f":-{broker.chroot}}}")
        assert broker.script is not None
        wrapper = (REPO / broker.script).read_text()
        assert f'rabbitmq-chroot.sh" {release} "$@"' in wrapper
