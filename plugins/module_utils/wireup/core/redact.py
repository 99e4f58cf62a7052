"""Secrets out of everything wireup writes or prints: the one rule for which values are secret.

A variable is secret when one of the parts of its name (split at ``_`` and other non-letters,
case-insensitive) is TOKEN, KEY, SECRET, PASSWORD, PASSWD, CREDENTIAL or AUTH, each with an
optional trailing S (``HF_TOKEN``, ``WANDB_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORDS``,
``GIT_CREDENTIALS``), or when the user lists its name in ``wireup_secret_env`` (exact name).
Its value is replaced by ``<redacted>``; the name stays, so a reader sees it was set.

Any other value keeps its text, but the user information of every URL in it (``user:password@``
of ``https://user:password@host/simple``) becomes ``***``: an index URL with a token is a secret
whatever the variable is called.
"""

from __future__ import annotations

import re

MARKER = "<redacted>"
URL_USERINFO = "***"
SECRET_PARTS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
_PARTS = frozenset(SECRET_PARTS) | {f"{part}S" for part in SECRET_PARTS}
_SPLIT = re.compile(r"[^A-Za-z0-9]+")
# scheme://userinfo@: the userinfo runs to the LAST '@' before the path, query or fragment (a
# password with a bare '@' in it is still all hidden).
# Only ASCII white space ends a URL in a message (re.ASCII).
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s@]*(?:@[^/?#\s@]*)*@", re.ASCII)


def is_secret_name(name, extra_names=()) -> bool:
    """True when ``name`` looks like a secret's (the module docstring's rule) or is one of
    ``extra_names`` (wireup_secret_env)."""
    name = str(name)
    if name in set(map(str, extra_names or ())):
        return True
    return any(part.upper() in _PARTS for part in _SPLIT.split(name))


def redact_url(url) -> str:
    """``url`` with the user information of each URL in it replaced by ``***``
    (``https://u:p@host/x`` -> ``https://***@host/x``); anything else unchanged."""
    return _URL_USERINFO.sub(lambda m: m.group(1) + URL_USERINFO + "@", str(url))


def redact_value(name, value, extra_names=()):
    """One variable's value as wireup may write or print it."""
    if is_secret_name(name, extra_names):
        return MARKER
    if isinstance(value, str) and "://" in value:
        return redact_url(value)
    return value


def redact_env(mapping, extra=()) -> dict:
    """A copy of an env mapping fit to write or print: secret names keep their key with the
    value ``<redacted>``, URLs lose their user information. None or empty gives {}."""
    return {key: redact_value(key, value, extra) for key, value in (mapping or {}).items()}


def secret_names(mapping, extra=()) -> list[str]:
    """The names of ``mapping`` whose values are secret, sorted (for a task's no_log)."""
    return sorted(
        str(key) for key, value in (mapping or {}).items() if redact_value(key, value, extra) != value
    )
