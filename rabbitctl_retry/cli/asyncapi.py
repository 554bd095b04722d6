"""``rr asyncapi MODULE[:ATTR] --topology T [-o yaml|json] [--out FILE]``: the service's
contract as an AsyncAPI 3.0.0 document (docs/reference/cli.md, "rr asyncapi";
docs/reference/topology.md, "The contract")."""

from __future__ import annotations

import inspect
from enum import StrEnum
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.finish import Outcome, Raw, finish
from rabbitctl_retry.cli.output import writing_to
from rabbitctl_retry.errors import UsageError

if TYPE_CHECKING:
    from rabbitctl_retry.asyncapi.document import Output
    from rabbitctl_retry.asyncapi.schemas import Schemas
    from rabbitctl_retry.topology.model import Topology


class ContractFormat(StrEnum):
    YAML = "yaml"
    JSON = "json"


DEFAULT_VERSION = "0.0.0"
"""``info.version`` when neither ``--api-version`` nor the module's ``__version__`` says."""


NO_TOPOLOGY = "give --topology FILE (or run it where a topology.toml is)"


def _topology(topology_file: Path | None) -> Topology:
    """``--topology``'s file, else ``./topology.toml`` found in the current directory
    (``cli/_common.py`` :func:`topology_of`); neither: a usage error (exit 2)."""
    topology = common.topology_of(topology_file, no_topology=False)
    if topology is None:
        with common.guard():
            raise UsageError(NO_TOPOLOGY)
    return topology


def asyncapi_command(
    target: Annotated[
        str,
        typer.Argument(
            help="module, module:handler, or path/to/file.py[:handler] with @subscriber handlers."
        ),
    ],
    topology_file: Annotated[
        Path | None,
        common.topology_option("The topology file with the queues' retry policies."),
    ] = None,
    output: Annotated[
        ContractFormat,
        common.output_option(ContractFormat, "yaml (the default) or json"),
    ] = ContractFormat.YAML,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Write the document to FILE (replaced) instead of stdout.", metavar="FILE"
        ),
    ] = None,
    title: Annotated[
        str | None,
        typer.Option("--title", metavar="TEXT", help="info.title (default: the module's name)."),
    ] = None,
    api_version: Annotated[
        str | None,
        typer.Option(
            "--api-version",
            metavar="TEXT",
            help=f"info.version (default: the module's __version__, else {DEFAULT_VERSION}).",
        ),
    ] = None,
    send: Annotated[
        list[str] | None,
        typer.Option(
            "--send",
            metavar="QUEUE",
            help="QUEUE[=TYPE]: a queue the handlers publish to (their outputs), a channel "
            "with a send operation; TYPE, a name in the handlers' module, is what they "
            "publish there (its schema). Give it once per queue.",
        ),
    ] = None,
    server_urls: Annotated[
        list[str] | None,
        typer.Option(
            "--url",
            help="The broker URL for servers (host and vhost; never the password); give it "
            "once per node. Default: [broker] url. Not $RR_URL nor a --broker profile: the "
            "document names the service's broker, not the one this shell talks to.",
            show_default=False,
            metavar="URL",
        ),
    ] = None,
) -> None:
    """Write the service's contract as an AsyncAPI 3.0.0 document: its queues as channels,
    a receive operation for each with RustStream's x-ruststream-retry, the dead letters, the
    message schemas of typed handlers."""
    from rabbitctl_retry.asyncapi.document import Consumer, Service, document
    from rabbitctl_retry.asyncapi.schemas import Schemas
    from rabbitctl_retry.runtime.invocation import message_type_of
    from rabbitctl_retry.runtime.loader import load_target
    from rabbitctl_retry.transport.url import parse_broker_url

    topology = _topology(topology_file)
    with common.guard():
        handlers = load_target(target)
        schemas = Schemas()
        consumers = []
        for item in handlers.subscribers:
            hint = message_type_of(item.written, name=item.name)
            where = f"the first parameter of {item.name}"
            consumers.append(Consumer(item.queue, item.name, schemas.message(hint, where=where)))
        urls = tuple(server_urls) if server_urls else topology.broker.urls
        for each in urls:
            try:
                parse_broker_url(each)
            except UsageError as error:
                raise UsageError(f"--url: {error}") from None
        module = _module(handlers.module)
        service = Service(
            title=title or handlers.module,
            version=api_version or _module_version(module) or DEFAULT_VERSION,
            description=_first_paragraph(module),
            topology=topology,
            consumers=tuple(consumers),
            sends=tuple(_output(spec, module, schemas) for spec in send or ()),
            schemas=schemas.named,
            urls=urls,
        )
        built = document(service)
        text = _text(built, output)
        if out is not None:
            with writing_to(str(out)):
                out.write_text(text, encoding="utf-8")
            return
    finish(Outcome(table=lambda: [Raw([text])]))


def _output(spec: str, module: ModuleType | None, schemas: Schemas) -> Output:
    """``--send QUEUE[=TYPE]``: the queue, and the schema of ``TYPE``, a name in the
    handlers' module; a :class:`UsageError` (exit 2) for a name it does not have."""
    from rabbitctl_retry.asyncapi import document as contract

    queue, equals, name = spec.partition("=")
    if not queue:
        raise UsageError(f"--send {spec!r}: name a queue (QUEUE or QUEUE=TYPE)")
    if not equals:
        return contract.Output(queue)
    found = getattr(module, name, None) if name else None
    if found is None:
        where = module.__name__ if module is not None else "the handlers' module"
        raise UsageError(f"--send {spec!r}: {where} has no {name!r} (TYPE is a name in it)")
    return contract.Output(queue, schemas.message(found, where=f"--send {spec}"))


def _text(built: dict[str, Any], output: ContractFormat) -> str:
    if output is ContractFormat.JSON:
        from rabbitctl_retry.json_text import json_chunks

        return "".join(json_chunks(built)) + "\n"
    from rabbitctl_retry.asyncapi.yaml_text import yaml_text

    return yaml_text(built)


def _module(name: str) -> ModuleType | None:
    import sys

    return sys.modules.get(name)


def _module_version(module: ModuleType | None) -> str | None:
    version = getattr(module, "__version__", None)
    return version if isinstance(version, str) and version else None


def _first_paragraph(module: ModuleType | None) -> str | None:
    text = inspect.getdoc(module) if module is not None else None
    if not text:
        return None
    return " ".join(text.split("\n\n")[0].split()) or None
