"""What a process tells its operator about itself: Prometheus metrics and OpenTelemetry traces.

Operations contract §2: every family, label and bucket is fixed there; this package keeps the
label values bounded and the per-request cost to a few dictionary lookups and increments.
"""
