"""Typed reads of a settings snapshot: parsed once, and never stale after a new snapshot."""

from __future__ import annotations

from decimal import Decimal

from twisted.trial.unittest import TestCase

from gateway.settings.store import Settings


class SnapshotTests(TestCase):
    def test_typed_values_follow_a_replaced_snapshot(self) -> None:
        settings = Settings({"checkin_enabled": "true", "log_retention_days": "7",
                             "quota_per_unit": "2.5"})
        assert settings.flag("checkin_enabled") is True
        assert settings.integer("log_retention_days") == 7
        assert settings.decimal("quota_per_unit") == Decimal("2.5")
        settings.replace({"checkin_enabled": "off", "log_retention_days": "x",
                          "quota_per_unit": "nope"})
        assert settings.flag("checkin_enabled") is False
        assert settings.integer("log_retention_days", 30) == 30
        assert settings.integer("log_retention_days", 5) == 5
        assert settings.decimal("quota_per_unit", Decimal(1)) == Decimal(1)

    def test_defaults_come_from_the_catalog(self) -> None:
        settings = Settings()
        assert settings.flag("no_such_setting") is False
        assert settings.integer("no_such_setting", 3) == 3
