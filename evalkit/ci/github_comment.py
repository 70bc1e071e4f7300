"""Post evalkit's report as one comment on a GitHub pull request, updated in place on re-runs.

    python -m evalkit.ci.github_comment --file comment.md [--pr N] [--repo OWNER/NAME]

The comment carries a hidden marker; a later run of the same workflow edits that comment instead
of adding another. The token comes from `$GITHUB_TOKEN`; the repository, API address and pull
request from the variables GitHub Actions sets (`GITHUB_REPOSITORY`, `GITHUB_API_URL`, and the
event payload at `GITHUB_EVENT_PATH`). Bodies over GitHub's limit are cut with a note.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

MARKER = "<!-- evalkit-pr-comment -->"
GITHUB_LIMIT = 65536  # characters in an issue comment body
TRUNCATION_NOTE = "\n\n… (cut to fit GitHub's comment limit; the full report is in the job's artifacts)"


class CommentError(Exception):
    """The comment could not be posted (the message says why, in one line)."""


def comment_body(markdown: str, *, marker: str = MARKER, limit: int = GITHUB_LIMIT) -> str:
    """The marker, then the report, cut to `limit` characters with a note when longer."""
    body = f"{marker}\n{markdown.strip()}\n"
    if len(body) <= limit:
        return body
    return body[: limit - len(TRUNCATION_NOTE)] + TRUNCATION_NOTE


def _check(response: Any, what: str) -> Any:
    if response.status_code >= 400:
        raise CommentError(f"{what}: HTTP {response.status_code}: {response.text[:200]}")
    return response.json()


def existing_comment(client: Any, base: str, marker: str = MARKER) -> int | None:
    """The id of the pull request's comment that carries the marker, if any."""
    page = 1
    while True:
        found = _check(client.get(base, params={"per_page": 100, "page": page}), "listing comments")
        for comment in found:
            if marker in (comment.get("body") or ""):
                return int(comment["id"])
        if len(found) < 100:
            return None
        page += 1


def post_or_update(body: str, *, api_url: str, repo: str, pr: int, token: str) -> tuple[str, int]:
    """Create the comment, or edit the one a previous run made: ("created"|"updated", id)."""
    import httpx

    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
    }
    api_url = api_url.rstrip("/")
    with httpx.Client(headers=headers, timeout=30.0) as client:
        issue_comments = f"{api_url}/repos/{repo}/issues/{pr}/comments"
        try:
            comment_id = existing_comment(client, issue_comments)
            if comment_id is None:
                made = _check(client.post(issue_comments, json={"body": body}), "posting the comment")
                return "created", int(made["id"])
            url = f"{api_url}/repos/{repo}/issues/comments/{comment_id}"
            _check(client.patch(url, json={"body": body}), "updating the comment")
            return "updated", comment_id
        except httpx.HTTPError as exc:
            raise CommentError(f"cannot reach {api_url}: {exc}") from exc


def pull_request_number(event_path: str | None) -> int | None:
    """The pull request of the event that started the workflow (None for other events)."""
    if not event_path or not Path(event_path).is_file():
        return None
    event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    number = (event.get("pull_request") or {}).get("number")
    return int(number) if number is not None else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evalkit.ci.github_comment", description=__doc__)
    parser.add_argument("--file", required=True, help="the Markdown to post (evalkit compare --md)")
    parser.add_argument("--pr", type=int, help="pull request number (default: the event's)")
    parser.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY"), help="OWNER/NAME")
    parser.add_argument("--api-url", default=os.environ.get("GITHUB_API_URL", "https://api.github.com"))
    args = parser.parse_args(argv)
    prog = parser.prog
    pr = args.pr or pull_request_number(os.environ.get("GITHUB_EVENT_PATH"))
    if pr is None:
        print(f"{prog}: not a pull request event; nothing posted", file=sys.stderr)
        return 0
    token = os.environ.get("GITHUB_TOKEN")
    problems = [m for m, ok in (("$GITHUB_TOKEN", token), ("--repo/$GITHUB_REPOSITORY", args.repo)) if not ok]
    if problems:
        print(f"{prog}: error: {' and '.join(problems)} not set", file=sys.stderr)
        return 2
    try:
        markdown = Path(args.file).read_text(encoding="utf-8")
        how, comment_id = post_or_update(
            comment_body(markdown), api_url=args.api_url, repo=args.repo, pr=pr, token=token
        )
    except (OSError, CommentError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    print(f"{prog}: {how} comment {comment_id} on {args.repo}#{pr}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
