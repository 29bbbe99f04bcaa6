"""The report page's HTML pieces: its style and scripts, escaping, numbers, links and folds (pure)."""

from __future__ import annotations

import html
import os
from pathlib import Path

import pandas as pd


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 1300px; color: #222; }
table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.failed { background: #fde8e8; } .skipped { background: #fff6db; } .cancelled { background: #eee; }
.note { color: #805b00; } code { background: #f5f5f5; padding: 1px 4px; }
figure { margin: 1em 0 2em; } img { max-width: 100%; border: 1px solid #ddd; }
td.small { font-size: 11px; max-width: 320px; } code { word-break: break-all; }
p.small { font-size: 12px; color: #555; } ul.findings li { margin: 0.35em 0; line-height: 1.4; overflow-wrap: anywhere; }
img { height: auto; }
table.compact td:nth-child(n+3) { text-align: right; font-variant-numeric: tabular-nums; }
span.small { font-size: 12px; color: #555; font-weight: normal; } details.job { border-top: 1px solid #eee; padding: 2px 0; } details.job[open] { padding-bottom: 0.8em; }
@media (max-width: 700px) { body { margin: 0.6em; } table { font-size: 11px; display: block; overflow-x: auto; } }
"""


def esc(x) -> str:
    return html.escape("" if x is None else str(x))


def fmt_num(x, fmt="{:.2f}") -> str:
    if x is None or (isinstance(x, float) and pd.isna(x)):
        return "–"
    return fmt.format(x)


def text_of(x) -> str | None:
    """A table cell as text, None where it is empty (None or pandas' NaN)."""
    return None if x is None or (isinstance(x, float) and pd.isna(x)) or x == "" else str(x)


def log_of(row, entries: dict) -> str | None:
    """The job's log path: its record's, else its summary entry's; None when there is none
    (a job cancelled before it started)."""
    entry = entries.get(row["job"], {})
    return text_of(row["log"]) or text_of(entry.get("log"))


# Object stores a record's artifacts can lie in (hydra.launcher.storage_path), and the
# command that brings a copy of one: a browser cannot open them.
FETCH = {"s3": "aws s3 cp{r} {uri} .", "gs": "gsutil cp{r} {uri} .", "gcs": "gsutil cp{r} {uri} .",
         "hdfs": "hdfs dfs -get {uri} ."}
_RECURSIVE = {"s3": " --recursive", "gs": " -r", "gcs": " -r"}
LINKABLE = ("http", "https", "file")  # the only schemes a report links to


def endpoint_option(storage: str | None) -> str:
    """` --endpoint-url scheme://host` for the AWS CLI where the job's storage (its record's
    `job.storage`) is an S3-compatible server named by `endpoint_override`; '' for AWS itself
    (a server named by AWS_ENDPOINT_URL is found by the CLI from the same variable)."""
    from urllib.parse import parse_qsl, urlsplit

    if not storage or not str(storage).lower().startswith("s3://"):
        return ""
    query = dict(parse_qsl(urlsplit(str(storage)).query))
    host = query.get("endpoint_override")
    if not host or "@" in host:  # a host with credentials is refused before any job runs
        return ""
    return f" --endpoint-url {host if '://' in host else query.get('scheme', 'https') + '://' + host}"


def link(path: str | None, sweep_dir: Path, text: str, storage: str | None = None) -> str:
    """A link to a job's file: relative to the sweep folder for a path or file URI inside it
    (the folder can be copied elsewhere), as it is for http(s); a path out of the sweep
    folder shown, not linked; an object store's URI shown as text with the command that
    fetches it (from `storage`'s own server where it names one); any other scheme (a
    crafted record's `javascript:`) never a link."""
    from urllib.parse import urlsplit

    if path is None or not text_of(path):
        return "–"
    path = str(path)
    scheme = urlsplit(path).scheme.lower() if "://" in path or ":" in path.split("/", 1)[0] else ""
    if len(scheme) == 1:  # a Windows drive letter, not a scheme
        scheme = ""
    if scheme in FETCH or (scheme and "://" in path and scheme not in LINKABLE):
        folder = "." not in path.rstrip("/").rsplit("/", 1)[-1]  # a job's folder, not one of its files
        how = FETCH.get(scheme, "").format(uri=path, r=(_RECURSIVE.get(scheme, "") if folder else "")
                                           + (endpoint_option(storage) if scheme == "s3" else ""))
        return (f"<code title='{esc('fetch it with: ' + how) if how else 'in object storage'}'>{esc(path)}</code>"
                + (f" <span class='small'>({esc(how)})</span>" if how else ""))
    if scheme in ("http", "https"):  # the storage's own web address
        return f'<a href="{esc(path)}">{esc(text)}</a>'
    local = urlsplit(path).path if scheme == "file" else path
    if scheme not in ("", "file"):  # javascript:, data:, vbscript: and the like: shown, never followed
        return f"<code>{esc(path)}</code>"
    # a job's file is in the sweep folder: a path out of it (a crafted record's
    # ../../../../etc/passwd, or //host/x, which a browser reads as another host) is shown, not linked
    base = os.path.normpath(os.path.abspath(sweep_dir))
    target = os.path.normpath(os.path.join(base, local)) if not local.startswith("/") else os.path.normpath(local)
    if local.startswith("//") or not (target == base or target.startswith(base.rstrip(os.sep) + os.sep)):
        return f"<code title='outside the sweep folder: not linked'>{esc(path)}</code>"
    try:
        href = os.path.relpath(target, base)  # relative: the folder can be copied elsewhere
    except ValueError:
        href = target
    if ":" in href.split("/", 1)[0]:  # a relative path whose first part a browser would read as a scheme
        href = "./" + href
    return f'<a href="{esc(href)}">{esc(text)}</a>'


FOLD_ROWS = 30  # a large page's full tables longer than this open on a click


def fold_open(rows: int, large: bool, what: str) -> str:
    """A large page's long table starts folded: `<details>` whose summary says what it holds."""
    return f"<details><summary>{esc(what)} ({rows})</summary>" if large and rows > FOLD_ROWS else ""


def fold_close(rows: int, large: bool) -> str:
    return "</details>" if large and rows > FOLD_ROWS else ""


def short(name: str, width: int = 70) -> str:
    """A kernel name that fits its column (the whole name is the cell's tooltip)."""
    return name if len(name) <= width else name[: width - 1] + "…"


# A large sweep's job sections are folded: a link to one (#details-N) opens it.
OPEN_SCRIPT = ("<script>function sweeperOpen() { var t = document.getElementById(location.hash.slice(1));"
                " if (t && t.tagName === 'DETAILS') { t.open = true; t.scrollIntoView(); } }"
                " window.addEventListener('hashchange', sweeperOpen); window.addEventListener('load', sweeperOpen);</script>")


# A large sweep's jobs table: a click on a column's head sorts by it (numbers as numbers,
# again to reverse), and the filter keeps the rows whose text holds every typed word.
TABLE_SCRIPT = ("<script>function sweeperFilter(q) { var words = q.toLowerCase().split(/\\s+/).filter(Boolean);"
                 " var rows = document.querySelectorAll('#jobs tbody tr'), shown = 0;"
                 " rows.forEach(function (r) { var t = r.textContent.toLowerCase();"
                 " var ok = words.every(function (w) { return t.indexOf(w) >= 0; });"
                 " r.style.display = ok ? '' : 'none'; if (ok) shown++; });"
                 " document.getElementById('jobs-shown').textContent = q ? shown + ' shown' : ''; }"
                 " document.querySelectorAll('table.sortable thead th').forEach(function (th, col) {"
                 " th.style.cursor = 'pointer'; th.addEventListener('click', function () {"
                 " var body = th.closest('table').tBodies[0], rows = Array.prototype.slice.call(body.rows);"
                 " var dir = th.getAttribute('data-dir') === 'asc' ? -1 : 1; th.setAttribute('data-dir', dir > 0 ? 'asc' : 'desc');"
                 " function key(r) { var t = r.cells[col].textContent.trim(), n = parseFloat(t.replace(/[^0-9.+-]/g, ''));"
                 " return isNaN(n) ? t : n; }"
                 " rows.sort(function (a, b) { var x = key(a), y = key(b);"
                 " if (typeof x === typeof y) return (x > y ? 1 : x < y ? -1 : 0) * dir;"
                 " return (typeof x === 'number' ? -1 : 1) * dir; });"
                 " rows.forEach(function (r) { body.appendChild(r); }); }); });</script>")


# On load, the page counts the figures the browser really decoded, its tables and findings,
# and how wide it laid itself out against the window: a headless browser's DOM dump then
# shows them (tests/test_report.py), no server or driver needed.
RENDERED_SCRIPT = ("<script>window.addEventListener('load', function () {"
               " var imgs = Array.prototype.slice.call(document.images);"
               " document.body.setAttribute('data-figures-rendered', imgs.filter(function (i) {"
               " return i.complete && i.naturalWidth > 0; }).length);"
               " document.body.setAttribute('data-tables', document.querySelectorAll('table').length);"
               " document.body.setAttribute('data-page-width', document.documentElement.scrollWidth);"
               " document.body.setAttribute('data-page-height', document.documentElement.scrollHeight);"
               " var sweep = document.querySelector('ul.findings.sweep');"
               " if (sweep) document.body.setAttribute('data-sweep-findings-height', Math.round(sweep.getBoundingClientRect().height));"
               " var first = document.getElementById('details');"
               " document.body.setAttribute('data-job-sections-y', first ? Math.round(first.getBoundingClientRect().top + window.scrollY) : -1);"
               " document.body.setAttribute('data-viewport-width', window.innerWidth);"
               " document.body.setAttribute('data-findings', document.querySelectorAll('ul.findings li').length); });"
               "</script>")
