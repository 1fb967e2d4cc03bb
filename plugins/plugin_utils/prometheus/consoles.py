# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What maand's deploy adds to a Prometheus server job's tree (deploy/prepare.go prepareJobOnWorker).

A job that ships ``prometheus.yml`` or ``prometheus.yml.tpl`` is a Prometheus server job. For each of
its allocations the deploy lays over its tree, as maand does:

* ``rules/<job>/<file>``: every job's ``_prometheus/alerts/*.yaml``, an alert's ``annotations.runbook``
  turned into ``runbook_url`` on that worker's Prometheus, and ``rules/maand/certs.yaml``
  (deploy/prometheus_rules.go; the files themselves come from ``rules.py``, ``rule_files``);
* ``consoles/runbooks/<job>/<slug>.html``: every ``_prometheus/runbooks/**.md`` rendered to HTML, with
  ``index.html`` and ``style.css`` (deploy/prometheus_runbooks.go, runbooks/html.go);
* ``consoles/dashboards/<job>/<path>``: every file under ``_prometheus/dashboards/`` but
  ``.dashboardignore``, with ``index.html`` (links titled by each page's ``<title>``, the files matching
  ``.dashboardignore`` left out) and ``style.css`` (deploy/prometheus_dashboards.go, dashboards/).

Markdown is rendered by markdown-it-py in goldmark's GFM flavour as maand renders it (raw HTML
omitted, ``~~`` as ``<del>``, task lists; bare URLs are not linkified). Every page has Prometheus
console template literals neutralised (``{{`` -> ``{{ "{{" }}``), as maand's pages.

No Ansible imports.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import Any, Callable, Iterable, Mapping

from ..bucket import content
from ..kv import functions
from .errors import PrometheusError
from .files import MAX_FILE_BYTES, JobFolder, collect, server_jobs
from .rules import rule_files

RUNBOOKS_DIR = "consoles/runbooks"
DASHBOARDS_DIR = "consoles/dashboards"
DASHBOARD_IGNORE = ".dashboardignore"
ORIGIN = "prometheus"

# maand's runbooks/style.css (maand-sh/maand, MIT licence), inlined into every page and shipped as is.
STYLE_CSS = """:root {
  --fg: #24292f;
  --muted: #57606a;
  --border: #d8dee4;
  --link: #0969da;
  --code-bg: #f6f8fa;
  --font: "Inter", system-ui, -apple-system, BlinkMacSystemFont, "Segoe UI", sans-serif;
  --mono: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, monospace;
}

* {
  box-sizing: border-box;
}

body {
  margin: 0;
  padding: 2rem 1.25rem;
  font-family: var(--font);
  font-size: 16px;
  line-height: 1.6;
  color: var(--fg);
  background: #ffffff;
  -webkit-font-smoothing: antialiased;
  -moz-osx-font-smoothing: grayscale;
}

main {
  max-width: 48rem;
}

.runbook-meta {
  margin: 0 0 1.5rem;
  font-size: 0.875rem;
  color: var(--muted);
}

.runbook-meta a {
  color: var(--link);
}

a:hover {
  text-decoration: underline;
}

h1,
h2,
h3,
h4 {
  font-weight: 600;
  line-height: 1.3;
  margin-top: 1.5rem;
  margin-bottom: 0.75rem;
}

h1 {
  margin-top: 0;
  font-size: 1.75rem;
  padding-bottom: 0.35rem;
  border-bottom: 1px solid var(--border);
}

h2 {
  font-size: 1.25rem;
}

h3 {
  font-size: 1.05rem;
}

p {
  margin: 0.75rem 0;
}

ul,
ol {
  margin: 0.75rem 0;
  padding-left: 1.5rem;
}

li {
  margin: 0.35rem 0;
}

a {
  color: var(--link);
  text-decoration: none;
}

code {
  background: var(--code-bg);
  padding: 0.15em 0.35em;
  border-radius: 4px;
  font-size: 0.9em;
  font-family: var(--mono);
}

pre {
  margin: 1rem 0;
  padding: 1rem;
  background: var(--code-bg);
  border: 1px solid var(--border);
  border-radius: 6px;
  overflow: auto;
}

pre code {
  background: none;
  padding: 0;
  font-size: 0.875rem;
}

blockquote {
  margin: 1rem 0;
  padding: 0 1rem;
  color: var(--muted);
  border-left: 3px solid var(--border);
}

table {
  width: 100%;
  border-collapse: collapse;
  margin: 1rem 0;
}

th,
td {
  border: 1px solid var(--border);
  padding: 0.45rem 0.75rem;
  text-align: left;
}

th {
  background: var(--code-bg);
  font-weight: 600;
}

.runbook-index h1 {
  margin-bottom: 1rem;
}

.runbook-index h2 {
  font-size: 1rem;
  color: var(--muted);
  margin-top: 1.5rem;
}

.runbook-index ul {
  list-style: none;
  padding-left: 0;
}

.runbook-index li {
  margin: 0.4rem 0;
}
"""

_GO_ESCAPES = {"&": "&amp;", "'": "&#39;", "<": "&lt;", ">": "&gt;", '"': "&#34;"}
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def go_escape(text: str) -> str:
    """Go's html.EscapeString (&#39; and &#34;, not Python's &#x27; and &quot;)."""
    return "".join(_GO_ESCAPES.get(ch, ch) for ch in text)


def escape_console_literals(text: str) -> str:
    """maand's EscapePrometheusTemplateLiterals: {{ and }} survive Prometheus' console templating."""
    text = text.replace("{{", "\x00open\x00").replace("}}", "\x00close\x00")
    return text.replace("\x00open\x00", '{{ "{{" }}').replace("\x00close\x00", '{{ "}}" }}')


def html_page(title: str, body: str) -> str:
    """maand's RenderHTMLPage: a full document with the style inlined."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<title>%s</title>\n"
            "<link rel=\"preconnect\" href=\"https://fonts.googleapis.com\">\n"
            "<link rel=\"preconnect\" href=\"https://fonts.gstatic.com\" crossorigin>\n"
            "<link href=\"https://fonts.googleapis.com/css2?family=Inter:wght@400;500;600;700&display=swap\" "
            "rel=\"stylesheet\">\n<style>\n%s\n</style>\n</head>\n<body>\n<main>\n%s\n</main>\n</body>\n</html>\n"
            % (escape_console_literals(go_escape(title)), escape_console_literals(STYLE_CSS),
               escape_console_literals(body)))


# --- markdown (goldmark with extension.GFM, as maand's runbooks.MarkdownToHTML) ---------------------

_TASK = re.compile(r"^\[([ xX])\](?=\s|$)")


def _markdown() -> Any:
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        raise PrometheusError("runbooks need the Python package markdown-it-py on the controller:"
                              " pip install markdown-it-py (requirements.txt)") from None
    md = MarkdownIt("commonmark", {"html": True, "xhtmlOut": False}).enable(["table", "strikethrough"])
    md.add_render_rule("html_block", lambda self, tokens, idx, options, env: "<!-- raw HTML omitted -->\n")
    md.add_render_rule("html_inline", lambda self, tokens, idx, options, env: "<!-- raw HTML omitted -->")
    md.add_render_rule("s_open", lambda self, tokens, idx, options, env: "<del>")
    md.add_render_rule("s_close", lambda self, tokens, idx, options, env: "</del>")
    md.add_render_rule("maand_task", lambda self, tokens, idx, options, env: tokens[idx].content)
    md.core.ruler.push("maand_task_lists", _task_lists)
    return md


def _task_lists(state: Any) -> None:
    """GFM task list items: a list item's paragraph starting "[ ] " / "[x] " gets goldmark's checkbox."""
    from markdown_it.token import Token

    tokens = state.tokens
    for i in range(2, len(tokens)):
        tok = tokens[i]
        if tok.type != "inline" or tokens[i - 1].type != "paragraph_open" or tokens[i - 2].type != "list_item_open":
            continue
        if not tok.children or tok.children[0].type != "text":
            continue
        first = tok.children[0]
        match = _TASK.match(first.content)
        if not match:
            continue
        box = Token("maand_task", "", 0)
        box.content = '<input checked="" disabled="" type="checkbox">' if match.group(1) != " " \
            else '<input disabled="" type="checkbox">'
        first.content = first.content[match.end():]
        tok.children.insert(0, box)


_MD: list = []


def markdown_to_html(text: str) -> str:
    """The HTML fragment goldmark (GFM) makes of text, as far as markdown-it-py can say it."""
    if not _MD:
        _MD.append(_markdown())
    return _MD[0].render(text)


# --- runbooks and dashboards ----------------------------------------------------------------------

def _walk(root: str) -> list[str]:
    """Every file under root, as sorted slash paths relative to it."""
    found = []
    for current, dirs, files in os.walk(root):
        dirs.sort()
        for name in files:
            found.append(os.path.relpath(os.path.join(current, name), root).replace(os.sep, "/"))
    return sorted(found)


def _read_bytes(path: str, rel: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise PrometheusError("%s: cannot be read: %s" % (rel, exc.strerror), rel) from None
    if len(data) > MAX_FILE_BYTES:
        raise PrometheusError("%s: larger than %d MB" % (rel, MAX_FILE_BYTES >> 20), rel)
    return data


def _text(data: bytes, rel: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PrometheusError("%s: not UTF-8 text" % rel, rel) from None


def runbook_page(job: str, slug: str, markdown: str) -> str:
    """maand's RenderRunbookHTML: consoles/runbooks/<job>/<slug>.html."""
    body = '<p class="runbook-meta"><a href="../index.html">Runbooks</a> / %s / %s</p>' % (go_escape(job), go_escape(slug))
    return html_page("%s / %s" % (job, slug), body + markdown_to_html(markdown))


def runbook_index(entries: Iterable[tuple[str, str]]) -> str:
    """maand's runbooks.RenderIndexHTML over (job, slug) pairs."""
    by_job: dict[str, list[str]] = {}
    for job, slug in entries:
        by_job.setdefault(job, []).append(slug)
    body = ['<div class="runbook-index">', "<h1>Runbooks</h1>\n"]
    for job in sorted(by_job):
        body.append("<h2>%s</h2>\n<ul>\n" % go_escape(job))
        body.extend('<li><a href="%s/%s.html">%s</a></li>' % (go_escape(job), go_escape(slug), go_escape(slug))
                    for slug in sorted(by_job[job]))
        body.append("</ul>\n")
    body.append("</div>\n")
    return html_page("Runbooks", "".join(body))


def dashboard_label(rel: str, page: str) -> str:
    """maand's LinkLabel: the page's <title>, else the file name."""
    match = _TITLE.search(page)
    title = functions.go_trim_space(match.group(1)) if match else ""
    return title or posixpath.basename(rel) or rel


def dashboard_index(entries: Iterable[tuple[str, str, str]]) -> str:
    """maand's dashboards.RenderIndexHTML over (job, rel, label)."""
    by_job: dict[str, list[tuple[str, str]]] = {}
    for job, rel, label in entries:
        by_job.setdefault(job, []).append((rel, label or dashboard_label(rel, "")))
    body = ['<div class="runbook-index">', "<h1>Dashboards</h1>\n"]
    for job in sorted(by_job):
        body.append("<h2>%s</h2>\n<ul>\n" % go_escape(job))
        body.extend('<li><a href="%s/%s">%s</a></li>' % (go_escape(job), go_escape(rel), go_escape(label))
                    for rel, label in sorted(by_job[job], key=lambda e: e[0]))
        body.append("</ul>\n")
    body.append("</div>\n")
    return html_page("Dashboards", "".join(body))


def ignore_patterns(text: str) -> list[str]:
    """maand's ParseIgnoreFile: one pattern a line, blanks and # comments skipped."""
    return [line.strip() for line in text.split("\n") if line.strip() and not line.strip().startswith("#")]


def listed_in_index(rel: str, patterns: Iterable[str]) -> bool:
    """maand's ShouldListInIndex: no dot files, nothing .dashboardignore matches."""
    rel = rel.lstrip("/")
    if not rel or posixpath.basename(rel).startswith("."):
        return False
    return not any(content.glob_match(p, rel) for p in patterns)


def runbook_files(folders: Iterable[JobFolder]) -> dict[str, bytes]:
    """consoles/runbooks/: every job's _prometheus/runbooks/**.md as a page, index.html, style.css ({} when none)."""
    out: dict[str, bytes] = {}
    entries = []
    for folder in folders:
        base = os.path.join(folder.root, "runbooks")
        for rel in _walk(base) if os.path.isdir(base) else ():
            if not rel.endswith(".md"):
                continue
            path_rel = "%s/runbooks/%s" % (folder.rel, rel)
            slug = rel[:-3]
            text = _text(_read_bytes(os.path.join(base, rel), path_rel), path_rel)
            out["%s/%s/%s.html" % (RUNBOOKS_DIR, folder.job, slug)] = runbook_page(folder.job, slug, text).encode("utf-8")
            entries.append((folder.job, slug))
    if not entries:
        return {}
    out["%s/style.css" % RUNBOOKS_DIR] = STYLE_CSS.encode("utf-8")
    out["%s/index.html" % RUNBOOKS_DIR] = runbook_index(entries).encode("utf-8")
    return out


def dashboard_files(folders: Iterable[JobFolder]) -> dict[str, bytes]:
    """consoles/dashboards/: every file of every job's _prometheus/dashboards/ but .dashboardignore files,
    index.html, style.css ({} when none)."""
    out: dict[str, bytes] = {}
    entries = []
    for folder in folders:
        base = os.path.join(folder.root, "dashboards")
        files = _walk(base) if os.path.isdir(base) else []
        if not files:
            continue
        patterns: list[str] = []
        if DASHBOARD_IGNORE in files:
            rel = "%s/dashboards/%s" % (folder.rel, DASHBOARD_IGNORE)
            patterns = ignore_patterns(_text(_read_bytes(os.path.join(base, DASHBOARD_IGNORE), rel), rel))
        for rel in files:
            if posixpath.basename(rel) == DASHBOARD_IGNORE:
                continue
            data = _read_bytes(os.path.join(base, rel), "%s/dashboards/%s" % (folder.rel, rel))
            out["%s/%s/%s" % (DASHBOARDS_DIR, folder.job, rel)] = data
            if listed_in_index(rel, patterns):
                entries.append((folder.job, rel, dashboard_label(rel, data.decode("utf-8", "replace"))))
    if not out:
        return {}
    out["%s/style.css" % DASHBOARDS_DIR] = STYLE_CSS.encode("utf-8")
    out["%s/index.html" % DASHBOARDS_DIR] = dashboard_index(entries).encode("utf-8")
    return out


def server_files_provider(bucket_dir: str, catalog: Mapping[str, Any]) -> Callable[[str, str], dict[str, bytes]]:
    """(job, host) -> {rel: content} maand's deploy adds to a Prometheus server job's tree on host ({} for
    any other job). Runbooks and dashboards are read once; rules carry the host's runbook URLs.
    Raises PrometheusError naming the file at fault."""
    servers = set(server_jobs(bucket_dir, catalog))
    consoles: list[dict[str, bytes]] = []

    def provide(job: str, host: str) -> dict[str, bytes]:
        if job not in servers:
            return {}
        files = rule_files(bucket_dir, catalog, job, host)
        if not consoles:
            folders = collect(bucket_dir, catalog)
            consoles.append(dict(runbook_files(folders), **dashboard_files(folders)))
        files.update(consoles[0])
        return files
    return provide
