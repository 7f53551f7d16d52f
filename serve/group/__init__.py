"""Consumer groups of ``kafkatier serve``, Kafka's classic protocol (KIP-62 era, JoinGroup v0-9).

This server coordinates every group (FindCoordinator names node 0, itself). From the bottom:
``records`` (Kafka's ``__consumer_offsets`` key and value schemas, and the partition of a group),
``offset_store`` (that topic in the server's own small log dir, replayed on start, fsynced
before a commit is acknowledged), ``member`` and ``group`` (one group's members and its state
machine, as Kafka's ``GroupMetadata``), ``coordinator`` (join, sync, heartbeat, leave and the
timers, on the event loop with an injectable clock). The APIs are ``serve/apis/groups.py``,
``serve/apis/offsets.py`` and ``serve/apis/group_admin.py``.

Assignments are computed by the group's leader (a client), as in the classic protocol: the
coordinator only relays the members' subscriptions to the leader and the leader's assignments
to the members.
"""
