"""The project's exception tree: every failure a user can meet, in one place.

Foreign errors (sqlite3, httpx, provider SDKs, subprocess) are translated into these
once, at the boundary where they happen; nothing else catches broadly.

    AgentRunnerError
    ├── UsageError            bad input from the user (unknown task, bad flag value)
    │   └── ApplyRefused          a change cannot go into that checkout (exit code 3)
    ├── StoreError            the trace store cannot be used
    │   ├── StoreCorruptError     not a SQLite file, or integrity check failed
    │   ├── StoreSchemaError      written by a newer agentrunner
    │   ├── EpisodeNotFoundError  no such episode (or an ambiguous id prefix)
    │   └── StoreDriverError      the database driver failed a statement (sqlite3, psycopg)
    │       ├── StoreRefusedError     a row refused (a constraint, the log's append-only rule)
    │       ├── StoreFailedError      locked, read-only, full, server gone, not permitted
    │       │   └── StoreUnreachableError the server unreachable past the store's patience
    │       └── StoreDamagedError     anything else the database reports (a damaged file)
    ├── EnvironmentFailure    the environment itself broke (not a tool error)
    │   └── DivergenceError       replaying recorded actions gave other observations
    ├── ModelError            the model call failed
    │   ├── ProviderConfigError   missing API key / unknown provider
    │   ├── ProviderAuthError
    │   ├── RateLimitError        (retryable)
    │   ├── ProviderServerError   5xx, connection dropped (retryable)
    │   ├── BadRequestError
    │   ├── ContextOverflowError  the history no longer fits the model's window
    │   └── IncompleteStreamError the stream ended without a finish reason
    └── Cancelled             cooperative cancel (cancel_check, Ctrl-C, cancel request)
"""

from __future__ import annotations


class AgentRunnerError(Exception):
    """Base of every error agentrunner raises on purpose."""

    exit_code = 1


class UsageError(AgentRunnerError):
    """The user asked for something that cannot be done as asked.

    ``param`` names the Python parameter at fault; messages spell it as ```name```, which the
    command line replaces by its flag (``turn`` -> ``--turn``)."""

    exit_code = 2

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class ApplyRefused(UsageError):
    """A change was refused by the checkout it was to go into (moved, not a checkout,
    conflicting local changes); nothing was written there."""

    exit_code = 3


class StoreError(AgentRunnerError):
    """The trace store cannot be opened or used."""


class StoreCorruptError(StoreError):
    """The file is not a usable SQLite trace store."""


class StoreSchemaError(StoreError):
    """The store was written by a newer agentrunner; it is refused, never half-read."""


class EpisodeNotFoundError(StoreError):
    """No episode matches the given id or prefix (or more than one does)."""

    exit_code = 2


class StoreDriverError(StoreError):
    """The database driver failed a statement; translated where the store's connection ran
    it (``agentrunner/store/driver.py``). The message is the driver's own; ``driver`` names
    the driver's error class, ``server`` the database that reported it (``sqlite``,
    ``postgres``)."""

    def __init__(self, message: str, *, driver: str, server: str) -> None:
        super().__init__(message)
        self.driver = driver
        self.server = server


class StoreRefusedError(StoreDriverError):
    """The database refused a row: a constraint, or the log's append-only triggers."""


class StoreFailedError(StoreDriverError):
    """The statement could not run: the store locked, read-only or full, its server gone, a
    permission missing."""


class StoreUnreachableError(StoreFailedError):
    """The store's server could not be reached: it refused the connection, dropped it, or is
    shutting down or starting up. A statement outside a transaction waits it out (up to the
    store's patience, ``AGENTRUNNER_STORE_PATIENCE``) before this is raised; a transaction
    it cut short was rolled back by the server (unless it was at its ``COMMIT``), so its
    caller may run it again."""


class StoreDamagedError(StoreDriverError):
    """Any other failure the database reports, such as a damaged file."""


class EnvironmentFailure(AgentRunnerError):
    """The environment broke (server died, workspace vanished); the episode is resumable.

    With ``retryable=False`` it cannot run the task as configured (a verifier program that
    does not exist): the episode fails with that error instead of waiting to be resumed."""

    retryable = True

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class DivergenceError(EnvironmentFailure):
    """Replaying recorded actions gave observations other than the recorded ones."""

    def __init__(self, message: str, *, report: list[dict[str, object]]) -> None:
        super().__init__(message)
        self.report = report


class ModelError(AgentRunnerError):
    """A model call failed (``attempt``: how many attempts were made, retries included)."""

    retryable = False
    attempt = 1

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class ProviderConfigError(ModelError):
    """The provider cannot be used as configured (missing key, unknown provider)."""


class ProviderAuthError(ModelError):
    """The provider refused the credentials."""


class RateLimitError(ModelError):
    """The provider rate-limited the call."""

    retryable = True


class ProviderServerError(ModelError):
    """The provider failed on its side or the connection broke."""

    retryable = True


class BadRequestError(ModelError):
    """The provider rejected the request as malformed."""


class ContextOverflowError(ModelError):
    """The conversation no longer fits the model's context window.

    The episode ends with stop reason ``context_overflow``; the way on is to fork it at an
    earlier turn or resume it with a shorter history.
    """


class IncompleteStreamError(ModelError):
    """The stream ended without a finish reason; ``partial`` holds what had arrived.

    ``partial`` is an :class:`agentrunner.values.types.AgentTurn` (typed loosely here to keep this
    module free of imports); the runner records it as the response with stop reason
    ``incomplete``.
    """

    retryable = True

    def __init__(self, message: str, *, partial: object | None = None) -> None:
        super().__init__(message)
        self.partial = partial


class Cancelled(AgentRunnerError):
    """The episode was cancelled cooperatively."""

    exit_code = 130

    def __init__(self, reason: str = "cancelled") -> None:
        super().__init__(reason)
        self.reason = reason
