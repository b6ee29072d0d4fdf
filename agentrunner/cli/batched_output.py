"""Text printed to one console as Rich prints it, in as few writes as possible: the output of
the event renderer (:mod:`agentrunner.cli.render`).

``show`` prints a transcript of up to hundreds of thousands of lines. Each ``console.print``
costs Rich a look at the environment and the terminal and a pass over a ``Text``, so a held
line that Rich would print as it is (no tab to expand, no line to wrap, no style across a
newline) is rendered here from its parts and written in batches. Without a colour system (a
file or a pipe) a line is its visible text and nothing more, and a rule is cut from one Rich
rendered for a title of the same width; on a terminal the console's own styles and colour
system render each part. Recorded text is never read as markup: parts are plain text.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import COLOR_SYSTEMS, Console
from rich.rule import Rule
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from agentrunner.values.safe_text import Part, line, visible

BATCH_CHARS = 1 << 16
"""Most characters a batched output holds before writing them."""
RULE_PLACEHOLDER = "x"
"""What a plain rule's title is cut out of Rich's rendering of a rule around (never a rule
character, never a space)."""


class BatchedOutput:
    """Lines for one console, held (``hold=True``: ``show``) and written in batches of about
    :data:`BATCH_CHARS` (:meth:`flush` writes what is held), or printed as they come
    (``hold=False``: a live view prints each event as it arrives). A line Rich must lay out
    (a tab, a line wider than the console, a style across lines) goes through
    ``console.print``, after what is held.
    """

    def __init__(self, console: Console, *, hold: bool) -> None:
        self.console = console
        self.hold = hold
        self._held: list[str] = []
        self._size = 0
        self._styles: dict[str, Style] = {}
        self._colours = COLOR_SYSTEMS.get(console.color_system or "")
        self._plain = hold and self._colours is None
        self._options = console.options
        self._width = console.width  # read once: Rich looks at the environment each time
        self._rule_sides: dict[int, tuple[str, str]] = {}  # title width -> (left, right)

    def add(self, text: Text, *, soft_wrap: bool = False, end: str = "\n") -> None:
        """Print ``text`` followed by ``end`` through the console (after what is held)."""
        self.flush()
        self.console.print(text, soft_wrap=soft_wrap, end=end)

    def line(self, *parts: Part, soft_wrap: bool = False, end: str = "\n") -> None:
        """Print :func:`~agentrunner.values.safe_text.line` of ``parts`` followed by ``end``."""
        if self._plain:  # its visible text, unless Rich must lay it out
            text = visible("".join([p if type(p) is str else p[0] for p in parts]))
            fits = "\t" not in text and (soft_wrap or cell_len(text) <= self._width)
            rendered = text if fits else None
        else:
            rendered = self._render_parts(parts, soft_wrap) if self.hold else None
        if rendered is None:
            self.add(line(*parts), soft_wrap=soft_wrap, end=end)
            return
        self._held += (rendered, end)
        self._size += len(rendered) + 1
        if self._size >= BATCH_CHARS:
            self.flush()

    def _render_parts(self, parts: Sequence[Part], soft_wrap: bool) -> str | None:
        """The parts of a line as Rich would write them, or None when Rich must lay it out."""
        shown = [(visible(p), "") if isinstance(p, str) else (visible(p[0]), p[1]) for p in parts]
        plain = "".join(text for text, _ in shown)
        if "\t" in plain or (not soft_wrap and cell_len(plain) > self._width):
            return None
        out = []
        for text, style in shown:
            if style and text:
                if "\n" in text:
                    return None  # a style across lines
                text = self._style(style).render(text, color_system=self._colours)
            out.append(text)
        return "".join(out)

    def rule(self, title: str | Text) -> None:
        """A dim rule across the console with ``title`` (markup of our own) in its middle."""
        if not self.hold:
            self.console.rule(title, style="dim")
            return
        if self._plain and isinstance(title, Text) and self._plain_rule(title.plain):
            return
        segments = self.console.render(Rule(title, style="dim"), self._options)
        if self.console.no_color and self._colours:
            segments = Segment.remove_color(segments)
        self._held += (
            style.render(text, color_system=self._colours) if style else text
            for text, style, _ in segments
        )
        self._size += self._width

    def _plain_rule(self, title: str) -> bool:
        """Hold a colourless rule around ``title`` (plain text), cut from the one Rich renders
        around a title of the same width; False when Rich must lay it out (a title that does
        not fit, a newline or a tab in it)."""
        width = cell_len(title)
        if "\n" in title or "\t" in title or width > self._width - 4:
            return False
        sides = self._rule_sides.get(width)
        if sides is None:
            placeholder = RULE_PLACEHOLDER * width
            rendered = "".join(
                text
                for text, _, _ in self.console.render(
                    Rule(Text(placeholder), style="dim"), self._options
                )
            )
            left, _, right = rendered.partition(placeholder)
            sides = self._rule_sides[width] = (left, right)
        self._held += (sides[0], title, sides[1])
        self._size += self._width
        return True

    def newline(self) -> None:
        """End the line."""
        self.line()

    def flush(self) -> None:
        """Write what is held."""
        if self._held:
            held, self._held, self._size = self._held, [], 0
            self.console.file.write("".join(held))
            self.console.file.flush()

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self.console.get_style(name)
            if self.console.no_color:
                style = style.without_color
            self._styles[name] = style
        return style
