//! The sim's tables in the state store: their declarations, created on the store's
//! connection by the sim itself ([`tradedesk_store::Store::declare`]), and one typed row
//! for an order and for a fill, read by column name and written with named parameters,
//! so a column's place in a statement never matters.

use rust_decimal::Decimal;
use tradedesk_core::{Currency, InstrumentKey, OrderRecord, OrderStatus, OrderType, TimeInForce};
use tradedesk_store::StoreError;
use tradedesk_store::rusqlite::{self, Connection, Row, ToSql};

use super::{SimFill, SimOrder, mode_of, opt_dec, parse_dec, parse_time, rfc3339, side_of};

/// The sim's tables and indexes. The text is the one earlier builds declared in the store
/// crate, word for word, so a state database they made opens as it is: every statement
/// finds its table already there (`docs/README.md`, "The crates").
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sim_accounts (
    account TEXT PRIMARY KEY, currency TEXT NOT NULL, initial_cash TEXT NOT NULL,
    created TEXT NOT NULL, last_tick TEXT NOT NULL, next_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sim_orders (
    order_id TEXT PRIMARY KEY, account TEXT NOT NULL, client_order_id TEXT NOT NULL,
    exchange TEXT NOT NULL, symbol TEXT NOT NULL, side TEXT NOT NULL, type TEXT NOT NULL,
    quantity TEXT NOT NULL, filled_quantity TEXT NOT NULL, average_price TEXT,
    limit_price TEXT, stop_price TEXT, tif TEXT NOT NULL, stop_loss TEXT, take_profit TEXT,
    status TEXT NOT NULL, mode TEXT NOT NULL, comment TEXT, reason TEXT, triggered INTEGER NOT NULL,
    reduce_only INTEGER NOT NULL, created TEXT NOT NULL, updated TEXT NOT NULL,
    UNIQUE (account, client_order_id));
CREATE TABLE IF NOT EXISTS sim_fills (
    fill_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, account TEXT NOT NULL,
    exchange TEXT NOT NULL, symbol TEXT NOT NULL, side TEXT NOT NULL, quantity TEXT NOT NULL,
    price TEXT NOT NULL, commission TEXT NOT NULL, commission_currency TEXT NOT NULL,
    time TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sim_brackets (
    account TEXT NOT NULL, exchange TEXT NOT NULL, symbol TEXT NOT NULL,
    stop_loss TEXT, take_profit TEXT, PRIMARY KEY (account, exchange, symbol));
CREATE INDEX IF NOT EXISTS sim_orders_by_status ON sim_orders (account, status);
CREATE INDEX IF NOT EXISTS sim_fills_by_account ON sim_fills (account, seq);
";

/// A column's name: the field's, or the one given after `as` (`kind as "type"`).
macro_rules! column {
    ($field:ident) => {
        stringify!($field)
    };
    ($field:ident, $column:literal) => {
        $column
    };
}

/// A struct with a field per column of `$table`, as SQLite holds it, with `read` (by
/// column name) and `insert` (named parameters). The list of columns is written once.
macro_rules! table_row {
    (
        $(#[$meta:meta])*
        struct $name:ident in $table:literal {
            $($field:ident $(as $column:literal)?: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub(super) struct $name {
            $(pub(super) $field: $ty,)*
        }

        impl $name {
            const COLUMNS: &'static [&'static str] = &[$(column!($field $(, $column)?)),*];

            /// Reads a row by its columns' names (any order; other columns are ignored).
            pub(super) fn read(row: &Row<'_>) -> rusqlite::Result<Self> {
                Ok(Self {
                    $($field: row.get(column!($field $(, $column)?))?,)*
                })
            }

            /// Inserts this row.
            pub(super) fn insert(&self, conn: &Connection) -> rusqlite::Result<usize> {
                let params: &[(&str, &dyn ToSql)] =
                    &[$((concat!(":", column!($field $(, $column)?)), &self.$field)),*];
                // Written once per row type, not per insert.
                static SQL: std::sync::LazyLock<String> =
                    std::sync::LazyLock::new(|| insert_sql($table, $name::COLUMNS));
                conn.prepare_cached(&SQL)?.execute(params)
            }
        }
    };
}

/// `INSERT INTO table (a, b) VALUES (:a, :b)`.
fn insert_sql(table: &str, columns: &[&str]) -> String {
    let values: Vec<String> = columns.iter().map(|c| format!(":{c}")).collect();
    format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        columns.join(", "),
        values.join(", ")
    )
}

table_row! {
    /// A `sim_orders` row.
    struct OrderRow in "sim_orders" {
        order_id: String,
        client_order_id: String,
        account: String,
        exchange: String,
        symbol: String,
        side: String,
        kind as "type": String,
        quantity: String,
        filled_quantity: String,
        average_price: Option<String>,
        limit_price: Option<String>,
        stop_price: Option<String>,
        tif: String,
        stop_loss: Option<String>,
        take_profit: Option<String>,
        status: String,
        mode: String,
        comment: Option<String>,
        reason: Option<String>,
        created: String,
        updated: String,
        triggered: bool,
        reduce_only: bool,
    }
}

table_row! {
    /// A `sim_fills` row.
    struct FillRow in "sim_fills" {
        fill_id: String,
        order_id: String,
        account: String,
        exchange: String,
        symbol: String,
        side: String,
        quantity: String,
        price: String,
        commission: String,
        commission_currency: String,
        time: String,
        seq: i64,
    }
}

fn corrupt(what: &str, text: &str) -> StoreError {
    StoreError::Corrupt(format!("{what} '{text}' in the sim ledger"))
}

impl OrderRow {
    /// The row an order is stored as (quantities normalized, prices as given).
    pub(super) fn of(order: &SimOrder) -> Self {
        let r = &order.record;
        let text = |d: Option<Decimal>| d.map(|d| d.to_string());
        Self {
            order_id: r.order_id.clone(),
            client_order_id: r.client_order_id.clone(),
            account: r.account.clone(),
            exchange: r.key.exchange.clone(),
            symbol: r.key.symbol.clone(),
            side: r.side.as_str().to_owned(),
            kind: r.order_type.as_str().to_owned(),
            quantity: r.quantity.normalize().to_string(),
            filled_quantity: r.filled_quantity.normalize().to_string(),
            average_price: text(r.average_price),
            limit_price: text(r.limit_price),
            stop_price: text(r.stop_price),
            tif: r.time_in_force.as_str().to_owned(),
            stop_loss: text(r.stop_loss),
            take_profit: text(r.take_profit),
            status: r.status.as_str().to_owned(),
            mode: r.mode.as_str().to_owned(),
            comment: r.comment.clone(),
            reason: r.reason.clone(),
            created: rfc3339(r.created),
            updated: rfc3339(r.updated),
            triggered: order.triggered,
            reduce_only: order.reduce_only,
        }
    }

    /// The order this row holds.
    ///
    /// # Errors
    /// `Corrupt` for a value the sim never writes.
    pub(super) fn decode(self) -> Result<SimOrder, StoreError> {
        Ok(SimOrder {
            record: OrderRecord {
                key: InstrumentKey::new(self.exchange, self.symbol),
                side: side_of(&self.side)?,
                order_type: OrderType::parse(&self.kind)
                    .ok_or_else(|| corrupt("order type", &self.kind))?,
                quantity: parse_dec(&self.quantity)?,
                filled_quantity: parse_dec(&self.filled_quantity)?,
                average_price: opt_dec(self.average_price.as_deref())?,
                limit_price: opt_dec(self.limit_price.as_deref())?,
                stop_price: opt_dec(self.stop_price.as_deref())?,
                time_in_force: TimeInForce::parse(&self.tif)
                    .ok_or_else(|| corrupt("time in force", &self.tif))?,
                stop_loss: opt_dec(self.stop_loss.as_deref())?,
                take_profit: opt_dec(self.take_profit.as_deref())?,
                status: OrderStatus::parse(&self.status)
                    .ok_or_else(|| corrupt("order status", &self.status))?,
                mode: mode_of(&self.mode),
                created: parse_time(&self.created)?,
                updated: parse_time(&self.updated)?,
                order_id: self.order_id,
                client_order_id: self.client_order_id,
                account: self.account,
                comment: self.comment,
                reason: self.reason,
            },
            triggered: self.triggered,
            reduce_only: self.reduce_only,
        })
    }
}

impl FillRow {
    /// The fill this row holds.
    ///
    /// # Errors
    /// `Corrupt` for a value the sim never writes.
    pub(super) fn decode(self) -> Result<SimFill, StoreError> {
        Ok(SimFill {
            key: InstrumentKey::new(self.exchange, self.symbol),
            side: side_of(&self.side)?,
            quantity: parse_dec(&self.quantity)?,
            price: parse_dec(&self.price)?,
            commission: parse_dec(&self.commission)?,
            commission_currency: Currency::new_checked(&self.commission_currency)
                .map_err(|_| corrupt("currency", &self.commission_currency))?,
            time: parse_time(&self.time)?,
            seq: u32::try_from(self.seq).unwrap_or(u32::MAX),
            fill_id: self.fill_id,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::path::Path;
    use std::sync::Arc;

    use chrono::{TimeZone, Utc};
    use rust_decimal_macros::dec;
    use tradedesk_core::{Mode, Side};
    use tradedesk_store::{DB_FILE, Store};

    use super::super::{Clock, ManualClock, SimBroker, SimConfig};
    use super::*;
    use crate::demo::demo_book;
    use crate::{Broker, OrderFilter};

    /// The whole schema as the store crate declared it before the sim declared its own
    /// tables: a state database made by those builds.
    const EARLIER_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sim_accounts (
    account TEXT PRIMARY KEY, currency TEXT NOT NULL, initial_cash TEXT NOT NULL,
    created TEXT NOT NULL, last_tick TEXT NOT NULL, next_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sim_orders (
    order_id TEXT PRIMARY KEY, account TEXT NOT NULL, client_order_id TEXT NOT NULL,
    exchange TEXT NOT NULL, symbol TEXT NOT NULL, side TEXT NOT NULL, type TEXT NOT NULL,
    quantity TEXT NOT NULL, filled_quantity TEXT NOT NULL, average_price TEXT,
    limit_price TEXT, stop_price TEXT, tif TEXT NOT NULL, stop_loss TEXT, take_profit TEXT,
    status TEXT NOT NULL, mode TEXT NOT NULL, comment TEXT, reason TEXT, triggered INTEGER NOT NULL,
    reduce_only INTEGER NOT NULL, created TEXT NOT NULL, updated TEXT NOT NULL,
    UNIQUE (account, client_order_id));
CREATE TABLE IF NOT EXISTS sim_fills (
    fill_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, account TEXT NOT NULL,
    exchange TEXT NOT NULL, symbol TEXT NOT NULL, side TEXT NOT NULL, quantity TEXT NOT NULL,
    price TEXT NOT NULL, commission TEXT NOT NULL, commission_currency TEXT NOT NULL,
    time TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sim_brackets (
    account TEXT NOT NULL, exchange TEXT NOT NULL, symbol TEXT NOT NULL,
    stop_loss TEXT, take_profit TEXT, PRIMARY KEY (account, exchange, symbol));
CREATE TABLE IF NOT EXISTS idempotency (
    account TEXT NOT NULL, client_order_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
    state TEXT NOT NULL, order_id TEXT, day TEXT NOT NULL, notional_base TEXT NOT NULL,
    outcome TEXT, created TEXT NOT NULL, updated TEXT NOT NULL,
    PRIMARY KEY (account, client_order_id));
CREATE TABLE IF NOT EXISTS tokens (
    token_id TEXT PRIMARY KEY, account TEXT NOT NULL, fingerprint TEXT NOT NULL,
    expires INTEGER NOT NULL, used TEXT);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY, time TEXT NOT NULL, kind TEXT NOT NULL, account TEXT NOT NULL,
    client_order_id TEXT NOT NULL, detail TEXT NOT NULL, prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS tokens_by_expiry ON tokens (expires);
CREATE INDEX IF NOT EXISTS idempotency_by_day ON idempotency (day);
CREATE INDEX IF NOT EXISTS idempotency_by_state ON idempotency (state);
CREATE INDEX IF NOT EXISTS sim_orders_by_status ON sim_orders (account, status);
CREATE INDEX IF NOT EXISTS sim_fills_by_account ON sim_fills (account, seq);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
";

    fn sim_on(dir: &Path) -> SimBroker {
        let clock = ManualClock::new(Utc.with_ymd_and_hms(2026, 11, 30, 16, 0, 0).unwrap());
        SimBroker::new(
            SimConfig::new("SIM"),
            &demo_book().unwrap(),
            Arc::new(Store::open(dir).unwrap()),
            Arc::new(clock) as Arc<dyn Clock>,
        )
    }

    /// Every table, index and trigger with its text, as SQLite keeps them.
    fn schema_of(dir: &Path) -> Vec<(String, String, Option<String>)> {
        let conn = Connection::open(dir.join(DB_FILE)).unwrap();
        let mut stmt = conn
            .prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[tokio::test]
    async fn a_state_database_made_by_earlier_builds_opens_and_reads() {
        let earlier = tempfile::tempdir().unwrap();
        {
            // Rows as the positional statements of earlier builds wrote them.
            let conn = Connection::open(earlier.path().join(DB_FILE)).unwrap();
            conn.execute_batch(EARLIER_SCHEMA).unwrap();
            conn.execute_batch(
                "INSERT INTO sim_accounts VALUES
                     ('SIM', 'USD', '100000', '2026-11-30T15:00:00.000Z', '2026-11-30T15:00:00.000Z', 2);
                 INSERT INTO sim_orders (order_id, client_order_id, account, exchange, symbol,
                     side, type, quantity, filled_quantity, average_price, limit_price,
                     stop_price, tif, stop_loss, take_profit, status, mode, comment, reason,
                     created, updated, triggered, reduce_only)
                 VALUES ('SIM-1', 'old-1', 'SIM', 'NASDAQ', 'AAPL', 'buy', 'limit', '10', '10',
                     '190.5', '191', NULL, 'gtc', NULL, '230', 'filled', 'paper', 'kept', NULL,
                     '2026-11-30T15:00:00.000Z', '2026-11-30T15:01:00.000Z', 0, 1);
                 INSERT INTO sim_fills (fill_id, order_id, account, exchange, symbol, side,
                     quantity, price, commission, commission_currency, time, seq)
                 VALUES ('SIM-F1', 'SIM-1', 'SIM', 'NASDAQ', 'AAPL', 'buy', '10', '190.5',
                     '1.00', 'USD', '2026-11-30T15:01:00.000Z', 1);",
            )
            .unwrap();
        }
        let sim = sim_on(earlier.path());
        let orders = sim.orders(Some("SIM"), OrderFilter::All).await.unwrap();
        assert_eq!(orders.len(), 1, "{orders:?}");
        let o = &orders[0];
        assert_eq!(
            (o.order_id.as_str(), o.client_order_id.as_str(), o.side),
            ("SIM-1", "old-1", Side::Buy)
        );
        assert_eq!(o.order_type, OrderType::Limit);
        assert_eq!(o.time_in_force, TimeInForce::Gtc);
        assert_eq!(o.status, OrderStatus::Filled);
        assert_eq!(o.mode, Mode::Paper);
        assert_eq!(
            (o.quantity, o.average_price, o.limit_price, o.stop_price),
            (dec!(10), Some(dec!(190.5)), Some(dec!(191)), None)
        );
        assert_eq!((o.stop_loss, o.take_profit), (None, Some(dec!(230))));
        assert_eq!(o.comment.as_deref(), Some("kept"));
        assert_eq!(sim.position("AAPL").unwrap(), dec!(10));

        // The same schema, word for word, as a database the sim and the store make now.
        let fresh = tempfile::tempdir().unwrap();
        drop(sim_on(fresh.path()));
        assert_eq!(schema_of(earlier.path()), schema_of(fresh.path()));
    }

    #[test]
    fn a_row_reads_back_as_written_whatever_the_column_order() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        let t = Utc.with_ymd_and_hms(2026, 11, 30, 15, 0, 0).unwrap();
        let order = SimOrder {
            record: OrderRecord {
                order_id: "SIM-7".into(),
                client_order_id: "c-7".into(),
                account: "SIM".into(),
                key: InstrumentKey::new("FX", "EURUSD"),
                side: Side::Sell,
                order_type: OrderType::StopLimit,
                quantity: dec!(0.10),
                filled_quantity: dec!(0),
                average_price: None,
                limit_price: Some(dec!(1.0500)),
                stop_price: Some(dec!(1.0510)),
                time_in_force: TimeInForce::Day,
                stop_loss: Some(dec!(1.07)),
                take_profit: None,
                status: OrderStatus::Accepted,
                mode: Mode::Paper,
                comment: None,
                reason: Some("why".into()),
                created: t,
                updated: t,
            },
            triggered: true,
            reduce_only: false,
        };
        OrderRow::of(&order).insert(&conn).unwrap();
        let row = conn
            .query_row(
                "SELECT reduce_only, triggered, updated, created, * FROM sim_orders",
                [],
                OrderRow::read,
            )
            .unwrap();
        assert_eq!(row, OrderRow::of(&order));
        assert_eq!(
            (row.quantity.as_str(), row.kind.as_str()),
            ("0.1", "stop_limit")
        );
        let back = row.decode().unwrap();
        assert_eq!(back.record, order.record);
        assert!(back.triggered && !back.reduce_only);
    }
}
