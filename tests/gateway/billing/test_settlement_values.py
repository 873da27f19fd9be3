"""``prepared_settlement``: a record's batch item in one pass, the same as ``prepare(row())``.

The settler no longer builds ``SettlementRecord.row()`` for every request; what it writes must
still be exactly what ``prepare`` made of that row -- every usage-log value, the rollup hour,
and the billing inputs the batch and the metrics read.  Then a real batch: rows settled by
the settler and rows written from ``row()`` dicts by ``write_batch`` are the same.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal as D
from types import MappingProxyType
from typing import Any

from sqlalchemy import select

from gateway.billing.cost import PriceSet, compute_cost
from gateway.billing.usage import Usage
from gateway.ledger.settlement import SettlementRecord
from gateway.ledger.settlement_values import prepared_settlement
from gateway.store import schema
from gateway.store.billing_writes import write_batch
from gateway.store.second_texts import SecondTexts
from gateway.store.settlement_rows import prepare
from tests.gateway.billing.ledger_case import NOW, UNIT, LedgerCase

#: what ``_write`` and ``GatewayMetrics.settled`` read from an item
BILLING_INPUTS = ("request_id", "user_id", "api_key_id", "cost_nanos", "delivered",
                  "model_name", "input_tokens", "output_tokens", "cached_input_tokens",
                  "user_channel_id", "channel_id")
PRICES = PriceSet(input=D("2.5"), output=D(10), cached_input=D("1.25"),
                  cache_write_5m=D("3.125"))


def text(rng: random.Random, longest: int) -> str:
    return "".join(rng.choice("abcé-/.") for _ in range(rng.randrange(longest)))


def random_record(rng: random.Random, moment: datetime) -> SettlementRecord:
    """A record with every field varied: no cost / a cost with multipliers, usage needing
    clamping, texts past their columns' lengths, prices absent / dict / read-only mapping,
    ``created_at`` absent / UTC / another zone."""
    usage = Usage(input=rng.randrange(-5, 3000), output=rng.randrange(-5, 900),
                  cache_read=rng.randrange(0, 4000), cache_write_5m=rng.randrange(0, 50),
                  cache_write_1h=rng.randrange(0, 50), image_in=rng.randrange(0, 9),
                  image_out=rng.randrange(0, 9), audio_in=rng.randrange(0, 9),
                  audio_out=rng.randrange(0, 9), reasoning=rng.randrange(0, 9))
    cost = None if rng.random() < 0.3 else compute_cost(
        usage, PRICES, rng.choice((D(1), D("1.5"), D("0.8"))), rng.choice((D(1), D("1.25"))))
    prices: Mapping[str, Any] | None = rng.choice(
        (None, PRICES.as_json(), MappingProxyType(PRICES.as_json())))
    created = rng.choice((None, moment, moment.astimezone(timezone(timedelta(hours=-3)))))
    return SettlementRecord(
        request_id=text(rng, 80), user_id=rng.randrange(1, 9),
        api_key_id=rng.choice((None, 4)), cost=cost, usage=usage,
        delivered=rng.random() < 0.7, model_name=text(rng, 260),
        meta_model_name=text(rng, 20), endpoint=text(rng, 130), is_stream=rng.random() < 0.5,
        status=rng.choice((0, 400, 429, 499, 502)), error_message=text(rng, 700),
        upstream_status=rng.choice((None, 500)), failure_reason=text(rng, 600),
        response_time_ms=rng.randrange(5000), first_response_time_ms=rng.randrange(5000),
        user_channel_id=rng.choice((None, 2)), channel_id=rng.choice((None, 5)),
        model_config_id=rng.choice((None, 9)), prices=prices, ip=text(rng, 80),
        user_agent=text(rng, 600), created_at=created)


class PreparedSettlementTests(LedgerCase):
    def test_the_same_values_hour_and_billing_inputs_as_prepare_of_row(self) -> None:
        rng = random.Random(2222)
        times = SecondTexts()
        moment = NOW
        for _ in range(3000):
            moment += timedelta(microseconds=rng.choice((1, 900, 400_000, 3_000_000_000)))
            record = random_record(rng, moment)
            row = record.row()
            for dialect in ("sqlite", "postgresql"):
                new, old = prepared_settlement(record, dialect, times), prepare(row, dialect)
                assert new.values == old.values, record
                assert [type(v) for v in new.values] == [type(v) for v in old.values]
                assert (new.hour, new.dialect) == (old.hour, old.dialect)
                assert {name: new.item[name] for name in BILLING_INPUTS} == {
                    name: row[name] for name in BILLING_INPUTS}

    def test_an_error_message_given_as_none_is_logged_empty(self) -> None:
        record = replace(random_record(random.Random(1), NOW),
                         error_message=None)  # type: ignore[arg-type]
        assert prepared_settlement(record, "sqlite", SecondTexts()).values == prepare(
            record.row(), "sqlite").values

    async def test_settled_rows_equal_rows_written_from_row_dicts(self) -> None:
        """The settler's rows (through ``prepared_settlement``), ``write_batch``'s rows from
        ``row()`` dicts, and from items prepared for PostgreSQL: every column but the id the
        same."""
        rng = random.Random(7)
        user = await self.add_user(1000 * UNIT)
        key = await self.add_key(user)
        records = []
        for n in range(40):
            record = replace(random_record(rng, NOW + timedelta(seconds=n * 0.37)),
                             user_id=user, api_key_id=key, request_id=f"a{n}")
            records.append(record)
            self.settler.settle_and_forget(None, record)
        await self.settler.flush()
        now = datetime.fromtimestamp(self.clock.seconds(), UTC)
        await self.db.transaction(write_batch, [
            replace(r, request_id=f"b{r.request_id[1:]}").row() for r in records], now)
        # prepared for the other dialect: converted from its values, not its (bare) item
        times = SecondTexts()
        await self.db.transaction(write_batch, [prepared_settlement(
            replace(r, request_id=f"c{r.request_id[1:]}"), "postgresql", times)
            for r in records], now)
        logs = await self.db.transaction(lambda conn: [dict(row._mapping) for row in conn.execute(
            select(schema.usage_logs).order_by(schema.usage_logs.c.id))])
        by_kind: dict[str, dict[str, dict[str, Any]]] = {"a": {}, "b": {}, "c": {}}
        for row in logs:
            by_kind[row["request_id"][0]][row["request_id"][1:]] = {
                k: v for k, v in row.items() if k not in ("id", "request_id")}
        assert len(by_kind["a"]) == len(by_kind["b"]) == len(by_kind["c"]) == 40
        for n, row in by_kind["a"].items():
            assert row == by_kind["b"][n] == by_kind["c"][n], n
