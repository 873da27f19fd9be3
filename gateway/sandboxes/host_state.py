"""Whether a sandbox host is online right now ([P-41]: exactly when its device is, §2.5).

One small function so every reader (sandbox creation, the host listings) asks the same
question, and the answer can follow the device links' own bookkeeping if it moves: today the
device row's ``status`` (written ``offline`` the moment its link closes) and ``last_seen_at``
(within the 60 s window).
"""

from __future__ import annotations

from datetime import datetime

from gateway.store.devices import DeviceRow


def host_online(device: DeviceRow, now: datetime) -> bool:
    return device.online_at(now)
