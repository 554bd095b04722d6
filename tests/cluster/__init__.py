"""Tests on a local three-node RabbitMQ 3.10 cluster (``scripts/cluster.sh``)."""
