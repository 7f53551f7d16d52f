"""The group coordinator's settings, apart from the coordinator: the configuration loader reads
them, and every kafkatier command loads the configuration, so this module imports nothing of the
wire protocol (kio takes half a second to import)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupSettings:
    """Kafka's broker settings of the same names (serve/config.py reads them)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    offset_metadata_max_bytes: int = 4096
