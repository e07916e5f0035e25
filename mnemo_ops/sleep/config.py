"""The ``sleep`` section of the settings schema, read once into one object the stages share."""

from __future__ import annotations

import dataclasses

from mnemo_ops.settings import Settings, parse_time_range
from mnemo_ops.sleep import kinds
from mnemo_ops.sleep.prominence import Retention


@dataclasses.dataclass(frozen=True)
class SleepOptions:
    """Every number the sleep stages use (README, "Sleep stages"); defaults live in the schema."""

    enabled: bool
    retention: Retention
    confirmation_similarity: float
    reinforcement_rows_per_night: int
    forgetting: bool
    archive_after_days: float
    archive_utility: float
    max_archived_per_night: int
    protect_eval_answers: bool
    hebbian_rate: float
    downscale: float
    edge_floor: float
    quiet_hours: tuple[int, int]
    hours_between_sleeps: float
    entropy_threshold: float
    entropy_min_memories: int
    contradiction_density: float
    multi_valued_predicates: tuple[str, ...]

    @classmethod
    def from_settings(cls, settings: Settings) -> SleepOptions:
        """Read the ``sleep`` section (and the triple predicates monthly-maintenance treats as lists)."""

        def option(key: str):
            return settings.option(f"sleep.{key}")

        return cls(
            enabled=bool(option("enabled")),
            retention=Retention(
                by_kind={kind: float(option(f"retention_{kind}")) for kind in kinds.KINDS},
                grace_days=float(option("grace_days")),
            ),
            confirmation_similarity=float(option("confirmation_similarity")),
            reinforcement_rows_per_night=int(option("reinforcement_rows_per_night")),
            forgetting=bool(option("forgetting")),
            archive_after_days=float(option("archive_after_days")),
            archive_utility=float(option("archive_utility")),
            max_archived_per_night=int(option("max_archived_per_night")),
            protect_eval_answers=bool(option("protect_eval_answers")),
            hebbian_rate=float(option("hebbian_rate")),
            downscale=float(option("downscale")),
            edge_floor=float(option("edge_floor")),
            quiet_hours=parse_time_range(option("quiet_hours")) or (120, 300),
            hours_between_sleeps=float(option("hours_between_sleeps")),
            entropy_threshold=float(option("entropy_threshold")),
            entropy_min_memories=int(option("entropy_min_memories")),
            contradiction_density=float(option("contradiction_density")),
            multi_valued_predicates=tuple(
                settings.option("monthly_maintenance.multi_valued_predicates") or ()
            ),
        )
