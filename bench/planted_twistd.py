"""``twistd`` with a planted slowdown: proves that ``bench/run.py --check`` catches a regression.

``bench/run.py --plant-slowdown US`` starts the gateway through this launcher instead of the
``twistd`` script.  Before handing over to twistd it wraps the /v1 resource's ``render`` so that
every request first burns ``US`` microseconds of CPU on the reactor thread -- the shape of a
real regression (more Python per request).  Only the benchmark uses it; the product has no such
switch.

    python bench/planted_twistd.py 150 -n lockgate --listen ...
"""

from __future__ import annotations

import sys
import time
from typing import Any


def plant(microseconds: float) -> None:
    from gateway.v1.resource import GatewayResource

    render = GatewayResource.render
    seconds = microseconds / 1e6

    def slow_render(self: GatewayResource, request: Any) -> Any:
        until = time.thread_time() + seconds
        while time.thread_time() < until:
            pass
        return render(self, request)

    GatewayResource.render = slow_render  # type: ignore[method-assign]


def main() -> None:
    plant(float(sys.argv[1]))
    sys.argv = ["twistd", *sys.argv[2:]]
    from twisted.scripts.twistd import run

    run()


if __name__ == "__main__":
    main()
