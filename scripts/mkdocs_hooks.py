"""MkDocs hook (mkdocs.yml ``hooks:``): links from docs/ to the repository's other files, checked.

MkDocs validates links between pages but calls a link out of docs_dir (``../examples/README.md``) "not found" even
when the file is there. This hook resolves each such link against the repository: a file that exists becomes a
plain HTML link MkDocs leaves alone (right when the pages are read in the repository; on the built site it points
at ``repo_url`` when one is set), and one that does not is a warning, which ``mkdocs build --strict`` fails on.
"""

import logging
import re
from pathlib import Path

LOG = logging.getLogger("mkdocs.hooks.links")
LINK = re.compile(r"\[([^\]\n]+)\]\((\.\./[^)\s#]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown, page, config, files):
    page_dir = Path(page.file.abs_src_path).parent
    docs = Path(config["docs_dir"]).resolve()
    repo = docs.parent
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def resolve(match):
        text, target, anchor = match.group(1), match.group(2), match.group(3) or ""
        path = (page_dir / target).resolve()
        if docs in path.parents or path == docs:
            return match.group(0)  # inside the docs: MkDocs checks it
        if repo not in path.parents or not path.exists():
            LOG.warning("Doc file '%s' links to '%s', which is not a file of the repository", page.file.src_uri,
                        target)
            return match.group(0)
        href = f"{repo_url}/blob/HEAD/{path.relative_to(repo)}" if repo_url else target
        return f'<a href="{href}{anchor}">{text}</a>'

    return LINK.sub(resolve, markdown)
