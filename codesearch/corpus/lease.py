"""The one writer of a corpus in an S3 bucket: a lease object taken and kept with S3's conditional writes.

A local store's writer takes a file lock (:mod:`codesearch._lock`); a bucket
has no lock, so the writer of an ``s3://`` corpus holds ``.writer.lease``
instead. It is created only if absent (``PUT`` with ``If-None-Match: *``),
renewed by its holder every third of its term (``If-Match`` its own ETag) and
deleted on release. A holder killed with ``kill -9`` leaves it: once its term
has passed without a renewal (by the bucket's clock: the object's
``Last-Modified`` against the response's ``Date``) a waiter takes it over with
``If-Match`` the ETag it read, so that of two waiters one wins. A writer whose
lease was taken or could not be renewed within its term stops before its
manifest (:meth:`Lease.check`): what it committed before is rolled back by
the next writer, as after a kill.

The same conditional writes are what Lance's own commits on S3 rely on (a
manifest ``PUT`` with ``If-None-Match: *``; Lance >= 0.24): a store that
ignores the header lets two commits overwrite each other.
:func:`check_conditional_writes` proves the store refuses a second
create of one object before a writer commits anything there, once per process
and bucket.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection
from contextlib import suppress
from email.utils import parsedate_to_datetime
from typing import Any

from codesearch.exceptions import CorpusStoreError, IndexLockedError

LEASE_FILE = ".writer.lease"
LEASE_ENV = "CODESEARCH_CORPUS_LEASE_S"
"""Seconds a lease lasts without renewal (default :data:`LEASE_S`): how long a killed writer keeps others waiting."""
LEASE_S = 30.0
POLL_S = 0.25
"""Seconds between two tries while another writer holds the lease."""
_REFUSED = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
_checked: set[tuple[str | None, str]] = set()


def split_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> (``bucket``, ``some/prefix``)."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


def client(storage_options: dict[str, str]) -> Any:
    """A boto3 S3 client for Lance's ``storage_options`` (endpoint, keys, region); boto3 reads the rest from the
    ``AWS_*`` environment, as Lance and Arrow do."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise CorpusStoreError("writing a corpus in an S3 bucket needs boto3; pip install 'codesearch-hybrid[corpus]'") \
            from None
    options = {k.lower(): v for k, v in storage_options.items()}

    def first(*names: str) -> str | None:
        return next((options[n] for n in names if options.get(n)), None)

    return boto3.client(
        "s3", endpoint_url=first("aws_endpoint", "aws_endpoint_url", "endpoint"),
        aws_access_key_id=first("aws_access_key_id", "access_key_id"),
        aws_secret_access_key=first("aws_secret_access_key", "secret_access_key"),
        aws_session_token=first("aws_session_token", "session_token"), region_name=first("aws_region", "region"),
        config=Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 3, "mode": "standard"}))


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code") or response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))


def _refused(exc: Exception) -> bool:
    """Whether ``exc`` is S3 refusing a conditional write (412, or 409 for two at once)."""
    return _code(exc) in _REFUSED


_GONE = {"NoSuchKey", "404"}


def _ask(uri: str, request: Callable[[], Any], answers: Collection[str] = ()) -> Any:
    """``request``'s response, or ``None`` when S3 answered with an error whose code is one of ``answers``.

    Raises:
        CorpusStoreError: any other error, or none from the store (:func:`store_unavailable`).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return request()
    except ClientError as exc:
        if _code(exc) in answers:
            return None
        raise store_unavailable(uri, exc) from None
    except BotoCoreError as exc:
        raise store_unavailable(uri, exc) from None


def store_unavailable(uri: str, exc: Exception) -> CorpusStoreError:
    """The one-line error of a corpus whose object store did not answer (``exc``: what the client raised, or a
    Ray task's error around it)."""
    exc = getattr(exc, "cause", None) or exc  # a Ray task's error names the actor first, then the traceback
    first = (str(exc).splitlines() or [type(exc).__name__])[0]
    return CorpusStoreError(f"the object store of {uri} did not answer ({first}); nothing was committed past the "
                            "corpus's last version: run it again once the store is back")


def check_conditional_writes(uri: str, storage_options: dict[str, str], s3: Any | None = None) -> None:
    """Raise unless the store at ``uri`` refuses to create an object that exists (``If-None-Match: *``).

    Checked once per process and bucket, with a probe object it removes.

    Raises:
        CorpusStoreError: the store ignores or rejects the header (commits there could overwrite each other), or
            does not answer.
    """
    bucket, prefix = split_uri(uri)
    endpoint = {k.lower(): v for k, v in storage_options.items()}.get("aws_endpoint") or os.environ.get("AWS_ENDPOINT_URL")
    if (endpoint, bucket) in _checked:
        return
    from botocore.exceptions import BotoCoreError, ClientError

    s3 = s3 or client(storage_options)
    key = f"{prefix}/.probe-{uuid.uuid4().hex}" if prefix else f".probe-{uuid.uuid4().hex}"
    unsafe = CorpusStoreError(
        f"the object store of {uri} does not refuse a second create of one object (S3 conditional writes, "
        "If-None-Match: *): Lance's commits and the corpus's writer lease are not safe there; use a store with "
        "conditional writes (AWS S3, MinIO, Ceph RGW 18+, R2, ...)")
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=b"probe", IfNoneMatch="*")
        try:
            s3.put_object(Bucket=bucket, Key=key, Body=b"probe again", IfNoneMatch="*")
        except ClientError as exc:
            if not _refused(exc):
                raise unsafe from None
        else:
            raise unsafe
    except ClientError as exc:
        if _code(exc) in ("NotImplemented", "501", "400", "InvalidRequest"):
            raise unsafe from None
        raise store_unavailable(uri, exc) from None
    except BotoCoreError as exc:
        raise store_unavailable(uri, exc) from None
    finally:
        with suppress(ClientError, BotoCoreError):
            s3.delete_object(Bucket=bucket, Key=key)
    _checked.add((endpoint, bucket))


class Lease:
    """The writer's lease of the corpus at ``uri`` (``s3://bucket/prefix``).

    Args:
        uri: the corpus.
        storage_options: Lance's options for the store (endpoint, keys, region).
        term_s: seconds it lasts without renewal (default ``$CODESEARCH_CORPUS_LEASE_S`` or :data:`LEASE_S`).
    """

    def __init__(self, uri: str, storage_options: dict[str, str], term_s: float | None = None) -> None:
        self.uri = uri
        self.bucket, prefix = split_uri(uri)
        self.key = f"{prefix}/{LEASE_FILE}" if prefix else LEASE_FILE
        self.term_s = term_s if term_s is not None else float(os.environ.get(LEASE_ENV) or LEASE_S)
        self.storage_options = storage_options
        self.holder = f"pid {os.getpid()} on {socket.gethostname()}"
        self._s3: Any = None
        self._etag: str | None = None
        self._renewed = 0.0  # monotonic time of the last create or renewal
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Lease({self.uri!r})"

    def _body(self) -> bytes:
        return json.dumps({"holder": self.holder, "term_s": self.term_s, "token": uuid.uuid4().hex}).encode()

    def acquire(self, timeout: float) -> None:
        """Take the lease, waiting up to ``timeout`` seconds for another writer's to end.

        Raises:
            IndexLockedError: another writer holds it past ``timeout``.
            CorpusStoreError: the store does not answer, or does not support conditional writes.
        """
        self._s3 = self._s3 or client(self.storage_options)
        check_conditional_writes(self.uri, self.storage_options, self._s3)
        deadline = time.monotonic() + timeout
        while True:
            made = _ask(self.uri, lambda: self._s3.put_object(Bucket=self.bucket, Key=self.key, Body=self._body(),
                                                                 IfNoneMatch="*"), _REFUSED)
            if made is not None:
                self._held(made["ETag"])
                return
            holder = self._take_over_if_ended()
            if holder is None:
                return
            if time.monotonic() >= deadline:
                raise IndexLockedError(f"another process ({holder}) is writing the corpus at {self.uri}; wait for it "
                                       "to finish (a writer that died leaves it after its lease's term)")
            time.sleep(POLL_S)

    def _take_over_if_ended(self) -> str | None:
        """Take the lease over when its term has passed; ``None`` when taken, else who holds it."""
        found = _ask(self.uri, lambda: self._s3.get_object(Bucket=self.bucket, Key=self.key), _GONE)
        if found is None:
            return "a writer that just finished"  # released between the two calls: the next try creates it
        raw = _ask(self.uri, found["Body"].read)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        headers = found["ResponseMetadata"].get("HTTPHeaders", {})
        now = parsedate_to_datetime(headers["date"]) if "date" in headers else None
        term = float(body.get("term_s", LEASE_S))
        if now is None or (now - found["LastModified"]).total_seconds() <= term + 1.0:  # a second of rounding
            return str(body.get("holder", "another writer"))
        made = _ask(self.uri, lambda: self._s3.put_object(Bucket=self.bucket, Key=self.key, Body=self._body(),
                                                             IfMatch=found["ETag"]), _REFUSED | _GONE)
        if made is None:
            return "another writer that took the lease over"
        self._held(made["ETag"])
        return None

    def _held(self, etag: str) -> None:
        self._etag, self._renewed, self._lost = etag, time.monotonic(), None
        self._stop.clear()
        self._thread = threading.Thread(target=self._keep, name="codesearch-lease", daemon=True)
        self._thread.start()

    def _keep(self) -> None:
        """Renew the lease every third of its term until released or lost."""
        while not self._stop.wait(self.term_s / 3) and self.renew():
            pass

    def renew(self) -> bool:
        """Renew the lease now; whether this process may go on holding it (a store that did not answer is tried
        again at the next renewal: :meth:`check` says when the term has passed)."""
        from botocore.exceptions import BotoCoreError, ClientError

        with self._lock:
            if self._etag is None:
                return False
            try:
                made = self._s3.put_object(Bucket=self.bucket, Key=self.key, Body=self._body(), IfMatch=self._etag)
            except ClientError as exc:
                if _refused(exc) or _code(exc) in _GONE:
                    self._lost = "another writer took it over"
                    return False
                return True
            except BotoCoreError:
                return True
            self._etag, self._renewed = made["ETag"], time.monotonic()
            return True

    def check(self) -> None:
        """Raise unless this process still holds the lease (called before a commit that makes a version current).

        Raises:
            IndexLockedError: the lease was taken over, or not renewed within its term.
        """
        reason = self._lost
        if reason is None and time.monotonic() - self._renewed > self.term_s:
            reason = f"the store did not renew it for {self.term_s:.0f} s"
        if reason is not None:
            raise IndexLockedError(f"this run lost the writer's lease of {self.uri} ({reason}); nothing past the "
                                   "corpus's last version was made current: run it again")

    def release(self) -> None:
        """Stop renewing and delete the lease (if it is still this process's)."""
        from botocore.exceptions import BotoCoreError, ClientError

        self._stop.set()
        with self._lock:
            etag, self._etag = self._etag, None
        if self._thread is not None:
            self._thread.join(timeout=5)
        if etag is None or self._lost is not None:
            return
        try:
            self._s3.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=etag)
        except ClientError as exc:
            if _refused(exc):
                return  # another writer's now
            # A store without conditional deletes: delete it plainly (this process's, by its last renewal), or it
            # ends after its term.
            with suppress(ClientError, BotoCoreError):
                self._s3.delete_object(Bucket=self.bucket, Key=self.key)
        except BotoCoreError:
            pass  # the store did not answer: it ends after its term


__all__ = ["LEASE_ENV", "LEASE_FILE", "LEASE_S", "Lease", "check_conditional_writes", "client", "split_uri",
           "store_unavailable"]
