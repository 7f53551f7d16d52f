"""Failures of the S3 store itself, as one line naming the store, the endpoint and the cause.

botocore reports an unreachable endpoint, missing credentials, a bucket that does not exist or
credentials the server refuses as its own exception types, deep in a stack a user cannot act on.
Those are faults of the environment, not of kafkatier: every command should answer them with one
line that says which endpoint and which bucket, and what to check. :class:`GuardedClient` wraps
the boto3 client so that every request (and every page of a listing) raises
:class:`~kafkatier.tiering.errors.RemoteStoreError` for them; the answers a caller acts on (404,
412 and other per-object outcomes) stay botocore's ``ClientError``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import botocore.exceptions as bex

from kafkatier.tiering.errors import RemoteStoreError

CREDENTIAL_CHAIN = (
    "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws/credentials, ~/.aws/config, "
    "container or instance metadata"
)
"""Where botocore looks for credentials, in its order (kafkatier's files never hold them)."""

_DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
           "ExpiredToken", "TokenRefreshRequired", "AllAccessDisabled"}  # fmt: skip
_UNREACHABLE = (bex.EndpointConnectionError, bex.ConnectTimeoutError, bex.ConnectionClosedError,
                bex.ProxyConnectionError, bex.SSLError)  # fmt: skip
_NO_CREDENTIALS = (bex.NoCredentialsError, bex.PartialCredentialsError,
                   bex.CredentialRetrievalError)  # fmt: skip


def _cause(exc: BaseException, url: str, endpoint: str) -> str | None:
    """What went wrong, for a user; None when ``exc`` is not a failure of the store itself."""
    if isinstance(exc, _NO_CREDENTIALS):
        return f"no usable AWS credentials ({exc}); looked in {CREDENTIAL_CHAIN}"
    if isinstance(exc, bex.ProfileNotFound):
        return f"{exc} (remote.storage.s3.profile or AWS_PROFILE)"
    if isinstance(exc, bex.NoRegionError):
        return "no region: set remote.storage.s3.region (or AWS_REGION)"
    if isinstance(exc, _UNREACHABLE):
        return f"cannot reach {endpoint}: {exc}"
    if isinstance(exc, bex.ReadTimeoutError):
        return f"{endpoint} did not answer in time: {exc}"
    if isinstance(exc, bex.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        message = error.get("Message") or code
        if code == "NoSuchBucket":
            bucket = url[len("s3://") :].partition("/")[0]
            return f"bucket {bucket!r} does not exist at {endpoint} (NoSuchBucket)"
        if code in _DENIED or (status == 403 and code in ("", "403", "Forbidden")):
            return (f"{endpoint} refused the credentials or the access ({code or status}: "
                    f"{message}); credentials come from {CREDENTIAL_CHAIN}")  # fmt: skip
        if status == 301 or code in ("PermanentRedirect", "AuthorizationHeaderMalformed"):
            return (f"the bucket is in another region ({code}: {message}): "
                    "check remote.storage.s3.region")  # fmt: skip
    return None


def store_failure(exc: BaseException, url: str, endpoint: str) -> RemoteStoreError | None:
    """``exc`` as a :class:`RemoteStoreError` when it is a failure of the store itself."""
    cause = _cause(exc, url, endpoint)
    return None if cause is None else RemoteStoreError(f"remote store {url}: {cause}")


@contextlib.contextmanager
def translated(url: str, endpoint: str) -> Iterator[None]:
    """Raise failures of the store itself met inside as :class:`RemoteStoreError`."""
    try:
        yield
    except Exception as exc:
        failure = store_failure(exc, url, endpoint)
        if failure is None:
            raise
        raise failure from None


class GuardedClient:
    """A boto3 S3 client whose requests raise :class:`RemoteStoreError` for failures of the
    store itself (module docstring); anything else is the client's own attribute."""

    def __init__(self, client: Any, url: str, endpoint: str) -> None:
        self._client = client
        self._where = (url, endpoint)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._client, name)
        if name == "get_paginator":
            return lambda op: _GuardedPaginator(found(op), self._where)
        if name.startswith("_") or not callable(found):
            return found
        return self._guard(found)

    def _guard(self, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            with translated(*self._where):
                return method(*args, **kwargs)

        return call


class _GuardedPaginator:
    """A paginator whose pages, fetched as they are iterated, fail as the client's calls do."""

    def __init__(self, paginator: Any, where: tuple[str, str]) -> None:
        self._paginator = paginator
        self._where = where

    def paginate(self, **kwargs: Any) -> Iterator[Any]:
        with translated(*self._where):
            yield from self._paginator.paginate(**kwargs)
