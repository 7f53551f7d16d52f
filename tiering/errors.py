"""Typed errors of the tiering layer, rooted in kafkatier's error tree (picklable)."""

from __future__ import annotations

from kafkatier.storage.errors import KafkaTierError


class TieringError(KafkaTierError):
    """Root of errors from kafkatier.tiering (remote store, manifests, upload, restore)."""


class PreconditionFailedError(TieringError):
    """A conditional write lost: the object exists (If-None-Match) or changed (If-Match)."""


class ObjectNotFoundError(TieringError):
    """A remote object that should exist does not; ``key`` names it."""


class RemoteVerifyError(TieringError):
    """A remote or restored copy whose size or checksum differs from what the manifest records."""


class TopicIdMismatchError(TieringError):
    """Remote data of one topic incarnation met a partition of another (the same name, another
    topic id): it is never applied to, restored into or read as that partition."""


class RemoteStoreError(TieringError):
    """The remote store itself cannot be used (unreachable endpoint, no or refused credentials,
    missing bucket): a fault of the environment, named in one line (store, endpoint, cause)."""


class CorruptRemoteObjectError(RemoteVerifyError):
    """A remote object's bytes fail a check of their own (a batch CRC, offsets outside the
    segment): never served or restored; ``key`` and ``position`` name where."""
