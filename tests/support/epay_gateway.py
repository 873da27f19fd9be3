"""A fake EPay ("yipay") payment gateway on a real loopback port.

It speaks the protocol independently of our implementation (its own signing code), so a
mistake in ours shows up as a refused redirect or a refused notification::

    gateway = FakeEpayGateway.start(pid="1001", key="merchant-key")
    self.addCleanup(gateway.stop)
    # settings: payment_yipay_gateway_url = gateway.base_url, pid, key
    status = await gateway.open(payment_url)          # the buyer's browser opens the pay page
    status, text = await gateway.notify(order_no)    # the gateway's async notification

``open`` checks the redirect's signature and remembers the order's parameters (``notify_url``,
``money``, ...); ``notify`` sends a signed notification to that ``notify_url`` (GET query by
default, or a POST form), with knobs to forge the key, amount, pid or status.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import treq
from twisted.internet import reactor as default_reactor
from twisted.web.client import HTTPConnectionPool
from twisted.web.resource import Resource
from twisted.web.server import Site

_trade_numbers = itertools.count(2026000001)


def epay_sign(params: dict[str, str], key: str) -> str:
    """MD5 of the sorted non-empty ``k=v`` pairs (without sign/sign_type) + merchant key."""
    text = "&".join(f"{k}={params[k]}" for k in sorted(params)
                    if k not in ("sign", "sign_type") and params[k] != "")
    return hashlib.md5((text + key).encode(), usedforsecurity=False).hexdigest()


class _Submit(Resource):
    isLeaf = True

    def __init__(self, gateway: FakeEpayGateway) -> None:
        super().__init__()
        self.gateway = gateway

    def render_GET(self, request: Any) -> bytes:
        params = {k.decode(): v[0].decode() for k, v in request.args.items()}
        self.gateway.submissions.append(params)
        if params.get("pid") != self.gateway.pid or \
                params.get("sign") != epay_sign(params, self.gateway.key) or \
                params.get("sign_type") != "MD5":
            request.setResponseCode(400)
            return b"bad signature"
        self.gateway.orders[params["out_trade_no"]] = params
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        return f"<html><body>Pay {params['money']} CNY</body></html>".encode()


class FakeEpayGateway:
    def __init__(self, pid: str, key: str) -> None:
        self.pid = pid
        self.key = key
        self.orders: dict[str, dict[str, str]] = {}
        self.submissions: list[dict[str, str]] = []
        self.port: Any = None
        self.pool = HTTPConnectionPool(default_reactor, persistent=False)

    @classmethod
    def start(cls, pid: str = "1001", key: str = "merchant-secret-key") -> FakeEpayGateway:
        gateway = cls(pid, key)
        root = Resource()
        root.putChild(b"submit.php", _Submit(gateway))
        gateway.port = default_reactor.listenTCP(0, Site(root), interface="127.0.0.1")
        return gateway

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port.getHost().port}/"

    async def stop(self) -> None:
        await self.pool.closeCachedConnections()
        await self.port.stopListening()

    async def open(self, payment_url: str) -> int:
        """Open the pay page as a buyer's browser would; the status code it answers."""
        response = await treq.get(payment_url, pool=self.pool)
        await treq.content(response)
        return int(response.code)

    def notification(self, order_no: str, *, money: str | None = None,
                     trade_status: str = "TRADE_SUCCESS", key: str | None = None,
                     pid: str | None = None, trade_no: str | None = None) -> dict[str, str]:
        """The signed parameters of a notification for an order opened earlier."""
        order = self.orders[order_no]
        params = {
            "pid": pid if pid is not None else self.pid,
            "trade_no": trade_no or str(next(_trade_numbers)),
            "out_trade_no": order_no,
            "type": order["type"],
            "name": order["name"],
            "money": money if money is not None else order["money"],
            "trade_status": trade_status,
        }
        params["sign"] = epay_sign(params, key if key is not None else self.key)
        params["sign_type"] = "MD5"
        return params

    async def send(self, url: str, params: dict[str, str], *,
                   method: str = "GET") -> tuple[int, str]:
        """Deliver notification ``params`` to ``url``; (status, body text)."""
        if method == "GET":
            response = await treq.get(url + "?" + urlencode(params), pool=self.pool)
        else:
            response = await treq.post(
                url, data=urlencode(params).encode(), pool=self.pool,
                headers={b"content-type": [b"application/x-www-form-urlencoded"]})
        return int(response.code), (await treq.content(response)).decode()

    async def notify(self, order_no: str, *, method: str = "GET",
                     **overrides: Any) -> tuple[int, str]:
        """Send a (by default genuine) notification for ``order_no`` to its notify_url."""
        params = self.notification(order_no, **overrides)
        return await self.send(self.orders[order_no]["notify_url"], params, method=method)


def query_of(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
