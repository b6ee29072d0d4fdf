"""``ForkScreen``: the fork editor (edit turn K's output, inject a user message, or re-sample).

The text is checked here before the dialog closes (an edit must be a valid ``--action``
JSON, an injected message must not be empty, another model must load), so the fork that
follows does not fail on what the user typed.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, TextArea

from agentrunner.lifecycle.fork import model_spec, parse_action
from agentrunner.tui import keys
from agentrunner.tui.forking import ForkPrefill, ForkRequest, Mode
from agentrunner.values.errors import AgentRunnerError

MODES: tuple[tuple[Mode, str], ...] = (
    ("edit", "replace turn {k}'s output with this assistant message / tool call (JSON)"),
    ("inject", "inject this user message before turn {k}, then re-sample it"),
    ("resample", "re-sample turn {k} as it was (maybe with another model)"),
)


class ModeButton(RadioButton):
    """A mode's radio button whose mark says whether it is chosen (● chosen, ○ not), so
    the choice reads without colour."""

    @property
    def _button(self) -> Content:
        self.BUTTON_INNER = "●" if self.value else "○"
        return super()._button


@keys.listed("Fork editor")
class ForkScreen(ModalScreen[ForkRequest | None]):
    """Dismisses with a :class:`ForkRequest`, or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "submit", "Fork & run", id="fork.submit", priority=True),
        Binding("escape", "cancel", "Cancel", id="fork.cancel", priority=True),
    ]

    def __init__(self, prefill: ForkPrefill) -> None:
        super().__init__()
        self.prefill = prefill
        self.mode: Mode = "edit"
        self._texts: dict[Mode, str] = {"edit": prefill.edit, "inject": "", "resample": ""}

    def compose(self) -> ComposeResult:
        p = self.prefill
        with Vertical(id="fork-box"):
            yield Label(
                f"Fork {p.short_id} at turn {p.turn} (the parent is never changed)",
                id="fork-title",
            )
            with RadioSet(id="fork-mode"):
                for i, (mode, text) in enumerate(MODES):
                    yield ModeButton(f"{mode}: {text.format(k=p.turn)}", value=i == 0)
            yield TextArea(p.edit, id="fork-text", soft_wrap=True, tab_behavior="indent")
            with Horizontal(id="fork-model-row"):
                yield Label("model ", id="fork-model-label")
                yield Input(p.model, id="fork-model")
            yield Label("", id="fork-error")
            with Horizontal(id="fork-buttons"):
                yield Button("Fork & run (ctrl+s)", variant="success", id="fork-ok")
                yield Button("Cancel (esc)", id="fork-no")

    def on_mount(self) -> None:
        """Focus starts on the modes (the first choice to make: ↑/↓ then Enter picks one,
        Tab goes on to the text), never inside the JSON, where a stray key would edit it."""
        self.query_one("#fork-mode", RadioSet).focus()

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        """A mode picked: its text (what it keeps for the mode), and the focus where the
        user types next (the text; the model for a re-sample, which has none)."""
        area = self.query_one("#fork-text", TextArea)
        self._texts[self.mode] = area.text
        self.mode = MODES[event.radio_set.pressed_index][0]
        area.load_text(self._texts[self.mode])
        area.disabled = self.mode == "resample"
        if self.is_mounted and self.focused is event.radio_set:
            (self.query_one("#fork-model", Input) if area.disabled else area).focus()

    def set_mode(self, mode: Mode) -> None:
        """Select a mode (as clicking its radio button would)."""
        index = [m for m, _ in MODES].index(mode)
        buttons = list(self.query(RadioButton))
        buttons[index].value = True

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "fork-ok":
            self.action_submit()
        else:
            self.action_cancel()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def _error(self, text: str) -> None:
        self.query_one("#fork-error", Label).update(text)

    def action_submit(self) -> None:
        text = self.query_one("#fork-text", TextArea).text
        model = self.query_one("#fork-model", Input).value.strip()
        try:
            if self.mode == "edit":
                parse_action(text, self.prefill.turn)
            elif self.mode == "inject" and not text.strip():
                self._error("type the user message to inject")
                return
            if model and model != self.prefill.model:
                model_spec(model)
        except AgentRunnerError as exc:
            self._error(str(exc))
            return
        other = model if model and model != self.prefill.model else None
        self.dismiss(
            ForkRequest(self.prefill.episode_id, self.prefill.turn, self.mode, text, other)
        )
