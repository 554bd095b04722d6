"""``rr asyncapi``: the service's contract as an AsyncAPI 3.0 document (docs/reference/topology.md,
"The contract"): document.py (pure: the topology and the handlers' queues and messages in,
the document out), schemas.py (the JSON schema of each handler's message type), yaml_text.py
(pure: the document as YAML, no YAML library needed)."""
