"""Outgoing mail over SMTP with Twisted's own ESMTP client, configured by the ``smtp_*`` settings.

Why here and not a library: verification codes are the only mail Lockgate sends, and Twisted's
``ESMTPSenderFactory`` already speaks STARTTLS, implicit TLS and AUTH PLAIN/LOGIN on the reactor
we run on.  ``smtp_security`` picks the transport: ``starttls`` (the upgrade is required, never
silently skipped), ``tls`` (TLS from the first byte, port 465) or ``none``.  Certificates are
checked against the host name; tests pass ``trust_root`` for their throwaway certificate.  The
whole exchange is bounded by one timeout on the injected clock, which also drops the connection.
The server's name is resolved and checked by the outbound-safety connector's vetter under the
SSRF policy (``gateway.channels.safe_connect``) and the connection goes to the checked address;
the ClientFactory API is kept (not an endpoint) because the SMTP factory reports connection
failures through it.
"""

from __future__ import annotations

import email.policy
import io
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.defer import TimeoutError as DeferredTimeout
from twisted.internet.error import TimeoutError as ConnectTimeout
from twisted.internet.ssl import optionsForClientTLS
from twisted.logger import Logger
from twisted.mail.smtp import ESMTPSenderFactory, SMTPClientError, SMTPConnectError

from gateway.channels.net_policy import UrlPolicy
from gateway.channels.safe_connect import AddressRefused, AddressVetter
from gateway.settings.catalog_derived import derived
from gateway.settings.store import Settings

log = Logger()
DEFAULT_TIMEOUT = 30.0


class MailError(Exception):
    """The message could not be handed to the SMTP server; the text is safe to log."""


class MailNotConfigured(MailError):
    """``smtp_host`` or ``smtp_from`` is blank."""


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int
    #: starttls | tls | none
    security: str
    username: str
    password: str
    sender: str

    @classmethod
    def from_settings(cls, settings: Settings) -> SmtpConfig:
        return cls(
            host=settings.text("smtp_host").strip(),
            port=settings.integer("smtp_port", 587),
            security=derived(settings.text, settings.flag)["smtp_security"],
            username=settings.text("smtp_username"),
            password=settings.text("smtp_password"),
            sender=settings.text("smtp_from").strip(),
        )

    @property
    def configured(self) -> bool:
        return bool(self.host and self.sender)


def smtp_configured(settings: Settings) -> bool:
    return SmtpConfig.from_settings(settings).configured


def build_message(sender: str, to: str, subject: str, text: str, now: float) -> bytes:
    """A plain-text message with ``\\n`` line ends (the SMTP client converts them to CRLF)."""
    message = EmailMessage(policy=email.policy.default)
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = formatdate(now, usegmt=True)
    domain = parseaddr(sender)[1].rpartition("@")[2] or "lockgate.invalid"
    message["Message-ID"] = make_msgid(domain=domain)
    message.set_content(text)
    return message.as_bytes()


class Mailer:
    def __init__(self, reactor: Any, clock: Any, *, timeout: float = DEFAULT_TIMEOUT,
                 trust_root: Any = None) -> None:
        self._reactor = reactor
        self._clock = clock
        self._timeout = timeout
        self._trust_root = trust_root
        self._vetter = AddressVetter(reactor, clock)

    async def send(self, settings: Settings, to: str, subject: str, text: str) -> None:
        """Deliver one message to ``to``; raises ``MailError`` (or ``MailNotConfigured``)."""
        config = SmtpConfig.from_settings(settings)
        if not config.configured:
            raise MailNotConfigured("SMTP is not configured")
        envelope_from = parseaddr(config.sender)[1] or config.sender
        try:
            data = build_message(config.sender, to, subject, text, self._clock.seconds())
            recipient = to.encode("ascii")
            sender = envelope_from.encode("ascii")
        except (ValueError, UnicodeError) as exc:
            raise MailError(f"address cannot be sent to: {exc}") from None
        try:
            addresses = await self._vetter.vet(config.host, config.port,
                                               UrlPolicy.from_settings(settings))
        except AddressRefused as exc:
            raise MailError(f"SMTP server refused by the SSRF policy: {exc}") from None
        except OSError as exc:
            raise MailError(f"SMTP delivery failed: {exc}") from None
        try:
            await self._deliver(config, addresses[0], sender, recipient, data)
        except (CancelledError, DeferredTimeout):
            raise MailError("timed out talking to the SMTP server") from None
        except (SMTPClientError, SMTPConnectError, ConnectTimeout, OSError) as exc:
            raise MailError(f"SMTP delivery failed: {exc}") from None
        except Exception as exc:  # TLS and protocol errors arrive as many types
            log.failure("unexpected SMTP failure")
            raise MailError(f"SMTP delivery failed: {type(exc).__name__}") from None

    def _deliver(self, config: SmtpConfig, address: str, sender: bytes, recipient: bytes,
                 data: bytes) -> Deferred[Any]:
        """One exchange with the SMTP server at ``address`` (checked by the connector's
        vetter); TLS still verifies ``config.host``."""
        tls = None
        if config.security in ("starttls", "tls"):
            tls = optionsForClientTLS(config.host, trustRoot=self._trust_root)
        username = config.username.encode() if config.username else None
        password = config.password.encode() if config.username else None
        connector: Any = None

        def cancel(_: Deferred[Any]) -> None:
            factory.sendFinished = True
            if factory.currentProtocol is not None and factory.currentProtocol.transport:
                factory.currentProtocol.transport.abortConnection()
            elif connector is not None:
                connector.disconnect()

        result: Deferred[Any] = Deferred(cancel)
        factory = ESMTPSenderFactory(
            username, password, sender, [recipient], io.BytesIO(data), result,
            retries=0, timeout=None,
            contextFactory=tls if config.security == "starttls" else None,
            heloFallback=not username and config.security != "starttls",
            requireAuthentication=bool(username),
            requireTransportSecurity=config.security != "none",
            hostname=None,
        )
        if config.security == "tls":
            connector = self._reactor.connectSSL(address, config.port, factory, tls,
                                                 timeout=self._timeout)
        else:
            connector = self._reactor.connectTCP(address, config.port, factory,
                                                 timeout=self._timeout)
        result.addTimeout(self._timeout, self._clock)
        return result
