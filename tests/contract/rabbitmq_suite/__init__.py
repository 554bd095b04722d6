"""RabbitMQ's own Common Test suites, ported as contract scenarios (issue 15).

Each module ports one suite of rabbitmq-server's ``deps/rabbit/test/``: its scenarios (what is
published and settled, what each queue then holds, in which order, with which headers), run
through the transport port on the emulator and on the real RabbitMQ 3.10 and 4.0
(tests/contract/conftest.py). Each test is named after its Erlang case and cites it.

* test_dead_lettering.py: ``dead_lettering_SUITE.erl``
* test_quorum_queue.py: ``quorum_queue_SUITE.erl``

The two tables below are shared by both modules; add entries, never remove another module's.
Keys are namespaced so that a case or test name two suites share cannot collide:

* :data:`NOT_PORTED`: ``"SUITE:case"`` (e.g. ``"dead_lettering_SUITE:dead_letter_policy"``)
  -> why the case is not ported (not observable over AMQP 0-9-1, needs a plugin, ...);
  ``"SUITE/group"`` -> why a whole group (its queue kind) is not (the cases run on the
  suite's other groups).
* :data:`EMULATOR_GAPS`: ``"module.py::test_name"`` (every emulator parametrization of the
  test) or ``"module.py::test_name[fragment]"`` (the emulator parametrizations whose id
  contains ``fragment``, e.g. ``[emulator-4.0-quorum]`` or ``[quorum-at-least-once]``) -> how
  the emulator differs from the server there: what the server does, what the emulator does.
  rabbitmq_suite/conftest.py marks those tests ``xfail(strict=True)`` for their emulator
  parametrizations only (the same test must pass on the servers): when the emulator is fixed
  they XPASS, fail, and the entry must go.
"""

from __future__ import annotations

NOT_PORTED: dict[str, str] = {
    # "dead_lettering_SUITE:<case>" / "quorum_queue_SUITE:<case>": "reason"
    # -- dead_lettering_SUITE (test_dead_lettering.py) --
    "dead_lettering_SUITE:dead_letter_policy": "dead-letter-exchange and "
    "dead-letter-routing-key set by a policy on a queue that holds an unacked message: "
    "policies need rabbitmqctl or the management API, and the emulator has no policies",
    "dead_lettering_SUITE:dead_letter_override_policy": "queue arguments override a "
    "dead-letter policy: needs policies, which the emulator does not have",
    "dead_lettering_SUITE:dead_letter_ignore_policy": "a dead-letter policy set after the "
    "queue was declared with dead-letter arguments is ignored: needs policies, which the "
    "emulator does not have",
    "dead_lettering_SUITE:dead_letter_extra_bcc": "sets the internal queue option extra_bcc "
    "by RPC (amqqueue:set_options, rabbit_amqqueue:update); no AMQP 0-9-1 method, argument or "
    "policy sets it",
    "dead_lettering_SUITE/mirrored_queue": "classic queue mirroring (an ha-mode policy) is "
    "deprecated since RabbitMQ 3.9 and removed in 4.0, and needs a policy, which the emulator "
    "does not have; the group's policy pattern (^max_length.*queue) matches none of the "
    "cases' queue names anyway, so they ran on plain classic queues, as classic_queue does",
}

EMULATOR_GAPS: dict[str, str] = {
    # "test_dead_lettering.py::<test>" / "test_quorum_queue.py::<test>": "server vs emulator"
    # -- dead_lettering_SUITE (test_dead_lettering.py): none left --
}

# -- quorum_queue_SUITE (test_quorum_queue.py) ------------------------------------------------
# The cases not ported, grouped by reason; every case of the suite's groups is in
# test_quorum_queue.QUORUM_QUEUE_CASES, and a test there checks each is ported or listed here.

_QQ_NOT_PORTED: dict[str, tuple[str, ...]] = {
    "needs several nodes (a clustered group of the suite: members added or removed, nodes "
    "stopped, leaders elected, transferred or located, partitions, replicas placed); there "
    "is one node per server here": (
        "add_member",
        "add_member_2",
        "add_member_not_running",
        "add_member_classic",
        "add_member_wrong_type",
        "add_member_already_a_member",
        "add_member_not_found",
        "delete_member_not_running",
        "delete_member_classic",
        "delete_member_wrong_type",
        "delete_member_queue_not_found",
        "delete_member",
        "delete_member_not_a_member",
        "delete_member_member_already_deleted",
        "cleanup_data_dir",
        "channel_handles_ra_event",
        "declare_during_node_down",
        "simple_confirm_availability_on_leader_change",
        "publishing_to_unavailable_queue",
        "confirm_availability_on_leader_change",
        "recover_from_single_failure",
        "recover_from_multiple_failures",
        "leadership_takeover",
        "delete_member_during_node_down",
        "metrics_cleanup_on_leadership_takeover",
        "metrics_cleanup_on_leader_crash",
        "consume_in_minority",
        "reject_after_leader_transfer",
        "shrink_all",
        "rebalance",
        "node_removal_is_not_quorum_critical",
        "leader_locator_client_local",
        "leader_locator_balanced",
        "leader_locator_balanced_maintenance",
        "leader_locator_balanced_random_maintenance",
        "leader_locator_policy",
        "status",
        "force_shrink_member_to_current_member",
        "force_all_queues_shrink_member_to_current_member",
        "force_vhost_queues_shrink_member_to_current_member",
        "policy_repair",
        "gh_12635",
        "replica_states",
        "start_queue_concurrent",
        "quorum_cluster_size_3",
        "quorum_cluster_size_7",
        "select_nodes_with_least_replicas",
        "select_nodes_with_least_replicas_node_down",
        "reconnect_consumer_and_publish",
        "reconnect_consumer_and_wait",
        "reconnect_consumer_and_wait_channel_down",
    ),
    "restarts the node or the rabbit application (stop_node/start_node, stop_app/start_app) "
    "and counts ra processes through rpc; tests do not restart the shared servers": (
        "restart_queue",
        "restart_all_types",
        "stop_start_rabbit_app",
        "publish_and_restart",
    ),
    "observes or changes broker internals through rpc (ra processes and supervisors, "
    "rabbit_fifo state, the ra directory, ETS metrics, channel queue states, WAL files and "
    "memory alarms, rabbit_quorum_queue functions): nothing an AMQP 0-9-1 client sees": (
        "stop_queue",
        "cleanup_queue_state_on_channel_after_publish",
        "cleanup_queue_state_on_channel_after_subscribe",
        "idempotent_recover",
        "server_system_recover",
        "vhost_with_quorum_queue_is_deleted",
        "message_bytes_metrics",
        "peek",
        "oldest_entry_timestamp",
        "peek_with_wrong_queue_type",
        "subscribe_from_each",
        "leader_health_check",
        "memory_alarm_rolls_wal",
        "reclaim_memory_with_wrong_queue_type",
        "node_removal_is_quorum_critical",
        "format",
    ),
    "needs a policy or an operator policy (set and cleared with rabbitmqctl by the suite's "
    "helpers): only the transport port talks to the broker here, and the emulator has no "
    "policies (the -1 delivery limit of subscribe_redelivery_limit_disable is "
    "tests/contract/test_quorum.py::test_negative_delivery_limit)": (
        "dead_letter_policy",
        "queue_length_limit_policy_cleared",
        "subscribe_redelivery_policy",
        "subscribe_redelivery_limit_disable",
        "invalid_policy",
        "pre_existing_invalid_policy",
        "message_ttl_policy",
    ),
    "needs a node-wide setting changed through rpc (application:set_env: "
    "quorum_relaxed_checks_on_redeclaration, default_queue_type) or a vhost made through rpc "
    "with a default queue type (rabbit_vhost:add); the shared servers keep their settings": (
        "relaxed_argument_equivalence_checks_on_qq_redeclare",
        "vhost_with_default_queue_type_declares_quorum_queue",
        "node_wide_default_queue_type_declares_quorum_queue",
    ),
    "a rabbitmqctl command (sync_queue, cancel_sync_queue, eval of "
    "rabbit_amqqueue:delete_immediately_by_resource), not AMQP 0-9-1": (
        "sync_queue",
        "cancel_sync_queue",
        "delete_immediately_by_resource",
    ),
    "the transport port cannot send it: its basic.qos has no global flag": (
        "subscribe_should_fail_when_global_qos_true",
    ),
}
NOT_PORTED.update(
    {
        f"quorum_queue_SUITE:{case}": reason
        for reason, cases in _QQ_NOT_PORTED.items()
        for case in cases
    }
)

# -- quorum_queue_SUITE: no emulator gap left (the last, 3.10's order of a multiple nack's
# returns, is modelled: emulator/erlang_maps.py) --
