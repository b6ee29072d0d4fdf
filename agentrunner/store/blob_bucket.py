"""Workspace blobs in an S3-compatible bucket (the optional extra ``agentrunner[s3]``).

A store may keep its workspace blobs' bytes in a bucket instead of its ``blobs`` table: the
store then holds only the index (``blob_objects``: the blobs the bucket holds for it, with
their sizes) and where the bucket is (``blob_bucket``: ``s3://BUCKET/PREFIX``, set once with
:func:`use_bucket`, never a credential). Every process that opens the store finds the bucket
there, so the writers of a team store, on any machine, put and fetch blobs in one place.
boto3 finds the server and the credentials as it always does: ``AWS_ENDPOINT_URL`` for a
server other than AWS (MinIO, Ceph, moto), ``AWS_ACCESS_KEY_ID`` and
``AWS_SECRET_ACCESS_KEY``, a profile, or an instance role.

Keys are content-addressed (``PREFIX/sha256/HASH``). An object is put before the index row
that names it is committed, and a snapshot row is written after its blobs are indexed, so a
writer killed at any instant leaves at worst an object no row names (gc deletes it), never a
row naming a missing object. A prefix belongs to one store (``PREFIX/agentrunner-store``
holds that store's id): gc deletes the objects its store does not name, which another
store's rows could otherwise name.
"""

from __future__ import annotations

import functools
import io
import itertools
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentrunner.store.base import utc_now
from agentrunner.store.dialect import Conn, Dialect
from agentrunner.values.errors import StoreError

if TYPE_CHECKING:
    from concurrent.futures import Future

    from agentrunner.store.base import StoreBase

_MARKER = "agentrunner-store"
_IN_FLIGHT = 8
"""Objects put at once (each holds at most two of its parts in memory meanwhile)."""
_ROWS_PER_COMMIT = 500
_DELETE_BATCH = 1000
"""Keys per ``DeleteObjects`` request (S3's limit)."""


def _parse(url: str) -> tuple[str, str]:
    """The bucket and the key prefix (no slashes around it) of ``s3://BUCKET[/PREFIX]``."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.hostname or parts.query or parts.fragment:
        raise StoreError(
            f"{url!r} is not a bucket location: give s3://BUCKET or s3://BUCKET/PREFIX"
        )
    if "@" in parts.netloc or parts.port is not None:
        raise StoreError(
            "a bucket location names no credentials or server: give s3://BUCKET/PREFIX, and the"
            " server and credentials as boto3 reads them (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,"
            " AWS_SECRET_ACCESS_KEY or a profile)"
        )
    return parts.netloc, parts.path.strip("/")


@contextmanager
def _talking_to(url: str, what: str) -> Iterator[None]:
    """Translate the S3 client's errors into the store's (one line a user can act on)."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        yield
    except NoCredentialsError:
        raise StoreError(
            f"{url}: {what}: no credentials for the bucket; set AWS_ACCESS_KEY_ID and"
            " AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), and AWS_ENDPOINT_URL for a server"
            " other than AWS"
        ) from None
    except (BotoCoreError, ClientError) as exc:
        raise StoreError(f"{url}: {what}: {exc}") from None


class _Parts(io.RawIOBase):
    """A blob's parts read as one stream (for a multipart upload of a large blob)."""

    def __init__(self, parts: Iterator[bytes]) -> None:
        self._parts = parts
        self._pending = b""
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._parts, None)
            if chunk is None:
                return 0
            self._pending = chunk
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        self.size += n
        return n


class Bucket:
    """One store's place in a bucket: its blobs by sha256, and the marker naming the store."""

    def __init__(self, url: str, store_id: str) -> None:
        try:
            import boto3
        except ImportError:
            raise StoreError(
                f"workspace blobs in {url} need boto3, which is not installed"
                " (pip install 'agentrunner[s3]'); nothing was changed"
            ) from None
        self.url = url
        self.name, self.prefix = _parse(url)
        self.store_id = store_id
        with _talking_to(url, "connecting"):
            self._client = boto3.client("s3")

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def key(self, digest: str) -> str:
        return self._key(f"sha256/{digest}")

    def owner(self) -> str | None:
        """The id of the store this prefix belongs to (None: no store's yet)."""
        with _talking_to(self.url, "reading the prefix's owner"):
            try:
                answer = self._client.get_object(Bucket=self.name, Key=self._key(_MARKER))
            except self._client.exceptions.NoSuchKey:
                return None
            return str(answer["Body"].read().decode())

    def claim(self) -> None:
        """Mark the prefix as this store's; refuse one that is another store's."""
        owner = self.owner()
        if owner is None:
            with _talking_to(self.url, "marking the prefix as this store's"):
                self._client.put_object(
                    Bucket=self.name, Key=self._key(_MARKER), Body=self.store_id.encode()
                )
        elif owner != self.store_id:
            raise StoreError(
                f"{self.url} holds another store's blobs (its {_MARKER} names store {owner});"
                " give each store a prefix of its own"
            )

    def put(self, digest: str, parts: Iterable[bytes]) -> int:
        """Put one blob (its parts as one object); return its size."""
        it = iter(parts)
        first = next(it, b"")
        second = next(it, None)
        with _talking_to(self.url, f"putting blob {digest[:12]}"):
            if second is None:
                self._client.put_object(Bucket=self.name, Key=self.key(digest), Body=first)
                return len(first)
            from boto3.s3.transfer import TransferConfig

            stream = _Parts(itertools.chain([first, second], it))
            config = TransferConfig(use_threads=False)
            self._client.upload_fileobj(stream, self.name, self.key(digest), Config=config)
            return stream.size

    def _object(self, digest: str) -> Any:
        try:
            return self._client.get_object(Bucket=self.name, Key=self.key(digest))
        except self._client.exceptions.NoSuchKey:
            raise StoreError(
                f"workspace blob {digest[:12]} is missing from {self.url} (the store's"
                " index names it: was it deleted from the bucket by hand?)"
            ) from None

    def get(self, digest: str) -> bytes:
        with _talking_to(self.url, f"fetching blob {digest[:12]}"):
            return bytes(self._object(digest)["Body"].read())

    def get_parts(self, digest: str, size: int) -> Iterator[bytes]:
        """The blob in parts of at most ``size`` bytes (one empty part for an empty blob),
        streamed, never whole in memory."""
        with _talking_to(self.url, f"fetching blob {digest[:12]}"):
            empty = True
            for part in self._object(digest)["Body"].iter_chunks(size):
                empty = False
                yield bytes(part)
            if empty:
                yield b""

    def digests(self) -> Iterator[str]:
        """The hashes of every blob under the prefix."""
        start = self.key("")
        with _talking_to(self.url, "listing blobs"):
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.name, Prefix=start
            )
            for page in pages:
                for item in page.get("Contents", []):
                    yield str(item["Key"])[len(start) :]

    def delete(self, digests: list[str]) -> None:
        with _talking_to(self.url, "deleting blobs"):
            for i in range(0, len(digests), _DELETE_BATCH):
                keys = [{"Key": self.key(d)} for d in digests[i : i + _DELETE_BATCH]]
                self._client.delete_objects(
                    Bucket=self.name, Delete={"Objects": keys, "Quiet": True}
                )


@functools.cache
def _opened(url: str, store_id: str) -> Bucket:
    """The bucket of a store, its prefix's owner checked once per process."""
    bucket = Bucket(url, store_id)
    bucket.claim()
    return bucket


def bucket_of(conn: Conn) -> Bucket | None:
    """The bucket the store keeps its blobs in (None: its ``blobs`` table)."""
    row = conn.execute("SELECT url, store_id FROM blob_bucket").fetchone()
    return None if row is None else _opened(str(row[0]), str(row[1]))


def use_bucket(store: StoreBase, url: str) -> None:
    """Keep the store's new workspace blobs in the bucket at ``url`` (``s3://BUCKET/PREFIX``;
    the server and credentials come from boto3's usual environment, never from the store).
    Blobs already in the store stay there and are read as before. Setting the same bucket
    again does nothing; another is refused."""
    _parse(url)
    conn = store._conn
    row = conn.execute("SELECT url, store_id FROM blob_bucket").fetchone()
    if row is not None:
        if str(row[0]) != url:
            raise StoreError(f"{store.where} keeps its blobs in {row[0]} already")
        _opened(url, str(row[1]))
        return
    import uuid

    store_id = uuid.uuid4().hex
    Bucket(url, store_id).claim()  # a store claims the prefix before it names it
    with store._writing():
        conn.execute(
            store.sql.keep_existing(
                "INSERT INTO blob_bucket (id, url, store_id, created_at) VALUES (1, ?, ?, ?)"
            ),
            (url, store_id, utc_now()),
        )


def indexed(conn: Conn, digest: str) -> bool:
    row = conn.execute("SELECT 1 FROM blob_objects WHERE hash = ?", (digest,)).fetchone()
    return row is not None


def put_blobs(
    conn: Conn, sql: Dialect, bucket: Bucket, blobs: Iterable[tuple[str, Iterable[bytes]]]
) -> int:
    """Put each ``(sha256, parts)`` into the bucket, a few at once, and index each after its
    object is in (the index rows of several share a commit); return the bytes put."""
    from concurrent.futures import ThreadPoolExecutor

    written = 0
    done: list[tuple[str, int]] = []
    flying: deque[tuple[str, Future[int]]] = deque()

    def land() -> None:
        nonlocal written
        digest, future = flying.popleft()
        size = future.result()
        written += size
        done.append((digest, size))
        if len(done) >= _ROWS_PER_COMMIT:
            _index(conn, sql, done)

    with ThreadPoolExecutor(_IN_FLIGHT) as pool:
        try:
            for digest, parts in blobs:
                flying.append((digest, pool.submit(bucket.put, digest, parts)))
                if len(flying) >= _IN_FLIGHT:
                    land()
            while flying:
                land()
        finally:
            for _, future in flying:
                future.cancel()
    _index(conn, sql, done)
    return written


def _index(conn: Conn, sql: Dialect, done: list[tuple[str, int]]) -> None:
    if not done:
        return
    conn.execute(sql.begin_write)
    try:
        if sql.flush_on_commit is not None:  # a snapshot naming them outlives a server crash
            conn.execute(sql.flush_on_commit)
        conn.executemany(
            sql.keep_existing("INSERT INTO blob_objects (hash, bytes) VALUES (?, ?)"), done
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    done.clear()
