"""The HTML of a transcript's blocks (:mod:`agentrunner.view.transcript`).

Each block is one ``<div class="blk ...">`` (what the page's find box filters): a message
that entered the history, a model turn with its reasoning folded, its text, its tool calls
with their arguments and output, and its usage and cost; a notice (error, cancel, resume,
end); a decision point with its candidates; a compaction call with the tokens before and
after it, its summary and, folded, the messages it replaced; another compaction with what it
removed and added. A ``mask`` placeholder shows as a masked output, naming its original.
A fork's inherited blocks are folded, or replaced by a link when its parent is in the page.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from agentrunner.request_diff import RequestDiff, brief
from agentrunner.values import events as ev
from agentrunner.values.formatting import count
from agentrunner.values.types import Message
from agentrunner.view.context_marks import placeholder_of, summary_of
from agentrunner.view.markup import anchor, esc, esc_line, folded, pre
from agentrunner.view.transcript import (
    Block,
    Compaction,
    DecisionPoint,
    ModelTurn,
    Notice,
    Prompt,
    Step,
    Summarized,
    Transcript,
)

SHORT_ARG = 120
"""An argument up to this long, on one line, is shown beside its name."""
Link = Callable[[str], str]
"""An episode id as HTML: a link to its section when it is in the page, else its id."""


class BlockWriter:
    """Writes the blocks of one episode's transcript."""

    def __init__(self, episode_id: str, link: Link) -> None:
        self.episode_id = episode_id
        self.link = link
        self.whole = f"agentrunner show {episode_id} -v"

    def transcript(
        self, t: Transcript, *, parent: str | None, forks: Sequence[tuple[int, str]] = ()
    ) -> str:
        """The blocks of ``t``: those it inherits folded (or, when ``parent`` is given, its
        parent being in the page, a link to them there), then its own, with a line where
        each of ``forks`` (``(fork_seq, fork id)``) branches off."""
        inherited = [b for b in t.blocks if b.seq and b.seq < t.own_from]
        own = [b for b in t.blocks if not (b.seq and b.seq < t.own_from)]
        head = ""
        if inherited and parent is not None:
            head = (
                f'<p class="meta">Seqs 1 to {t.own_from - 1} ({len(inherited)} blocks) are '
                f"inherited from {self.link(parent)}: its section shows them.</p>"
            )
        elif inherited:
            summary = f"inherited history: seqs 1 to {t.own_from - 1} ({len(inherited)} blocks)"
            inner = self.blocks(inherited, forks, before=t.own_from)
            head = folded(esc(summary), inner, "inherited")
        return head + self.blocks(own, [f for f in forks if f[0] >= t.own_from])

    def blocks(
        self,
        blocks: Sequence[Block],
        forks: Sequence[tuple[int, str]] = (),
        *,
        before: int | None = None,
    ) -> str:
        """The blocks, each fork's line before the first block after its fork point (a
        fork after the last block: at the end, if its point is before ``before``)."""
        points = sorted(forks)
        out = []
        for block in blocks:
            while points and block.seq and points[0][0] < block.seq:
                out.append(self._fork_line(*points.pop(0)))
            out.append(self.block(block))
        out.extend(self._fork_line(*p) for p in points if before is None or p[0] < before)
        return "".join(out)

    def _fork_line(self, fork_seq: int, fork_id: str) -> str:
        where = f"branches off here (after seq {fork_seq})"
        return f'<div class="blk"><p class="forked">⑂ fork {self.link(fork_id)} {where}</p></div>'

    def block(self, block: Block) -> str:
        match block:
            case Prompt():
                body, cls = self._prompt(block), "prompt"
            case ModelTurn():
                body, cls = self._turn(block), "turn"
            case Notice():
                kind = block.kind.removeprefix("episode.")
                body, cls = f'<p class="{kind}">{esc(block.text)}</p>', "notice"
            case DecisionPoint():
                body, cls = self._decision(block), "decision"
            case Compaction():
                body, cls = self._compaction(block), "compaction"
            case Summarized():
                body, cls = self._summarized(block), "compaction summarized"
        name = anchor(self.episode_id, block.seq)
        if isinstance(block, DecisionPoint):  # its seq is also its turn's or event's
            name += "-decision"
        where = f' id="{name}"' if block.seq else ""
        return f'<div class="blk {cls}"{where}>{body}</div>'

    def _prompt(self, p: Prompt) -> str:
        label = f'<span class="label">» {esc_line(p.label)}</span> ({esc_line(p.role)})'
        if p.message is None:
            return f'<p>{label} <span class="meta">(message not in the store)</span></p>'
        text = pre(p.message.content, "text", whole=self.whole)
        if p.reason == "system":
            lines = len(p.message.content.splitlines())
            return folded(f"{label} · {lines} lines", text, "system")
        return f"<p>{label}</p>{text}{self._calls_of_message(p)}"

    def _calls_of_message(self, p: Prompt) -> str:
        assert p.message is not None
        calls = [f"{c.name}({c.arguments})" for c in p.message.tool_calls]
        return "".join(f'<pre class="args">{esc(c)}</pre>' for c in calls)

    def _turn(self, t: ModelTurn) -> str:
        masked = f' <span class="masked">· {t.masked:,} tool output(s) masked</span>'
        head = f'<h4>turn {t.turn} <span class="meta">· {esc_line(t.label)}</span>'
        head += f"{masked if t.masked else ''}</h4>"
        reasoning = "".join(t.reasoning)
        text = "".join(t.text)
        refusal = "".join(t.refusal)
        if t.message is not None:  # no chunks: the stored answer (an edit, an import)
            reasoning = reasoning or t.message.reasoning or ""
            text = text or t.message.content
            refusal = refusal or t.message.refusal or ""
        parts = [head]
        if reasoning:
            words = f"reasoning · {len(reasoning.split()):,} words"
            parts.append(folded(words, pre(reasoning, "reasoning", whole=self.whole), "think"))
        if text:
            parts.append(pre(text, "text", whole=self.whole))
        if refusal:
            parts.append(f'<p class="error">refusal: {esc(refusal)}</p>')
        parts.extend(self._step(s) for s in t.steps)
        parts.append(self._ending(t))
        return "".join(parts)

    def _ending(self, t: ModelTurn) -> str:
        out = []
        r = t.response
        if r is not None and r.refusal and not t.refusal:
            out.append(f'<p class="error">refusal: {esc(r.refusal)}</p>')
        if r is not None and r.stop_reason in (None, ev.StopReason.INCOMPLETE):
            out.append('<p class="warn">the stream ended without a finish reason</p>')
        if t.usage is not None:
            out.append(f'<p class="usage">{esc_line(usage_line(t.usage))}</p>')
        return "".join(out)

    def _step(self, s: Step) -> str:
        call = s.call
        name, call_id = esc_line(call.name), esc_line(call.call_id)
        head = f'<p class="call">▶ {name} <span class="meta">{call_id}</span></p>'
        args = self._arguments(call)
        if s.result is None:
            return f'<div class="step">{head}{args}<p class="warn">no result recorded</p></div>'
        r = s.result
        cls = "obs error" if r.error else "obs"
        out = pre(r.observation, cls, whole=self.whole)
        facts = [f"{r.duration_s:.2f} s"]
        if r.error:
            facts.insert(0, f"error: {r.error}")
        if r.reward is not None:
            facts.append(f"reward {r.reward:g}")
        if r.done:
            facts.append("done")
        if r.truncated:
            facts.append("horizon reached")
        meta = f'<p class="meta">{esc_line(" · ".join(facts))}</p>'
        return f'<div class="step">{head}{args}{out}{meta}</div>'

    def _arguments(self, call: ev.ToolCall) -> str:
        if call.parsed is None:
            why = f" ({call.parse_error})" if call.parse_error else ""
            note = f'<p class="warn">arguments are not valid JSON{esc_line(why)}</p>'
            return note + pre(call.arguments, "args", whole=self.whole)
        rows = []
        for key, value in call.parsed.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            if "\n" in shown or len(shown) > SHORT_ARG:
                value_html = pre(shown, "args", whole=self.whole)
            else:
                value_html = f" <code>{esc_line(shown)}</code>"
            rows.append(
                f'<div class="arg"><span class="key">{esc_line(key)}</span>{value_html}</div>'
            )
        return "".join(rows)

    def _decision(self, d: DecisionPoint) -> str:
        dec = d.decision
        done = dec.adopted_seq is not None
        state = f"adopted candidate {dec.adopted} ({dec.adopt})" if done else "not finished"
        rows = []
        for c in dec.candidates:
            mark = "★ adopted" if done and c.index == dec.adopted else ""
            same = f" (= candidate {c.duplicate_of})" if c.duplicate_of is not None else ""
            forks = " ".join(self.link(e) for e in c.continuations) or "-"
            rows.append(
                f"<tr><td>{c.index}{esc_line(same)}</td>"
                f"<td>{c.mean:.3f} ± {c.spread:.3f} (n {len(c.rewards)})</td>"
                f"<td>{esc_line(action(c.message))}</td>"
                f"<td>{self.link(c.proposal)}</td><td>{forks}</td><td>{mark}</td></tr>"
            )
        head = "<tr><th>candidate</th><th>value</th><th>action</th><th>proposal</th>"
        head += "<th>continuations</th><th></th></tr>"
        pending = " ".join(self.link(e) for e in dec.pending)
        waiting = f'<p class="warn">not finished: {pending}</p>' if pending else ""
        title = f"turn {dec.turn} · decision point at seq {dec.seq} · {state}"
        return f"<h4>{esc_line(title)}</h4><table>{head}{''.join(rows)}</table>{waiting}"

    def _compaction(self, c: Compaction) -> str:
        lost = [m for m in c.change.messages if m.kind != "added"]
        if lost and all(m.after is not None and placeholder_of(m.after) for m in lost):
            return f"<h4>turn {c.turn} · tool outputs masked</h4>{compaction_lines(c.change)}"
        return f"<h4>turn {c.turn} · context compacted</h4>{compaction_lines(c.change)}"

    def _summarized(self, s: Summarized) -> str:
        mark = s.mark
        where = f"{mark.provider}:{mark.model}"
        covers = "" if mark.covers is None else f": summary of {mark.covers:,} messages"
        head = f'<h4>turn {s.turn} · context compacted{covers} <span class="meta">· '
        head += f"{esc_line(where)}</span></h4>"
        rows = "".join(f"<tr><th>{k}</th><td>{esc_line(v)}</td></tr>" for k, v in mark.facts())
        if mark.summary is None:
            summary = '<p class="warn">the compaction call has not answered</p>'
        else:
            summary = pre(mark.summary, "text summary", whole=self.whole)
        n = len(mark.replaced)
        replaced = "".join(self._message(m) for m in mark.replaced)
        behind = folded(esc(f"the {n:,} message(s) it replaced"), replaced, "replaced")
        return f'{head}<table class="facts">{rows}</table>{summary}{behind if n else ""}'

    def _message(self, m: Message) -> str:
        """One message of a history, a masked output or a summary marked as such."""
        role = f'<p class="meta">{esc_line(m.role)}{esc_line(f" · {m.name}" if m.name else "")}'
        mask = placeholder_of(m)
        if mask is not None:
            return f'{role}</p><p class="masked">⊘ {esc_line(mask.describe())}</p>'
        summary = summary_of(m)
        if summary is not None:
            said = f" · the summary kept in seq {summary[0]}"
            return f"{role}{esc_line(said)}</p>{pre(summary[1], 'summary', whole=self.whole)}"
        calls = "".join(
            f'<pre class="args">{esc(f"{c.name}({c.arguments})")}</pre>' for c in m.tool_calls
        )
        text = pre(m.content, "obs" if m.role == "tool" else "text", whole=self.whole)
        return f"{role}</p>{text if m.content else ''}{calls}"


def compaction_lines(change: RequestDiff) -> str:
    """What a compaction did to the messages: how many were kept, each one it removed,
    changed or added (one line each)."""
    counts = {k: sum(m.kind == k for m in change.messages) for k in ("removed", "changed", "added")}
    said = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    items = []
    for m in change.messages:
        mask = placeholder_of(m.after) if m.after is not None else None
        if mask is not None:
            items.append(f'<li class="masked">⊘ {esc_line(mask.describe())}</li>')
            continue
        sides = [f"{x.role}: {brief(x, 300)}" for x in (m.before, m.after) if x is not None]
        items.append(f"<li>{esc_line(m.kind)} {esc_line(' → '.join(sides))}</li>")
    head = f'<p class="meta">{change.kept} message(s) kept; {esc_line(said or "none changed")}</p>'
    return head + f"<ul>{''.join(items)}</ul>"


def action(message: Message, limit: int = 300) -> str:
    """A candidate action in one line: its tool calls, then its text (both shortened)."""
    calls = [f"{c.name}({c.arguments})" for c in message.tool_calls]
    text = " ".join(message.content.split())
    said = " · ".join([*calls, *([json.dumps(text, ensure_ascii=False)] if text else [])])
    said = said or "(empty message)"
    return said if len(said) <= limit else said[: limit - 1] + "…"


def usage_line(u: ev.Usage) -> str:
    """A turn's usage and cost (unknown counts as ``?``, never 0)."""
    cost = "?" if u.cost_usd is None else f"${u.cost_usd:.4f}"
    return (
        f"usage: {count(u.input_tokens)} in · {count(u.cache_read_tokens)} cached · "
        f"{count(u.output_tokens)} out · {count(u.reasoning_tokens)} reasoning · {cost}"
    )
