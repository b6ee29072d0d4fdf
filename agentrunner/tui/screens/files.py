"""``FilesScreen``: an episode's whole change to its workspace, file by file, and ``a`` to
apply it to the repository it ran on (what ``agentrunner diff EP`` prints and
``agentrunner apply EP`` does).

The list on the left names each changed file (``A``/``M``/``D``/``R`` and its line
counts); the right shows the highlighted file's diff. Apply first checks in a worker that
the change would apply (``apply --check``), asks for confirmation naming the checkout, then
applies in a worker; a refusal (the checkout moved from the base commit, local changes in a
touched path, ...) is shown in the header and as a notification, and nothing is written.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from agentrunner.envs.patch import ApplyResult
from agentrunner.tui import keys
from agentrunner.tui.files import FileDiff, FilesChanged, apply_change, files_changed
from agentrunner.tui.screens.confirm import ConfirmScreen
from agentrunner.tui.screens.diff import DiffBody
from agentrunner.tui.work import ReaderScreen
from agentrunner.values.safe_text import one_line_visible, plain, visible

SHOWN_LINES = 5000  # of one file's diff (``agentrunner diff`` prints it all)


@keys.listed("Files changed")
class FilesScreen(ReaderScreen):
    """The files an episode changed, each with its diff; apply for repository episodes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "move(1)", "Next file", show=False, id="files.down"),
        Binding("k,up", "move(-1)", "Previous file", show=False, id="files.up"),
        Binding("space,pagedown", "page(1)", "Scroll diff", show=False, id="files.page_down"),
        Binding("pageup", "page(-1)", "Scroll diff back", show=False, id="files.page_up"),
        Binding("a", "apply", "Apply to repo", id="files.apply"),
        Binding("escape", "back", "Back", id="files.back"),
    ]

    def __init__(self, episode_id: str) -> None:
        super().__init__()
        self.episode_id = episode_id
        self.changed: FilesChanged | None = None
        self.status = ""
        """The last apply's outcome (or refusal), shown in the header."""

    def compose(self) -> ComposeResult:
        yield Static(f"files changed by {self.ids(self.episode_id)}…", id="files-header")
        yield Static("", id="files-status")
        with Horizontal(id="files-body"):
            yield OptionList(id="files-list")
            with VerticalScroll(id="files-scroll"):
                yield DiffBody(id="files-diff")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#files-list", OptionList).focus()
        self.read(files_changed, self.episode_id, then=self._loaded, on_error=self._failed)

    def _failed(self, error: str) -> None:
        self.dismiss()

    def _loaded(self, changed: FilesChanged) -> None:
        self.changed = changed
        files = self.query_one("#files-list", OptionList)
        files.clear_options()
        files.add_options(_option(f) for f in changed.files)
        if changed.files:
            files.highlighted = 0
        else:
            self._show(None)
        self._header()

    def _header(self) -> None:
        changed = self.changed
        if changed is None:
            return
        n = len(changed.files)
        head = f"{self.ids(changed.episode_id)} changed {n} file{'s' if n != 1 else ''}"
        if changed.repo:
            head += f" of {changed.repo}" + (f" @ {changed.commit[:10]}" if changed.commit else "")
            head += " · a: apply it there" if n else ""
        elif n:
            head += " · a task workspace: `agentrunner apply EP --to PATH` applies it"
        self.query_one("#files-header", Static).update(plain(one_line_visible(head)))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if self.changed is not None and event.option_index < len(self.changed.files):
            self._show(self.changed.files[event.option_index])

    def _show(self, file: FileDiff | None) -> None:
        body = self.query_one("#files-diff", DiffBody)
        if file is None:
            body.update("no change: the workspace matches its base")
            return
        lines = file.lines[:SHOWN_LINES]
        text = body.coloured(lines, "")
        if len(file.lines) > SHOWN_LINES:
            rest = len(file.lines) - SHOWN_LINES
            text.append(f"… {rest} more lines (`agentrunner diff EP` prints them all)\n")
        body.update(text)
        self.query_one("#files-scroll", VerticalScroll).scroll_home(animate=False)

    # ------------------------------------------------------------------ keys

    def action_move(self, delta: int) -> None:
        files = self.query_one("#files-list", OptionList)
        files.action_cursor_down() if delta > 0 else files.action_cursor_up()

    def action_page(self, direction: int) -> None:
        scroll = self.query_one("#files-scroll", VerticalScroll)
        scroll.scroll_page_down(animate=False) if direction > 0 else scroll.scroll_page_up(
            animate=False
        )

    def action_back(self) -> None:
        self.dismiss()

    # ------------------------------------------------------------------ apply

    def action_apply(self) -> None:
        """Check that the change applies, ask, then apply it (each step in a worker)."""
        changed = self.changed
        if changed is None:
            return
        if not changed.files:
            self.notify("nothing to apply: the episode changed no file")
            return
        if changed.repo is None:
            self.notify(
                "this episode ran in a task workspace, not on a repository: "
                f"`agentrunner apply {self.ids(changed.episode_id)} --to PATH` applies it",
                severity="warning",
            )
            return
        repo = changed.repo
        self._set_status(f"checking that it applies to {repo}…")
        self.read(
            apply_change,
            changed.episode_id,
            repo,
            True,  # only check
            then=lambda result: self._confirm(repo, result),
            group="apply",
            exclusive=True,
            on_error=self._refused,
        )

    def _confirm(self, repo: str, result: ApplyResult) -> None:
        self._set_status("")
        question = (
            f"Apply {_counts(result)} to {repo}? Only its working tree is written (never the"
            " index or a commit)."
        )

        def answered(yes: bool | None) -> None:
            if yes and self.changed is not None:
                self._set_status(f"applying to {repo}…")
                self.read(
                    apply_change,
                    self.changed.episode_id,
                    repo,
                    False,
                    then=lambda done: self._applied(repo, done),
                    group="apply",
                    exclusive=True,
                    on_error=self._refused,
                )

        self.app.push_screen(ConfirmScreen(one_line_visible(question)), answered)

    def _applied(self, repo: str, result: ApplyResult) -> None:
        self._set_status(f"applied {_counts(result)}")
        self.notify(f"applied {_counts(result)} to {repo}", title="apply")

    def _refused(self, error: str) -> None:
        self._set_status(f"apply refused, nothing written: {error}", refused=True)

    def _set_status(self, text: str, *, refused: bool = False) -> None:
        self.status = text
        line = self.query_one("#files-status", Static)
        line.update(plain(visible(text)))
        line.set_class(bool(text), "-shown")
        line.set_class(refused, "-refused")


def _option(file: FileDiff) -> Option:
    counts = "binary" if file.binary else f"+{file.added} -{file.removed}"
    text = Text(f"{file.mark} ")
    text.append(one_line_visible(file.path))
    text.append(f"  {counts}", style="dim")
    return Option(text)


def _counts(result: ApplyResult) -> str:
    return (
        f"{result.files} file(s) ({result.added} added, {result.modified} modified, "
        f"{result.deleted} deleted)"
    )
