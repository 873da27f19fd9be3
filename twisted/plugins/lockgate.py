"""twistd plugin entry point: ``twistd -n lockgate``."""

from twisted.application.service import ServiceMaker

lockgate = ServiceMaker(
    "Lockgate", "tap.service", "AI model gateway with a console.", "lockgate"
)
