"""Pure. rr's own configuration file: named brokers (profiles) a command picks with
``--broker NAME`` or ``$RR_BROKER`` (docs/reference/cli.md, "Profiles").

The file is TOML::

    default = "local"                 # optional: the broker when none is named

    [brokers.prod]
    url = ["amqps://ops@mq1.internal:5671/", "amqps://ops@mq2.internal:5671/"]
    management_url = "https://ops@mq1.internal:15671/"
    vhost = "payments"
    password_env = "RR_PROD_PASSWORD"  # or password_file = "/run/secrets/rr-prod"

    [brokers.prod.tls]
    ca_file = "/etc/rr/ca.pem"

This module turns the parsed document into :class:`Profile` values and a profile (with the
password its caller read) into the URLs rr connects with: the password percent-encoded into
each URL's user part, the vhost as each URL's path, the TLS files as the URL's query options
(docs/reference/cli.md, "Connecting"). Reading the file, the environment and a password file is the
caller's (``cli/broker_choice.py``). Every mistake is a :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from rabbitctl_retry.errors import ConfigError, UsageError
from rabbitctl_retry.urls import (
    AMQP_URL,
    MANAGEMENT_URL,
    UrlKind,
    parse_management_url,
    split_url,
    vhost_problem,
)

__all__ = [
    "Config",
    "Profile",
    "Tls",
    "parse_config",
    "profile_management_url",
    "profile_urls",
    "with_vhost",
]

_TOP_KEYS = frozenset({"default", "brokers"})
_PROFILE_KEYS = frozenset(
    {"url", "management_url", "vhost", "password_env", "password_file", "tls"}
)
_TLS_KEYS = {"ca_file": "cafile", "cert_file": "certfile", "key_file": "keyfile", "verify": ""}


@dataclass(frozen=True, slots=True)
class Tls:
    """A profile's ``[brokers.NAME.tls]``: files for ``amqps://`` URLs."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    """``false``: accept any certificate (the URL option ``no_verify_ssl=1``; tests only)."""

    def query_options(self) -> tuple[tuple[str, str], ...]:
        """The URL query options these settings are (docs/reference/cli.md, "Connecting")."""
        options = [
            (option, value)
            for option, value in (
                ("cafile", self.ca_file),
                ("certfile", self.cert_file),
                ("keyfile", self.key_file),
            )
            if value is not None
        ]
        if not self.verify:
            options.append(("no_verify_ssl", "1"))
        return tuple(options)


@dataclass(frozen=True, slots=True)
class Profile:
    """One ``[brokers.NAME]`` table."""

    name: str
    urls: tuple[str, ...]
    management_url: str | None = None
    vhost: str | None = None
    password_env: str | None = None
    """The environment variable that holds the password."""
    password_file: str | None = None
    """The file whose first line is the password."""
    tls: Tls = Tls()

    @property
    def key(self) -> str:
        """The profile's table in messages: ``brokers.prod``."""
        return f"brokers.{self.name}"


@dataclass(frozen=True, slots=True)
class Config:
    """The whole file: its profiles by name and the ``default`` one, if it names one."""

    profiles: Mapping[str, Profile]
    default: str | None = None


def parse_config(document: Mapping[str, Any]) -> Config:
    """The :class:`Config` a parsed TOML document holds; :class:`ConfigError` (its ``path``
    the key) for an unknown key, a wrong type, a bad URL or a ``default`` that names no
    broker."""
    _no_unknown(document, _TOP_KEYS, "")
    tables = document.get("brokers", {})
    if not isinstance(tables, Mapping):
        raise ConfigError("must be a table of [brokers.NAME] tables", path="brokers")
    profiles = {name: _profile(str(name), table) for name, table in tables.items()}
    default = document.get("default")
    if default is not None:
        if not isinstance(default, str):
            raise ConfigError("must be the name of a broker (a string)", path="default")
        if default not in profiles:
            raise ConfigError(f"names no broker of this file ({_names(profiles)})", path="default")
    return Config(profiles=MappingProxyType(profiles), default=default)


def profile_urls(profile: Profile, *, password: str | None) -> tuple[str, ...]:
    """The broker URLs ``profile`` connects with: ``password`` in each (after its user name),
    its vhost as each path, its TLS settings in each query; :class:`ConfigError` when a URL
    already holds what the profile adds."""
    where = f"{profile.key}.url"
    urls = tuple(
        _with_password(
            url, password, AMQP_URL, f"{where}[{index}]" if len(profile.urls) > 1 else where
        )
        for index, url in enumerate(profile.urls)
    )
    if profile.vhost is not None:
        urls = tuple(with_vhost(url, profile.vhost) for url in urls)
    options = profile.tls.query_options()
    if options:
        urls = tuple(_with_tls(url, options, profile) for url in urls)
    return urls


def profile_management_url(profile: Profile, *, password: str | None) -> str | None:
    """``profile``'s management URL with ``password`` after its user name, if it has one."""
    if profile.management_url is None:
        return None
    return _with_password(
        profile.management_url, password, MANAGEMENT_URL, f"{profile.key}.management_url"
    )


def with_vhost(url: str, vhost: str) -> str:
    """``url`` (a broker URL) with ``vhost`` as its path, percent-encoded (``/`` is ``/%2F``),
    its query kept."""
    scheme, _, rest = url.partition("://")
    authority, after = _split_authority(rest)
    _, question, query = after.partition("?")
    return f"{scheme}://{authority}/{urllib.parse.quote(vhost, safe='')}{question}{query}"


def _profile(name: str, table: Any) -> Profile:
    key = f"brokers.{name}"
    if not isinstance(table, Mapping):
        raise ConfigError("must be a table", path=key)
    _no_unknown(table, _PROFILE_KEYS, key)
    urls = table.get("url")
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
        raise ConfigError("must be a broker URL or a list of them", path=f"{key}.url")
    for index, url in enumerate(urls):
        _checked(url, AMQP_URL, f"{key}.url" if len(urls) == 1 else f"{key}.url[{index}]")
    management_url = _optional_text(table, "management_url", key)
    if management_url is not None:
        # every rule of a management URL, its query included (docs/reference/cli.md, "Profiles")
        try:
            parse_management_url(management_url)
        except UsageError as error:
            raise ConfigError(str(error), path=f"{key}.management_url") from None
    password_env = _optional_text(table, "password_env", key)
    password_file = _optional_text(table, "password_file", key)
    if password_env is not None and password_file is not None:
        raise ConfigError("give password_env or password_file, not both", path=key)
    return Profile(
        name=name,
        urls=tuple(urls),
        management_url=management_url,
        vhost=_vhost(table, key),
        password_env=password_env,
        password_file=password_file,
        tls=_tls(table.get("tls"), f"{key}.tls"),
    )


def _vhost(table: Mapping[str, Any], key: str) -> str | None:
    vhost = _optional_text(table, "vhost", key)
    problem = None if vhost is None else vhost_problem(vhost)
    if problem is not None:
        raise ConfigError(problem, path=f"{key}.vhost")
    return vhost


def _tls(table: Any, key: str) -> Tls:
    if table is None:
        return Tls()
    if not isinstance(table, Mapping):
        raise ConfigError("must be a table", path=key)
    _no_unknown(table, frozenset(_TLS_KEYS), key)
    verify = table.get("verify", True)
    if not isinstance(verify, bool):
        raise ConfigError("must be true or false", path=f"{key}.verify")
    return Tls(
        ca_file=_optional_text(table, "ca_file", key),
        cert_file=_optional_text(table, "cert_file", key),
        key_file=_optional_text(table, "key_file", key),
        verify=verify,
    )


def _optional_text(table: Mapping[str, Any], name: str, key: str) -> str | None:
    value = table.get(name)
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError("must be a non-empty string", path=f"{key}.{name}")
    return value


def _no_unknown(table: Mapping[str, Any], known: frozenset[str], key: str) -> None:
    for name in table:
        if name not in known:
            where = f"{key}.{name}" if key else str(name)
            raise ConfigError(f"unknown key (known: {', '.join(sorted(known))})", path=where)


def _checked(url: str, kind: UrlKind, key: str) -> None:
    try:
        split_url(url, kind)
    except UsageError as error:
        raise ConfigError(str(error), path=key) from None


def _split_authority(rest: str) -> tuple[str, str]:
    """``USER:PW@HOST:PORT`` and the rest (path, query) of a URL after its ``://``."""
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    return rest[:end], rest[end:]


def _with_password(url: str, password: str | None, kind: UrlKind, key: str) -> str:
    if password is None:
        return url
    if split_url(url, kind).userinfo is None:
        raise ConfigError(
            "names no user, so the password has no place: write USER@ before the host", path=key
        )
    scheme, _, rest = url.partition("://")
    authority, after = _split_authority(rest)
    userinfo, _, host_port = authority.rpartition("@")
    if ":" in userinfo:
        raise ConfigError(
            "holds a password, and the profile gives one too (password_env or "
            "password_file): keep one",
            path=key,
        )
    encoded = urllib.parse.quote(password, safe="")
    return f"{scheme}://{userinfo}:{encoded}@{host_port}{after}"


def _with_tls(url: str, options: tuple[tuple[str, str], ...], profile: Profile) -> str:
    if not url.lower().startswith("amqps://"):
        raise ConfigError("TLS settings need amqps:// URLs", path=f"{profile.key}.tls")
    base, question, query = url.partition("?")
    present = {key for key, _ in urllib.parse.parse_qsl(query, keep_blank_values=True)}
    for option, _ in options:
        if option in present:
            raise ConfigError(
                f"a URL gives {option} in its query, and the tls table too: keep one",
                path=f"{profile.key}.tls",
            )
    added = urllib.parse.urlencode(options, quote_via=urllib.parse.quote)
    return f"{base}?{query}&{added}" if question and query else f"{base}?{added}"


def _names(profiles: Mapping[str, Profile]) -> str:
    return "it has " + ", ".join(sorted(profiles)) if profiles else "it has none"
