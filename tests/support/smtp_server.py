"""A real SMTP server on loopback for tests, built on Twisted's ESMTP server.

It speaks plain SMTP, STARTTLS (``security="starttls"``) or TLS from the first byte
(``security="tls"``) with a throwaway certificate for ``localhost``/``127.0.0.1`` (``trust_root``
lets the client verify it), optionally requires AUTH PLAIN/LOGIN, and keeps every delivered
message so tests read the code out of the mail the application really sent.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from twisted.cred.checkers import AllowAnonymousAccess, InMemoryUsernamePasswordDatabaseDontUse
from twisted.cred.portal import IRealm, Portal
from twisted.internet import defer
from twisted.internet.ssl import Certificate, PrivateCertificate
from twisted.mail import smtp
from twisted.mail._cred import LOGINCredentials, PLAINCredentials
from twisted.mail.smtp import IMessage, IMessageDelivery
from zope.interface import implementer


@dataclass
class Received:
    mail_from: str
    rcpt_to: list[str]
    data: bytes
    #: the authenticated user name, or None for an anonymous sender
    user: str | None
    #: whether the session was encrypted when the message arrived
    secure: bool
    message: EmailMessage = field(init=False)

    def __post_init__(self) -> None:
        parsed = message_from_bytes(self.data, policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        self.message = parsed

    @property
    def text(self) -> str:
        body = self.message.get_body(preferencelist=("plain",))
        assert body is not None
        return str(body.get_content())

    def code(self) -> str:
        found = re.search(r"\b(\d{6})\b", self.text)
        assert found, self.text
        return found.group(1)


@implementer(IMessage)
class _Message:
    def __init__(self, server: SmtpServer, delivery: _Delivery, origin: str,
                 recipients: list[str]) -> None:
        self._server = server
        self._delivery = delivery
        self._origin = origin
        self._recipients = recipients
        self._lines: list[bytes] = []

    def lineReceived(self, line: bytes) -> None:
        self._lines.append(line)

    def eomReceived(self) -> defer.Deferred[None]:
        protocol = self._delivery.protocol
        secure = bool(protocol is not None and (protocol.startedTLS or self._server.security
                                                == "tls"))
        self._server.received.append(Received(
            self._origin, list(self._recipients), b"\n".join(self._lines) + b"\n",
            self._delivery.user, secure))
        waiters, self._server._waiters = self._server._waiters, []
        for waiter in waiters:
            waiter.callback(None)
        return defer.succeed(None)

    def connectionLost(self) -> None:
        self._lines = []


@implementer(IMessageDelivery)
class _Delivery:
    def __init__(self, server: SmtpServer, user: str | None) -> None:
        self._server = server
        self.user = user
        self.protocol: Any = None
        self._origin = ""
        self._recipients: list[str] = []

    def receivedHeader(self, helo: Any, origin: Any, recipients: Any) -> bytes:
        return b"Received: by lockgate-test-smtp"

    def validateFrom(self, helo: Any, origin: Any) -> Any:
        self._origin = str(origin)
        self._recipients = []
        return origin

    def validateTo(self, user: Any) -> Any:
        address = str(user.dest)
        if address in self._server.refuse:
            raise smtp.SMTPBadRcpt(user)
        self._recipients.append(address)
        return lambda: _Message(self._server, self, self._origin, self._recipients)


@implementer(IRealm)
class _Realm:
    def __init__(self, server: SmtpServer) -> None:
        self._server = server

    def requestAvatar(self, avatar_id: Any, mind: Any, *interfaces: Any) -> Any:
        user = avatar_id.decode() if isinstance(avatar_id, bytes) and avatar_id else None
        delivery = _Delivery(self._server, user)
        self._server._deliveries.append(delivery)
        return IMessageDelivery, delivery, lambda: None


class _Protocol(smtp.ESMTP):
    def validateTo(self, user: Any) -> Any:
        if isinstance(self.delivery, _Delivery):
            self.delivery.protocol = self
        return super().validateTo(user)


class _Factory(smtp.SMTPFactory):
    protocol = _Protocol

    def __init__(self, server: SmtpServer, portal: Portal) -> None:
        super().__init__(portal)
        self._server = server

    def buildProtocol(self, addr: Any) -> Any:
        p = super().buildProtocol(addr)
        p.challengers = {b"LOGIN": LOGINCredentials, b"PLAIN": PLAINCredentials}
        p.ctx = self._server.tls_options if self._server.security == "starttls" else None
        p.host = b"localhost"
        self._server.protocols.append(p)
        return p


def throwaway_certificate() -> PrivateCertificate:
    """A self-signed certificate for ``localhost`` and ``127.0.0.1`` (EC P-256, one day)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    return PrivateCertificate.loadPEM(pem)


class SmtpServer:
    """``security``: none | starttls | tls.  ``users``: required AUTH credentials, if any."""

    def __init__(self, reactor: Any, *, security: str = "none",
                 users: dict[str, str] | None = None) -> None:
        self.reactor = reactor
        self.security = security
        self.users = users
        self.received: list[Received] = []
        #: recipient addresses answered with 550
        self.refuse: set[str] = set()
        self.protocols: list[Any] = []
        self._deliveries: list[_Delivery] = []
        self._waiters: list[defer.Deferred[None]] = []
        self._certificate = throwaway_certificate()
        self.tls_options = self._certificate.options()
        self.port: Any = None

    @property
    def trust_root(self) -> Certificate:
        return Certificate(self._certificate.original)

    def start(self) -> int:
        portal = Portal(_Realm(self))
        if self.users:
            checker = InMemoryUsernamePasswordDatabaseDontUse(
                **{name: secret.encode() for name, secret in self.users.items()})
            portal.registerChecker(checker)
        else:
            portal.registerChecker(AllowAnonymousAccess())
        factory = _Factory(self, portal)
        if self.security == "tls":
            self.port = self.reactor.listenSSL(0, factory, self.tls_options,
                                               interface="127.0.0.1")
        else:
            self.port = self.reactor.listenTCP(0, factory, interface="127.0.0.1")
        return int(self.port.getHost().port)

    def stop(self) -> defer.Deferred[Any]:
        for protocol in self.protocols:
            if protocol.transport is not None:
                protocol.transport.abortConnection()
        return defer.maybeDeferred(self.port.stopListening)

    def settings(self, **overrides: str) -> dict[str, str]:
        """The ``smtp_*`` settings that point Lockgate at this server."""
        rows = {
            "smtp_host": "localhost", "smtp_port": str(self.port.getHost().port),
            "smtp_security": self.security, "smtp_from": "Lockgate <no-reply@example.com>",
            "smtp_username": "", "smtp_password": "",
            # the server lives on loopback, which the SSRF policy refuses by default
            "ssrf_allow_private_networks": "true",
        }
        if self.users:
            name, secret = next(iter(self.users.items()))
            rows.update(smtp_username=name, smtp_password=secret)
        rows.update(overrides)
        return rows

    def last_to(self, address: str) -> Received:
        for item in reversed(self.received):
            if address in item.rcpt_to:
                return item
        raise AssertionError(f"no mail to {address}; got {[r.rcpt_to for r in self.received]}")
