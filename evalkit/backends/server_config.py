"""What a server says about its own configuration, in the run's record: the recurrent state's
dtype, the chunked-prefill size and prefix caching, which change a linear-attention model's last
bits (a prefix cache can hand back states stored in another dtype than the arm says).

Read from what servers expose: vLLM's `/version` and `/v1/models` card, SGLang's
`/get_server_info` (its server arguments), evalkit serve's `/version` (its engine description).
A value no endpoint gives is None: not known, rather than guessed."""

from __future__ import annotations

from typing import Any

import httpx

from evalkit.declared_state import dtype_name

# keys that name each setting, in the order they are looked for (vLLM, SGLang, evalkit serve)
STATE_DTYPE_KEYS = ("mamba_ssm_cache_dtype", "mamba_ssm_dtype", "ssm_state_dtype", "state_dtype")
CHUNKED_PREFILL_KEYS = ("chunked_prefill_size", "max_num_batched_tokens", "prefill_chunk_size")
PREFIX_CACHING_KEYS = ("enable_prefix_caching", "disable_radix_cache")  # the second is negated
MAX_DEPTH = 4


def find_key(obj: Any, keys: tuple[str, ...], depth: int = 0) -> tuple[str, Any] | None:
    """The first of `keys` found in nested dicts (breadth first, shallow before deep)."""
    if not isinstance(obj, dict) or depth > MAX_DEPTH:
        return None
    for k in keys:
        if k in obj and obj[k] is not None and not isinstance(obj[k], dict):
            return k, obj[k]
    for v in obj.values():
        found = find_key(v, keys, depth + 1)
        if found is not None:
            return found
    return None


def server_config(*sources: Any) -> dict[str, Any]:
    """{"state_dtype", "state_dtype_raw", "chunked_prefill_size", "prefix_caching", "keys"} from
    the servers' JSON documents (the first document that names a setting wins)."""
    out: dict[str, Any] = {
        "state_dtype": None,
        "state_dtype_raw": None,
        "chunked_prefill_size": None,
        "prefix_caching": None,
        "keys": {},
    }
    for doc in sources:
        if out["state_dtype_raw"] is None and (hit := find_key(doc, STATE_DTYPE_KEYS)):
            out["keys"]["state_dtype"] = hit[0]
            out["state_dtype_raw"], out["state_dtype"] = hit[1], dtype_name(hit[1])
        if out["chunked_prefill_size"] is None and (hit := find_key(doc, CHUNKED_PREFILL_KEYS)):
            if isinstance(hit[1], int) and not isinstance(hit[1], bool):
                out["keys"]["chunked_prefill_size"] = hit[0]
                out["chunked_prefill_size"] = hit[1]
        if out["prefix_caching"] is None and (hit := find_key(doc, PREFIX_CACHING_KEYS)):
            if isinstance(hit[1], bool):
                out["keys"]["prefix_caching"] = hit[0]
                out["prefix_caching"] = hit[1] if hit[0] == "enable_prefix_caching" else not hit[1]
    return out


def fetch_json(url: str, headers: dict[str, str], timeout: float = 5.0) -> Any:
    """GET `url` as JSON; None when absent, refused or not JSON (an optional endpoint)."""
    try:
        r = httpx.get(url, timeout=timeout, headers=headers)
        return r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def differs_from_arm(config: dict[str, Any], arm: str | None) -> str | None:
    """A one-line note when the server says its state dtype and the arm's label says another."""
    said, wanted = config.get("state_dtype"), dtype_name(arm) if arm else None
    if said and wanted and said != wanted:
        key = config.get("keys", {}).get("state_dtype")
        return f"the server reports {key}={config.get('state_dtype_raw')} but the arm is {arm}"
    return None
