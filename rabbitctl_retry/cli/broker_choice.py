"""Which broker a command talks to: ``--url`` / ``$RR_URL``, ``--broker NAME`` /
``$RR_BROKER`` (a profile of rr's configuration file), the topology's ``[broker] url``, the
file's ``default`` profile, else the local default; and ``--vhost`` over all of them
(docs/reference/cli.md, "Profiles").

Every command that takes ``--url`` also takes ``--broker`` and ``--vhost``:
:func:`add_broker_options` adds them to each such command when it is loaded
(``cli/lazy.py``), so no command repeats them. Their values go in the click context; the URL
resolution (``cli/_common.py`` :func:`resolve_urls`, :func:`resolve_management_url`) reads
them there. This module reads the configuration file and the password (from the environment
or a file); what the file means is ``profiles.py``'s.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from typer import _click
from typer.core import TyperGroup

from rabbitctl_retry.errors import ConfigError, UsageError, escape_unprintable
from rabbitctl_retry.profiles import (
    Config,
    Profile,
    parse_config,
    profile_management_url,
    profile_urls,
)
from rabbitctl_retry.urls import vhost_problem
from rabbitctl_retry.user_files import (
    CONFIG_FILE_LIMIT_BYTES,
    PASSWORD_FILE_LIMIT_BYTES,
    FileRefused,
    read_text,
)

BROKER_ENV = "RR_BROKER"
CONFIG_ENV = "RR_CONFIG"
_META = "rabbitctl_retry.broker_choice"


@dataclass(frozen=True, slots=True)
class Choice:
    """What the command line said about the broker besides ``--url``."""

    broker: str | None = None
    broker_from_env: bool = False
    vhost: str | None = None


@dataclass(frozen=True, slots=True)
class FromFile:
    """A profile of the configuration file, and the file (what its messages name)."""

    profile: Profile
    path: Path

    def urls(self) -> tuple[str, ...]:
        """The profile's broker URLs, with its password (:func:`password_of`)."""
        return profile_urls(self.profile, password=password_of(self.profile, self.path))

    def management_url(self) -> str | None:
        """The profile's management URL, with its password; None when it names none."""
        if self.profile.management_url is None:
            return None
        password = password_of(self.profile, self.path)
        return profile_management_url(self.profile, password=password)


@dataclass(frozen=True, slots=True)
class Picked:
    """Where a command's broker URLs come from: ``urls`` as given (by the command line, the
    environment or the topology), or a profile of the configuration file; neither: the
    built-in default."""

    urls: tuple[str, ...] = ()
    from_file: FromFile | None = None


def config_path() -> Path:
    """``$RR_CONFIG``, else ``$XDG_CONFIG_HOME/rr/config.toml``, else
    ``~/.config/rr/config.toml``."""
    named = os.environ.get(CONFIG_ENV)
    if named:
        return Path(named)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rr" / "config.toml"


def load_config(path: Path) -> Config | None:
    """The configuration file at ``path``; None when there is none (and ``$RR_CONFIG`` did
    not name it); :class:`ConfigError` (exit 78) naming the file for a bad one: not a
    regular file, over :data:`CONFIG_FILE_LIMIT_BYTES`, not TOML, nested too deep
    (docs/reference/cli.md, "Files rr reads")."""
    import tomllib

    source = str(path)
    try:
        text = read_text(path, limit_bytes=CONFIG_FILE_LIMIT_BYTES)
    except FileRefused as refused:
        if refused.missing:
            if os.environ.get(CONFIG_ENV):
                raise ConfigError(f"${CONFIG_ENV} names {path}, which does not exist") from None
            return None
        raise ConfigError(refused.reason, source=source, line=refused.line) from None
    try:
        return parse_config(tomllib.loads(text))
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(str(error), source=source) from None
    except RecursionError:
        raise ConfigError(
            "not valid TOML for rr: arrays or inline tables nest too deep", source=source
        ) from None
    except ValueError:
        # tomllib reads integers with int(), which refuses more than 4300 digits
        raise ConfigError(
            "not valid TOML for rr: a number of thousands of digits", source=source
        ) from None
    except ConfigError as error:
        raise error.located(source=source) from None


def password_of(profile: Profile, source: Path) -> str | None:
    """The profile's password: the first line of its ``password_file`` (a regular file of at
    most :data:`PASSWORD_FILE_LIMIT_BYTES`) or the value of its ``password_env``; None when it
    names neither (the URL holds the password, or none)."""
    if profile.password_env is not None:
        value = os.environ.get(profile.password_env)
        if value is None:
            raise ConfigError(
                f"${profile.password_env} is not set (it holds this broker's password)",
                path=f"{profile.key}.password_env",
                source=str(source),
            )
        return value
    if profile.password_file is not None:
        named = Path(profile.password_file).expanduser()
        try:
            lines = read_text(named, limit_bytes=PASSWORD_FILE_LIMIT_BYTES).splitlines()
        except FileRefused as refused:
            raise ConfigError(
                f"the password file {escape_unprintable(str(named))}: {refused.reason}",
                path=f"{profile.key}.password_file",
                source=str(source),
            ) from None
        return lines[0] if lines else ""
    return None


def current_choice() -> Choice:
    """What ``--broker`` / ``$RR_BROKER`` and ``--vhost`` say in the running command."""
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    if ctx is None:
        return Choice()
    values: dict[str, Any] = ctx.meta.get(_META, {})
    broker = values.get("broker")
    return Choice(
        broker=broker,
        broker_from_env=ctx.get_parameter_source("broker") is ParameterSource.ENVIRONMENT,
        vhost=values.get("vhost"),
    )


def pick(
    given: Sequence[str], *, from_env: bool, choice: Choice, topology_urls: Sequence[str]
) -> Picked:
    """Where the broker URLs come from (see the module doc); :class:`UsageError` for
    ``--url`` with ``--broker``, or ``$RR_URL`` with ``$RR_BROKER``."""
    url_flag, url_env = bool(given) and not from_env, bool(given) and from_env
    broker_flag = choice.broker is not None and not choice.broker_from_env
    broker_env = choice.broker is not None and choice.broker_from_env
    if url_flag and broker_flag:
        raise UsageError("give --url or --broker, not both")
    if url_env and broker_env:
        raise UsageError(
            f"$RR_URL and ${BROKER_ENV} are both set: unset one (or give --url or --broker)"
        )
    if url_flag or (url_env and not broker_flag):
        return Picked(urls=tuple(given))
    if choice.broker is not None:
        return _named(choice.broker, from_env=broker_env)
    if topology_urls:
        return Picked(urls=tuple(topology_urls))
    path = config_path()
    config = load_config(path)
    if config is not None and config.default is not None:
        return Picked(from_file=FromFile(config.profiles[config.default], path))
    return Picked()


def _named(name: str, *, from_env: bool) -> Picked:
    path = config_path()
    config = load_config(path)
    given_by = f"${BROKER_ENV}" if from_env else "--broker"
    if config is None:
        raise UsageError(
            f"{given_by} {name!r}: there is no configuration file {path} "
            "(its brokers: rr docs cli 'Profiles')"
        )
    if name not in config.profiles:
        known = ", ".join(sorted(config.profiles)) or "none"
        raise UsageError(f"{given_by} {name!r}: {path} has no such broker (it has {known})")
    return Picked(from_file=FromFile(config.profiles[name], path))


def _keep(ctx: _click.Context, param: _click.Parameter, value: Any) -> Any:
    if value is not None and param.name is not None:
        ctx.meta.setdefault(_META, {})[param.name] = value
    return value


def _check_vhost(ctx: _click.Context, param: _click.Parameter, value: Any) -> Any:
    check_vhost_option(value)
    return _keep(ctx, param, value)


def check_vhost_option(value: str | None) -> str | None:
    """``--vhost``'s value, or a usage error (exit 2) saying why it cannot be a vhost's name
    (docs/reference/cli.md, "Malformed input"); typer's callback for every ``--vhost``."""
    problem = None if value is None else vhost_problem(str(value))
    if problem is not None:
        raise typer.BadParameter(problem)
    return value


def _broker_options(
    broker: Annotated[
        str | None,
        typer.Option(
            "--broker",
            "-b",
            envvar=BROKER_ENV,
            metavar="NAME",
            expose_value=False,
            callback=_keep,
            show_default=False,
            help="A broker of rr's configuration file (~/.config/rr/config.toml): its URLs, "
            "management URL, vhost and password (rr docs cli 'Profiles'). Else $RR_BROKER.",
        ),
    ] = None,
    vhost: Annotated[
        str | None,
        typer.Option(
            "--vhost",
            metavar="VHOST",
            expose_value=False,
            callback=_check_vhost,
            show_default=False,
            help="The virtual host, whatever the broker URL says (its path).",
        ),
    ] = None,
) -> None:
    """The options :func:`add_broker_options` gives (typer builds them from this
    signature)."""


def add_broker_options(command: _click.Command) -> _click.Command:
    """Give ``command``, and each command under it that takes ``--url``, the options
    ``--broker`` and ``--vhost`` (see the module doc); returns it."""
    if isinstance(command, TyperGroup):
        for child in command.commands.values():
            add_broker_options(child)
    if any(param.name == "url" for param in command.params):
        template = typer.Typer(add_completion=False, rich_markup_mode=None)
        template.command()(_broker_options)
        command.params.extend(typer.main.get_command(template).params)
    return command


__all__ = [
    "BROKER_ENV",
    "CONFIG_ENV",
    "Choice",
    "FromFile",
    "Picked",
    "add_broker_options",
    "check_vhost_option",
    "config_path",
    "current_choice",
    "load_config",
    "password_of",
    "pick",
]
