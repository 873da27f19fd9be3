"""[P-33]: the charter's approval policy decides a level it names; otherwise the autonomy level
does; and the §4.10 queue rule by risk."""

from __future__ import annotations

from twisted.trial.unittest import TestCase

from gateway.studio import risk


class RiskTests(TestCase):
    def test_policy_names_a_level(self) -> None:
        assert risk.policy_for("r3", risk.DEFAULT_POLICY, "r2") == "owner_required"
        assert risk.policy_for("r4", risk.DEFAULT_POLICY, "r2") == "forbidden"
        assert risk.policy_for("r3", '{"r3":"auto"}', "r0") == "auto"
        assert risk.policy_for("r0", '{"r0":"owner_required"}', "r2") == "owner_required"

    def test_autonomy_decides_unnamed_levels(self) -> None:
        assert risk.policy_for("r0", risk.DEFAULT_POLICY, "r0") == "auto"
        assert risk.policy_for("r1", risk.DEFAULT_POLICY, "r0") == "owner_required"
        assert risk.policy_for("r1", risk.DEFAULT_POLICY, "r1") == "auto"
        assert risk.policy_for("r2", risk.DEFAULT_POLICY, "r2") == "auto"
        assert risk.policy_for("r2", "{}", "r1") == "owner_required"
        # an unknown policy word, a non-object policy or broken text falls back to autonomy
        assert risk.policy_for("r1", '{"r1":"maybe"}', "r1") == "auto"
        assert risk.policy_for("r1", "[1]", "r0") == "owner_required"
        assert risk.policy_for("r0", "{", "r0") == "auto"

    def test_levels_normalize(self) -> None:
        assert [risk.risk_level(v) for v in ("R3", " r4 ", "r5", None, 3)] == [
            "r3", "r4", "r0", "r0", "r0"]
        assert [risk.autonomy_level(v) for v in ("r2", "r3", "", None)] == [
            "r2", "r0", "r0", "r0"]

    def test_queue_rule(self) -> None:
        assert risk.may_queue("r0", "planned") and risk.may_queue("r2", "authorized")
        assert risk.may_queue("r1", "blocked") and risk.may_queue("r0", "dead_letter")
        assert risk.may_queue("r3", "authorized") and not risk.may_queue("r3", "planned")
        assert not risk.may_queue("r4", "authorized")
        assert not risk.may_queue("r0", "queued") and not risk.may_queue("r0", "delivered")
        assert not risk.may_queue("r0", "owner_decision")
