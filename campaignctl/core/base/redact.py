"""What must not reach a terminal, a log, a webhook or a report as written: secrets a user put in
a `setup:` line or an `env:` value, and control characters from text nobody here wrote (a webhook
endpoint's answer, a job's files). Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MASK = "***"
# Names a secret goes by: …TOKEN, …KEY, …SECRET, …PASSWORD, and the short forms sites use —
# DB_PASS, MYSQL_PWD (MySQL's own client variable), GITHUB_PAT (a personal access token),
# HF_AUTH — as whole words after another (`_PWD`, not PWD, the working directory), so PATH and
# AUTHOR stay readable.
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSW(OR)?D|CREDENTIAL|[_.-](PASS|PWD|PAT|AUTH)($|[_.-])",
                         re.IGNORECASE)
MIN_MASKED_VALUE = 4  # shorter values ("1", "yes") would mask every digit in a text
# NAME=value (a shell assignment, `--api-key=…`) or NAME: value (YAML, JSON), value up to the
# next blank, quote-delimited if quoted
# (the name starts a word or follows a `-`, is at most 128 characters and is never given back: an
# unanchored, unbounded name took 17 s over a 16 KB line without `=`, every start trying every
# length; the URL pattern's parts are bounded and never given back for the same reason)
_ASSIGNMENT = re.compile(r"""(?<![A-Za-z0-9_.])(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,127}+)"""
                         r"""(?P<sep>["']?[ \t]*[=:][ \t]*)(?P<q>["'])?(?P<value>(?(q)[^"'\n]*|[^\s;&|"',{}\[\]]+))""")
# scheme://user:password@host: the password goes, as in mask_url
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]{0,31}+://[^/\s:@]{1,256}+:)(?P<value>[^@\s/]{1,1024}+)(?=@)",
                           re.IGNORECASE)
# Secrets written without = or ':': an HTTP credential (`Authorization: Bearer <token>`, `Basic
# <base64>`), a secret-named long option and its value as the next word (`--password hunter2`,
# `--api-key abc`), and the MySQL/MariaDB clients' `-p<password>` (their only form with a value)
_SCHEME_CREDENTIAL = re.compile(r"(?P<head>\b(?:Bearer|Basic|Token)[ \t]+)(?P<value>[A-Za-z0-9._~+/=-]{4,})")
_OPTION_VALUE = re.compile(r"(?P<head>(?<![\w-])--(?P<name>[A-Za-z][A-Za-z0-9_-]*)[ \t]+)(?P<value>[^\s-][^\s;&|]*)")
_MYSQL_PASSWORD = re.compile(r"(?P<head>\b(?:mysql|mariadb|mysqldump|mysqladmin|mariadb-dump)\b[^\n;&|]*?[ \t]-p)"
                             r"(?P<value>[^\s;&|]+)")
# C0 controls but tab and newline, DEL, and C1 (0x9b is CSI on a terminal that reads 8-bit controls)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def mask_assignments(text: str) -> str:
    """`export DB_PASSWORD=hunter2; false` → `export DB_PASSWORD=***; false`; `API_TOKEN: abc` →
    `API_TOKEN: ***`; a URL's password, as in `postgresql://me:pw@db/x` → `…//me:***@db/x`;
    `--password pw`, `Bearer abc…` and `mysql -uroot -ppw` → `***` for the secret."""
    def masked(m: re.Match[str]) -> str:
        if not is_secret_name(m.group("name")) or not m.group("value"):
            return m.group(0)
        return f"{m.group('name')}{m.group('sep')}{m.group('q') or ''}{MASK}"
    def masked_option(m: re.Match[str]) -> str:
        return m.group("head") + MASK if is_secret_name(m.group("name")) else m.group(0)
    text = _ASSIGNMENT.sub(masked, text)
    text = _OPTION_VALUE.sub(masked_option, text)
    for pattern in (_URL_PASSWORD, _SCHEME_CREDENTIAL, _MYSQL_PASSWORD):
        text = pattern.sub(lambda m: m.group("head") + MASK, text)
    return text


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The values of `env` named like a secret, longest first (so one inside another is found whole)."""
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_MASKED_VALUE}
    return sorted(values, key=len, reverse=True)


def mask_values(text: str, values: Iterable[str]) -> str:
    """Every occurrence of each value masked (a secret a program printed, `echo $API_TOKEN`)."""
    for value in values:
        if len(value) >= MIN_MASKED_VALUE:
            text = text.replace(value, MASK)
    return text


def assigned_secrets(text: str) -> dict[str, str]:
    """Secret-named variables `text` assigns (`export DB_PASSWORD=hunter2` → its value)."""
    return {m.group("name"): m.group("value") for m in _ASSIGNMENT.finditer(text) if is_secret_name(m.group("name"))}


def mask_secrets(text: str, env: Mapping[str, str] | None = None) -> str:
    """Assignments of secret-named variables, and wherever else their values appear (a program
    that printed one), with those of `env`'s secret-named variables."""
    return mask_assignments(mask_values(text, secret_values({**(env or {}), **assigned_secrets(text)})))


def printable(text: str) -> str:
    """`text` without control characters but tab and newline: what an endpoint or a job wrote,
    before it reaches a terminal (an escape sequence could rewrite the screen or the title)."""
    return _CONTROL.sub("", text)
