"""``agentrunner view``: episodes as one self-contained, searchable HTML transcript page.

:func:`render_page` builds the page, :func:`write_page` writes it. The transcript is read
through :mod:`agentrunner.view.transcript` (a fold of the typed events), written as HTML by
:mod:`agentrunner.view.blocks` and :mod:`agentrunner.view.sections`, with every recorded
text escaped (:mod:`agentrunner.view.markup`); the page loads nothing.
"""

from agentrunner.view.page import render_page, write_page

__all__ = ["render_page", "write_page"]
