"""The exact body a recorded client sent for one of its calls, rebuilt from the store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentrunner.record.dialects import dialect
from agentrunner.record.proxied import proxied_request
from agentrunner.values.errors import UsageError

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def request_body(store: StoreBackend, episode_id: str, turn: int) -> dict[str, Any]:
    """The body of the recorded call at ``turn`` (secrets as redaction markers), rebuilt from
    its message chain, tools and params by its wire API's dialect."""
    row = store.last_at_turn(store.resolve(episode_id), "model.request", turn)
    api = proxied_request(row.payload).api if row is not None else None
    if api is None:
        raise UsageError(f"turn {turn} of {episode_id} is not a call recorded through the proxy")
    request = store.reconstruct_request(episode_id, turn)
    return dialect(api).rebuild(list(request.messages), list(request.tools), dict(request.params))
