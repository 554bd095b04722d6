"""One ``rabbitmqctl eval`` that deletes and makes vhosts: each run of the CLI starts an Erlang
VM (about half a second of CPU), and the suite would otherwise run three for every vhost of a
test (``add_vhost``, ``set_permissions``, ``delete_vhost``)."""

from __future__ import annotations

ACTING_USER = "rr-tests"
"""Who the server's log says made and deleted the vhosts."""

ALL_DONE = "{[],[]}"
"""What :func:`vhost_batch` prints (with ``-q``) when every deletion and making succeeded."""


def erlang_binary(text: str) -> str:
    """``text`` as an Erlang binary of its UTF-8 bytes: ``<<103,117,...>>`` (no quotes for a
    shell or ``rabbitmqctl``'s wrapper to mangle)."""
    return "<<" + ",".join(str(byte) for byte in text.encode()) + ">>"


def erlang_list(names: list[str]) -> str:
    return "[" + ",".join(erlang_binary(name) for name in names) + "]"


def vhost_batch(user: str, *, delete: list[str], make: list[str]) -> str:
    """The expression that deletes the vhosts ``delete`` and makes the vhosts ``make``, ``user``
    with full permissions in each (rabbit_vhost:delete, rabbit_vhost:add, set_permissions:
    what ``delete_vhost``, ``add_vhost`` and ``set_permissions`` call). It evaluates to
    ``{FailedDeletions, FailedMakings}``: :data:`ALL_DONE` when all went well."""
    return (
        f"A = {erlang_binary(ACTING_USER)}, U = {erlang_binary(user)}, P = <<46,42>>, "
        f"D = [{{V, R}} || V <- {erlang_list(delete)}, "
        "R <- [(catch rabbit_vhost:delete(V, A))], R =/= ok], "
        f"M = [{{V, R1, R2}} || V <- {erlang_list(make)}, "
        "R1 <- [(catch rabbit_vhost:add(V, A))], "
        "R2 <- [(catch rabbit_auth_backend_internal:set_permissions(U, V, P, P, P, A))], "
        "{R1, R2} =/= {ok, ok}], "
        "{D, M}."
    )
