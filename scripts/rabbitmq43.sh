#!/usr/bin/env bash
# RabbitMQ 4.3.6 for the tests (node rabbit43@localhost, 127.0.0.1:5675, management API on
# 127.0.0.1:15675): scripts/rabbitmq-chroot.sh for release 4.3, where the chroot logic and the
# table of servers are (docs/reference/testing.md, "Three servers").
#
#   scripts/rabbitmq43.sh            build if needed, start if needed, wait until it is up
#   scripts/rabbitmq43.sh ctl ARGS   run rabbitmqctl -n rabbit43@localhost ARGS inside the chroot
#   scripts/rabbitmq43.sh ctl-raw ARGS   run rabbitmqctl ARGS inside the chroot (ARGS name the node)
#   scripts/rabbitmq43.sh stop       stop the node (the chroot stays)
#
# RR_RABBITMQ43_ROOT overrides the chroot's folder (default /var/tmp/rr-rabbitmq43).
exec "$(dirname "$0")/rabbitmq-chroot.sh" 4.3 "$@"
