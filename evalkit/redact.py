"""Secrets never reach a run's records: the one masking helper for manifests, samples, logs.

A key can arrive three ways: a secret flag on the command line (`--api-key K`), a secret-named
option in a `--config` file (`api-key: K`), or credentials inside a URL
(`http://user:secret@host`). Every place that writes a record or prints an error passes its
values through `mask_secrets` / `mask_text`, so the masking lives here once.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"

# option/field names whose value is a secret (compared lower-case, dashes as underscores)
SECRET_NAMES = frozenset(
    {"api_key", "apikey", "password", "passwd", "secret", "token", "auth", "authorization"}
)
SECRET_FLAGS = ("--api-key",)

# scheme://userinfo@ : the userinfo (user, user:password, or a bare token) is masked whole
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/\s@?#]+)@")
# a URL's query (`?api_key=K&x=1`): the values of secret-named parameters (and `key`) are masked
_URL_QUERY = re.compile(r"(?P<url>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s?#]*)\?(?P<query>[^\s#]*)")
_QUERY_PARAM = re.compile(r"(?P<name>[^&;=]+)=(?P<value>[^&;]*)")


def is_secret_name(name: str) -> bool:
    """True for an option or field name that holds a secret (`api-key`, `api_key`, `password`)."""
    return name.strip().lstrip("-").lower().replace("-", "_") in SECRET_NAMES


def mask_text(text: str) -> str:
    """`text` with the credentials of every URL in it replaced by *** (`http://***@host`,
    `http://host/v1?api_key=***`)."""
    if "@" in text:
        text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    if "://" in text and "?" in text:
        text = _URL_QUERY.sub(lambda m: f"{m['url']}?{_QUERY_PARAM.sub(_mask_param, m['query'])}", text)
    return text


def _mask_param(m: re.Match[str]) -> str:
    secret = is_secret_name(m["name"]) or m["name"].strip().lower() in ("key", "access_token")
    return f"{m['name']}={MASK}" if secret and m["value"] else m[0]


def is_secret_flag(flag: str) -> bool:
    """True for a secret flag or a prefix argparse accepts for it (`--api`, `--api-k`)."""
    return len(flag) > 2 and flag.startswith("--") and any(s.startswith(flag) for s in SECRET_FLAGS)


def mask_secrets(value: Any) -> Any:
    """A copy of a JSON-like value with secrets masked: the values of secret-named keys, and the
    credentials of URLs in any string (keys included)."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, dict):
        return {
            (mask_text(k) if isinstance(k, str) else k): (
                MASK if isinstance(k, str) and is_secret_name(k) and v is not None else mask_secrets(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [mask_secrets(v) for v in value]
    return value


def mask_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """A run manifest as written: `mask_secrets` over it, and its command line (and each resume's)
    through `redact_command`."""
    out = mask_secrets(manifest)
    if isinstance(out.get("command"), list):
        out["command"] = redact_command([str(a) for a in out["command"]])
    for resume in out.get("resumes") or []:
        if isinstance(resume, dict) and isinstance(resume.get("command"), list):
            resume["command"] = redact_command([str(a) for a in resume["command"]])
    return out


def redact_command(argv: list[str]) -> list[str]:
    """The command line as recorded: secret flags' values (`--api-key K`, `--api-key=K`) and URL
    credentials replaced by ***."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        flag = arg.split("=", 1)[0]
        if hide_next:
            out.append(MASK)
        elif is_secret_flag(flag) and "=" in arg:
            out.append(f"{flag}={MASK}")
        else:
            out.append(mask_text(arg))
        hide_next = not hide_next and is_secret_flag(arg)
    return out
