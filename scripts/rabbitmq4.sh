#!/usr/bin/env bash
# RabbitMQ 4.0.5 for the tests (node rabbit4@localhost, 127.0.0.1:5674): scripts/rabbitmq-chroot.sh
# for release 4.0, where the chroot logic and the table of servers are (docs/reference/testing.md,
# "Three servers").
#
#   scripts/rabbitmq4.sh            build if needed, start if needed, wait until it is up
#   scripts/rabbitmq4.sh ctl ARGS   run rabbitmqctl -n rabbit4@localhost ARGS inside the chroot
#   scripts/rabbitmq4.sh ctl-raw ARGS   run rabbitmqctl ARGS inside the chroot (ARGS name the node)
#   scripts/rabbitmq4.sh stop       stop the node (the chroot stays)
#
# RR_RABBITMQ4_ROOT overrides the chroot's folder (default /var/tmp/rr-rabbitmq4).
exec "$(dirname "$0")/rabbitmq-chroot.sh" 4.0 "$@"
