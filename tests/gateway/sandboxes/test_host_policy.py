"""[P-24] available range: the smallest of global bound, policy cap and reported capacity."""

from __future__ import annotations

from decimal import Decimal

from twisted.trial.unittest import TestCase

from gateway.sandboxes.host_policy import DEFAULT_POLICY, available_range, parse_policy


class AvailableRangeTests(TestCase):
    def test_global_bounds_when_nothing_limits(self) -> None:
        limits = available_range(parse_policy(""), None)
        self.assertEqual(limits.as_json(), {
            "cpu_cores": {"min": 0, "min_exclusive": True, "max": 64},
            "memory_mb": {"min": 128, "max": 262144},
            "disk_gb": {"min": 1, "max": 4096}, "images": []})
        # byte-identical to the origin's texts with default limits
        self.assertEqual(limits.cpu_error(), "CPU cores must be between 0 and 64")
        self.assertEqual(limits.memory_error(), "Memory must be between 128 MB and 262144 MB")
        self.assertEqual(limits.disk_error(), "Disk must be between 1 GB and 4096 GB")

    def test_policy_caps_and_reported_capacity_take_the_smallest(self) -> None:
        policy = {"max_cpu_cores": 16, "max_memory_mb": 65536, "max_disk_gb": 500,
                  "allowed_images": ["python:3.12-slim", "node:22"]}
        limits = available_range(policy, {"cpu_cores": 8, "memory_mb": 131072, "disk_gb": 200})
        self.assertEqual(limits.as_json(), {
            "cpu_cores": {"min": 0, "min_exclusive": True, "max": 8},
            "memory_mb": {"min": 128, "max": 65536},
            "disk_gb": {"min": 1, "max": 200}, "images": ["python:3.12-slim", "node:22"]})

    def test_fractional_cpu_and_nonsense_limits(self) -> None:
        limits = available_range({"max_cpu_cores": "2.5", "max_memory_mb": -1,
                                  "max_disk_gb": True}, {"cpu_cores": "many"})
        self.assertEqual(limits.max_cpu_cores, Decimal("2.5"))
        self.assertEqual(limits.cpu_error(), "CPU cores must be between 0 and 2.5")
        self.assertEqual((limits.max_memory_mb, limits.max_disk_gb), (262144, 4096))

    def test_policy_text(self) -> None:
        self.assertEqual(parse_policy(None), DEFAULT_POLICY)
        self.assertEqual(parse_policy("not json"), DEFAULT_POLICY)
        self.assertEqual(parse_policy('{"network":"bridge"}'), {"network": "bridge"})
