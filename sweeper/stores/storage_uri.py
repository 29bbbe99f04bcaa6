"""A storage URI's secrets (pure): credentials written into it (user:secret@, a secret query
option, an endpoint's user:secret@) are refused before anything is written, with the
variables that should carry them, and never shown: `redacted` is the URI as it may be
printed or written (sweeper/stores/storage.py)."""

from __future__ import annotations


# Variables that carry an object store's credentials, by scheme, for the message that
# refuses credentials written into the URI.
CREDENTIAL_VARIABLES = {
    "s3": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)",
    "gs": "GOOGLE_APPLICATION_CREDENTIALS",
    "gcs": "GOOGLE_APPLICATION_CREDENTIALS",
}


# Query options that carry a secret (S3's own, a presigned URL's, other stores'): refused in a
# storage URI and never shown
SECRET_OPTIONS = frozenset({"access_key", "secret_key", "session_token", "security_token", "x-amz-signature",
                            "x-amz-credential", "x-amz-security-token", "signature", "sig", "token", "password",
                            "credential", "credentials", "account_key", "sas_token"})


def _split(uri: str) -> tuple[str, str | None, str, list[tuple[str, str]]]:
    """(scheme, user info or None, the rest before the query, the query's pairs) of a URI
    with `://`. The user info is everything before the LAST `@` of the part before the query
    when it holds a `:` (KEY:SECRET) or the first path segment holds the `@`: a secret may
    hold `/` (AWS's own example secret has two), which ends a URL's host for urlsplit."""
    from urllib.parse import parse_qsl

    scheme, _, rest = str(uri).partition("://")
    body, _, query = rest.partition("?")
    body = body.split("#", 1)[0]
    user = None
    if "@" in body:
        head = body[:body.rindex("@")]
        if ":" in head or "@" in body.split("/", 1)[0]:
            user, body = head, body[body.rindex("@") + 1:]
    return scheme, user, body, parse_qsl(query, keep_blank_values=True)


def _secret_option(key: str, value: str) -> bool:
    return key.lower() in SECRET_OPTIONS or "@" in value  # endpoint_override=KEY:SECRET@host


def _shown_query(pairs: list[tuple[str, str]], keep_secrets_out: bool) -> str:
    from urllib.parse import urlencode

    out = []
    for k, v in pairs:
        if k.lower() in SECRET_OPTIONS:
            if not keep_secrets_out:
                out.append((k, "***"))
        elif "@" in v:
            out.append((k, v.rsplit("@", 1)[1] if keep_secrets_out else "***@" + v.rsplit("@", 1)[1]))
        else:
            out.append((k, v))
    return ("?" + urlencode(out, safe="*@:/")) if out else ""


def credentials_in(uri: str) -> str | None:
    """Why a storage URI may not be used as given: it carries credentials (`s3://KEY:SECRET@
    bucket/...`, a secret option in its query, an endpoint with KEY:SECRET@ in it), which
    would be copied into summary.json, the report, Hydra's multirun.yaml and every printed
    command; None where it carries none. The message names the environment variables to use
    instead, suggests the URI without them (its other options kept), and never the secret."""
    if "://" not in str(uri):
        return None
    scheme, user, body, pairs = _split(uri)
    if user is None and not any(_secret_option(k, v) for k, v in pairs):
        return None
    scheme = scheme.lower()
    where = CREDENTIAL_VARIABLES.get(scheme, "the variables your object store's client reads")
    return (f"hydra.launcher.storage_path: a {scheme}:// URI with credentials in it (user:secret@..., a secret "
            f"option, or an endpoint with user:secret@) is refused: they would be written into summary.json, the "
            f"report and every command sweeper prints. Give {scheme}://{body}{_shown_query(pairs, True)} and put the "
            f"credentials in {where}, exported in the shell that runs the sweep and, on a cluster, in the one that "
            "ran `ray start` on each node (docs/running.md, \"Your own cluster\")")


def redacted(uri: str) -> str:
    """A URI as it may be shown: credentials written into it (user info, secret options, an
    endpoint's user:secret@) replaced by ***."""
    if "://" not in str(uri):
        return str(uri)
    scheme, user, body, pairs = _split(uri)
    if user is None and not any(_secret_option(k, v) for k, v in pairs):
        return str(uri)
    return f"{scheme}://{'***@' if user is not None else ''}{body}{_shown_query(pairs, False)}"
