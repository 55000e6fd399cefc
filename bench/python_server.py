#!/usr/bin/env python3
"""A Python twin of tradedesk's seven read-only portfolio tools, for benchmarking.

It loads a `tradedesk-book/1` file strictly (refused whole, with the JSON path and the
rule, on any broken rule), then answers every call by COMPUTING from the book: a full
FIFO replay with commission proration, FX by the book's rules (latest rate on or before
the date that matters, either direction, later-dated quote wins with ties to the straight
one, cross through the base currency only when the pair is not quoted), rows computed at
full precision with `decimal`, converted straight into the report currency and rounded
once, half away from zero. Nothing is cached between calls (tradedesk replays per call
too); only the parsed book is kept.

Served with the official Python SDK (`mcp` 2.x, high-level `MCPServer`, formerly
FastMCP) over stdio (default) or Streamable HTTP (`--http HOST:PORT`, path /mcp, JSON
responses like tradedesk's).

    python bench/python_server.py [BOOK]                 # stdio
    python bench/python_server.py [BOOK] --http 127.0.0.1:8790
    python bench/python_server.py [BOOK] --call get_portfolio_summary '{}'   # one call, print JSON

BOOK defaults to demo/demo-book.json (relative to the repository root).
"""

import argparse
import bisect
import decimal
import json
import os
import re
import sys
import time
from collections import deque
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal, localcontext

VERSION = "0.1.0-python"
FORMAT = "tradedesk-book/1"

# Arithmetic context: far more digits than any row needs, ties away from zero. Set as
# the default too, so threads the SDK may start inherit it.
CTX = decimal.Context(prec=60, rounding=ROUND_HALF_UP, Emax=999999, Emin=-999999)
decimal.DefaultContext.prec = 60
decimal.DefaultContext.rounding = ROUND_HALF_UP
decimal.setcontext(decimal.Context(prec=60, rounding=ROUND_HALF_UP))
# Displayed rates and averages: the 28 significant digits a 96-bit decimal holds.
DISPLAY = decimal.Context(prec=28, rounding=ROUND_HALF_UP)

ZERO = Decimal(0)
ONE = Decimal(1)
HUNDRED = Decimal(100)
FIXED = Decimal("1e-18")  # the FIFO engine's precision (18 places)

# ---------------------------------------------------------------------------------------
# Currencies (ISO 4217 minor units) and instruments
# ---------------------------------------------------------------------------------------

_TWO_PLACES = (
    "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BRL BSD BTN BWP "
    "BYN BZD CAD CDF CHF CNY CNH COP CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP "
    "GBP GEL GHS GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD "
    "KZT LAK LBP LKR LRD LSL MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD "
    "NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD "
    "SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TOP TRY TTD TWD TZS UAH USD UYU UZS "
    "VED VES WST XCD YER ZAR ZMW ZWG USDC USDT"
)
MINOR_UNITS = {c: 2 for c in _TWO_PLACES.split()}
MINOR_UNITS.update({
    "BHD": 3, "BIF": 0, "CLF": 4, "CLP": 0, "DJF": 0, "GNF": 0, "IQD": 3, "ISK": 0,
    "JOD": 3, "JPY": 0, "KMF": 0, "KRW": 0, "KWD": 3, "LYD": 3, "OMR": 3, "PYG": 0,
    "RWF": 0, "TND": 3, "UGX": 0, "UYI": 0, "UYW": 4, "VND": 0, "VUV": 0, "XAF": 0,
    "XOF": 0, "XPF": 0,
})

ASSET_CLASSES = ("equity", "etf", "option", "future", "fx", "cfd", "crypto", "perp", "bond", "fund")
MARGIN_SETTLED = {"future", "cfd", "perp", "fx"}
GICS_SECTORS = (
    "Communication Services", "Consumer Discretionary", "Consumer Staples", "Energy",
    "Financials", "Health Care", "Industrials", "Information Technology", "Materials",
    "Real Estate", "Utilities",
)
UNCLASSIFIED = "Unclassified"
UNKNOWN_COUNTRY = "Unknown"
STALE_DAYS = 7
MAX_LOTS = 1000
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def quantum(dp: int) -> Decimal:
    return Decimal(1).scaleb(-dp)


def round_ccy(amount: Decimal, ccy: str) -> Decimal:
    """Rounds once to the currency's minor unit, half away from zero."""
    return amount.quantize(quantum(MINOR_UNITS[ccy]), rounding=ROUND_HALF_UP, context=CTX)


def fixed(d: Decimal) -> Decimal:
    return d.quantize(FIXED, rounding=ROUND_HALF_UP, context=CTX)


def pct(part: Decimal, whole: Decimal):
    if whole == 0:
        return None
    return (part * HUNDRED / whole).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def num(d):
    """A decimal as a JSON number: the nearest double to its exact value."""
    return None if d is None else float(d)


def dstr(d: Decimal) -> str:
    """Decimal as text, the way a summary shows it."""
    return format(d, "f")


def quote(text: str) -> str:
    out = "".join(" " if (ord(c) < 32 or 127 <= ord(c) < 160) else c for c in text[:64])
    if len(text) > 64:
        out += "\u2026"
    return f"'{out}'"


class ToolError(Exception):
    def __init__(self, code: str, message: str, hint: str):
        super().__init__(message)
        self.code, self.message, self.hint = code, message, hint


def invalid_argument(message: str, hint: str) -> ToolError:
    return ToolError("invalid_argument", message, hint)


# ---------------------------------------------------------------------------------------
# Strict book loading
# ---------------------------------------------------------------------------------------

_DECIMAL_RE = re.compile(r"-?[0-9]+(\.[0-9]+)?\Z")
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
_RFC3339_RE = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ]([0-9]{2}:[0-9]{2}:[0-9]{2})(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})\Z"
)
DECIMAL_RULE = ('must be a decimal string such as "150.25" (JSON numbers are refused so no value '
                "passes through binary floating point)")
TOP_LEVEL = ("format", "base_currency", "as_of", "accounts", "instruments", "fills", "cash",
             "marks", "fx_rates", "reported_positions")
MAX_ISSUES = 20


def parse_date_strict(text: str):
    if not isinstance(text, str) or not _DATE_RE.match(text):
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def parse_time(text: str):
    m = _RFC3339_RE.match(text)
    if not m:
        return None
    day, hms, frac, offset = m.groups()
    frac = (frac or "")[:7]  # datetime keeps microseconds
    offset = "+00:00" if offset in ("Z", "z") else offset
    try:
        return datetime.fromisoformat(f"{day}T{hms}{frac}{offset}")
    except ValueError:
        return None


def rfc3339(t: datetime) -> str:
    base = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        us = t.microsecond
        base += f".{us // 1000:03d}" if us % 1000 == 0 else f".{us:06d}"
    off = t.utcoffset()
    secs = int(off.total_seconds())
    sign = "+" if secs >= 0 else "-"
    secs = abs(secs)
    return f"{base}{sign}{secs // 3600:02d}:{secs % 3600 // 60:02d}"


class BookError(Exception):
    def __init__(self, source: str, issues):
        self.source, self.issues = source, issues
        lines = [f"{source}: book refused"] + [f"  {p}: {r}" for p, r in issues]
        if len(issues) >= MAX_ISSUES:
            lines.append("  (further issues not listed)")
        super().__init__("\n".join(lines))


class Account:
    __slots__ = ("id", "broker", "currency", "name")


class Instrument:
    __slots__ = ("exchange", "symbol", "currency", "asset_class", "multiplier", "name",
                 "sector", "country", "key", "qualified")


class Fill:
    __slots__ = ("id", "account", "instrument", "side", "quantity", "price", "commission",
                 "commission_currency", "commission_known", "time", "trade_date", "seq")


class Book:
    pass


class Validator:
    def __init__(self):
        self.issues = []

    def issue(self, path, rule):
        if len(self.issues) < MAX_ISSUES:
            self.issues.append((path, rule))

    def object(self, path, value, allowed):
        if not isinstance(value, dict):
            self.issue(path, "must be an object")
            return None
        for key in value:
            if key not in allowed:
                self.issue(f"{path}.{key}", f"unknown field (allowed: {', '.join(allowed)})")
        return value

    def string(self, path, m, key, required):
        v = m.get(key)
        if v is None:
            if required:
                self.issue(f"{path}.{key}", "is required")
            return None
        if not isinstance(v, str):
            self.issue(f"{path}.{key}", "must be a string")
            return None
        if not v.strip():
            self.issue(f"{path}.{key}", "must not be empty")
            return None
        return v

    def currency(self, path, m, key, required):
        text = self.string(path, m, key, required)
        if text is None:
            return None
        if text not in MINOR_UNITS:
            self.issue(f"{path}.{key}", f"'{text}' is not an upper-case ISO 4217 currency code")
            return None
        return text

    def date(self, path, m, key):
        text = self.string(path, m, key, True)
        if text is None:
            return None
        d = parse_date_strict(text)
        if d is None:
            self.issue(f"{path}.{key}", f"'{text}' is not a YYYY-MM-DD calendar date")
        return d

    def time(self, path, m, key):
        text = self.string(path, m, key, True)
        if text is None:
            return None
        t = parse_time(text)
        if t is None:
            self.issue(f"{path}.{key}", f"'{text}' is not an RFC 3339 time with an offset, "
                                        "such as 2024-03-04T10:15:00-05:00")
        return t

    def decimal(self, path, m, key, required, check=None):
        field = f"{path}.{key}"
        v = m.get(key)
        if v is None:
            if required:
                self.issue(field, "is required")
            return None
        if not isinstance(v, str):
            self.issue(field, DECIMAL_RULE)
            return None
        if not _DECIMAL_RE.match(v):
            self.issue(field, f"'{v}' {DECIMAL_RULE}")
            return None
        d = Decimal(v)
        if -d.as_tuple().exponent > 18:
            self.issue(field, f"'{v}' has more than 18 decimal places")
            return None
        if abs(d) > Decimal(10**12):
            self.issue(field, f"'{v}' is larger than the supported 1e12 in size")
            return None
        if check is not None and not check[0](d):
            self.issue(field, check[1])
            return None
        return d

    def array(self, top, key, required):
        v = top.get(key)
        if isinstance(v, list):
            return v
        if v is None:
            if required:
                self.issue(key, "is required (an array, possibly empty)")
            return []
        self.issue(key, "must be an array")
        return []

    # -- sections ----------------------------------------------------------------------

    def accounts(self, items):
        seen, out = {}, []
        for i, item in enumerate(items):
            path = f"accounts[{i}]"
            m = self.object(path, item, ("id", "broker", "currency", "name"))
            if m is None:
                continue
            aid = self.string(path, m, "id", True)
            broker = self.string(path, m, "broker", True)
            ccy = self.currency(path, m, "currency", True)
            name = self.string(path, m, "name", False)
            if broker is not None and not re.fullmatch(r"[a-z0-9_-]*", broker):
                self.issue(f"{path}.broker",
                           f"'{broker}' must be a lower-case vendor name such as ibkr, moomoo, alpaca")
            if aid is not None:
                if aid in seen:
                    self.issue(f"{path}.id", f"duplicate account id '{aid}' (first at accounts[{seen[aid]}])")
                else:
                    seen[aid] = i
            if aid is not None and broker is not None and ccy is not None:
                a = Account()
                a.id, a.broker, a.currency, a.name = aid, broker, ccy, name
                out.append(a)
        return out

    def instruments(self, items):
        seen, out = {}, []
        allowed = ("symbol", "exchange", "currency", "asset_class", "multiplier", "name", "sector", "country")
        for i, item in enumerate(items):
            path = f"instruments[{i}]"
            m = self.object(path, item, allowed)
            if m is None:
                continue
            symbol = self.string(path, m, "symbol", True)
            exchange = self.string(path, m, "exchange", True)
            if exchange is not None and ":" in exchange:
                self.issue(f"{path}.exchange", f"'{exchange}' must not contain ':'")
            ccy = self.currency(path, m, "currency", True)
            ac = self.string(path, m, "asset_class", True)
            if ac is not None and ac not in ASSET_CLASSES:
                self.issue(f"{path}.asset_class", f"'{ac}' must be one of {', '.join(ASSET_CLASSES)}")
                ac = None
            mult = self.decimal(path, m, "multiplier", False, (lambda d: d > 0, "must be > 0"))
            if mult is None:
                mult = ONE
            name = self.string(path, m, "name", False)
            sector = self.string(path, m, "sector", False)
            if sector is not None and sector not in GICS_SECTORS:
                self.issue(f"{path}.sector", f"'{sector}' must be one of the eleven GICS sector names, "
                                             "or absent for Unclassified")
                sector = None
            country = self.string(path, m, "country", False)
            if country is not None and not re.fullmatch(r"[A-Z]{2}", country):
                self.issue(f"{path}.country", f"'{country}' must be an ISO 3166 alpha-2 code such as US, MY")
            if None in (symbol, exchange, ccy, ac):
                continue
            key = (exchange, symbol)
            if key in seen:
                self.issue(path, f"duplicate instrument {exchange}:{symbol} (first at instruments[{seen[key]}])")
                continue
            seen[key] = i
            inst = Instrument()
            inst.exchange, inst.symbol, inst.currency, inst.asset_class = exchange, symbol, ccy, ac
            inst.multiplier, inst.name, inst.sector, inst.country = mult, name, sector, country
            inst.key, inst.qualified = key, f"{exchange}:{symbol}"
            out.append(inst)
        return out

    def account_ref(self, path, m, ids):
        aid = self.string(path, m, "account", True)
        if aid is None:
            return None
        if aid not in ids:
            known = sorted(ids)
            self.issue(f"{path}.account", f"unknown account '{aid}' (accounts: {known})")
            return None
        return ids[aid]

    def instrument_ref(self, path, m, ids):
        exchange = self.string(path, m, "exchange", True)
        symbol = self.string(path, m, "symbol", True)
        if exchange is None or symbol is None:
            return None
        idx = ids.get((exchange, symbol))
        if idx is None:
            self.issue(f"{path}.symbol", f"instrument {exchange}:{symbol} is not listed in instruments")
        return idx

    def fills(self, items, acc_ids, inst_ids, instruments):
        seen, out = {}, []
        allowed = ("id", "account", "exchange", "symbol", "side", "quantity", "price", "commission",
                   "commission_currency", "commission_known", "time")
        for i, item in enumerate(items):
            path = f"fills[{i}]"
            m = self.object(path, item, allowed)
            if m is None:
                continue
            fid = self.string(path, m, "id", True)
            if fid is not None:
                if fid in seen:
                    self.issue(f"{path}.id", f"duplicate fill id '{fid}' (first at fills[{seen[fid]}])")
                else:
                    seen[fid] = i
            account = self.account_ref(path, m, acc_ids)
            instrument = self.instrument_ref(path, m, inst_ids)
            side = self.string(path, m, "side", True)
            if side is not None and side not in ("buy", "sell"):
                self.issue(f"{path}.side", f"'{side}' must be buy or sell")
                side = None
            qty = self.decimal(path, m, "quantity", True, (lambda d: d > 0, "must be > 0"))
            price = self.decimal(path, m, "price", True, (lambda d: d >= 0, "must be >= 0"))
            comm = self.decimal(path, m, "commission", False, (lambda d: d >= 0, "must be >= 0"))
            if comm is None:
                comm = ZERO
            known = m.get("commission_known")
            if known is None:
                known = True
            elif not isinstance(known, bool):
                self.issue(f"{path}.commission_known", "must be true or false")
                known = True
            if not known and comm != 0:
                self.issue(f"{path}.commission", 'must be absent or "0" when commission_known is false')
            comm_ccy = self.currency(path, m, "commission_currency", False)
            t = self.time(path, m, "time")
            if None in (fid, account, instrument, side, qty, price, t):
                continue
            f = Fill()
            f.id, f.account, f.instrument, f.side = fid, account, instrument, side
            f.quantity, f.price, f.commission, f.commission_known = qty, price, comm, known
            f.commission_currency = comm_ccy or instruments[instrument].currency
            f.time, f.trade_date, f.seq = t, t.date(), i
            out.append(f)
        return out

    def cash(self, items, acc_ids):
        out = []
        for i, item in enumerate(items):
            path = f"cash[{i}]"
            m = self.object(path, item, ("account", "kind", "amount", "currency", "time"))
            if m is None:
                continue
            account = self.account_ref(path, m, acc_ids)
            kind = self.string(path, m, "kind", True)
            if kind is not None and kind not in ("deposit", "withdrawal", "dividend", "interest", "fee"):
                self.issue(f"{path}.kind", f"'{kind}' must be one of deposit, withdrawal, dividend, interest, fee")
                kind = None
            amount = self.decimal(path, m, "amount", True)
            if kind is not None and amount is not None:
                if kind in ("deposit", "dividend") and amount <= 0:
                    self.issue(f"{path}.amount", "must be > 0 (deposits and dividends are positive as seen "
                                                 "by the account)")
                elif kind in ("withdrawal", "fee") and amount >= 0:
                    self.issue(f"{path}.amount", "must be < 0 (withdrawals and fees are negative as seen "
                                                 "by the account)")
            ccy = self.currency(path, m, "currency", True)
            t = self.time(path, m, "time")
            if None not in (account, kind, amount, ccy, t):
                out.append((account, kind, amount, ccy, t))
        return out

    def marks(self, items, inst_ids):
        seen, out = {}, []
        for i, item in enumerate(items):
            path = f"marks[{i}]"
            m = self.object(path, item, ("exchange", "symbol", "price", "date"))
            if m is None:
                continue
            inst = self.instrument_ref(path, m, inst_ids)
            price = self.decimal(path, m, "price", True, (lambda d: d >= 0, "must be >= 0"))
            d = self.date(path, m, "date")
            if None not in (inst, price, d):
                if (inst, d) in seen:
                    self.issue(path, "duplicate mark for the same instrument and date "
                                     f"(first at marks[{seen[(inst, d)]}])")
                    continue
                seen[(inst, d)] = i
                out.append((inst, d, price))
        return out

    def fx_rates(self, items):
        seen, out = {}, []
        for i, item in enumerate(items):
            path = f"fx_rates[{i}]"
            m = self.object(path, item, ("base", "quote", "rate", "date"))
            if m is None:
                continue
            base = self.currency(path, m, "base", True)
            quote_ = self.currency(path, m, "quote", True)
            rate = self.decimal(path, m, "rate", True, (lambda d: d > 0, "must be > 0"))
            d = self.date(path, m, "date")
            if None in (base, quote_, rate, d):
                continue
            if base == quote_:
                self.issue(f"{path}.quote", "must differ from base")
                continue
            if (base, quote_, d) in seen:
                self.issue(path, f"duplicate {base}/{quote_} rate on {d} (first at fx_rates[{seen[(base, quote_, d)]}])")
                continue
            seen[(base, quote_, d)] = i
            out.append((base, quote_, rate, d))
        return out

    def reported(self, items, acc_ids, inst_ids):
        seen, out = {}, []
        for i, item in enumerate(items):
            path = f"reported_positions[{i}]"
            m = self.object(path, item, ("account", "exchange", "symbol", "quantity"))
            if m is None:
                continue
            account = self.account_ref(path, m, acc_ids)
            inst = self.instrument_ref(path, m, inst_ids)
            qty = self.decimal(path, m, "quantity", True)
            if None not in (account, inst, qty):
                if (account, inst) in seen:
                    self.issue(path, "duplicate position for the same account and instrument "
                                     f"(first at reported_positions[{seen[(account, inst)]}])")
                    continue
                seen[(account, inst)] = i
                out.append((account, inst, qty))
        return out


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def load_book(path: str) -> Book:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise BookError(path, [("$", f"cannot read the file: {e}")])
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as e:
        raise BookError(path, [("$", f"not valid JSON: {e}")])
    v = Validator()
    top = v.object("$", value, TOP_LEVEL)
    if top is None:
        raise BookError(path, v.issues)
    fmt = top.get("format")
    if isinstance(fmt, str):
        if fmt != FORMAT:
            v.issue("format", f'must be exactly "{FORMAT}", found "{fmt}"')
    elif fmt is None:
        v.issue("format", f'is required: "{FORMAT}"')
    else:
        v.issue("format", f'must be the string "{FORMAT}"')
    base = v.currency("$", top, "base_currency", True)
    as_of = v.date("$", top, "as_of")
    v.issues = [(p[2:] if p.startswith("$.") else p, r) for p, r in v.issues]

    accounts = v.accounts(v.array(top, "accounts", True))
    acc_ids = {}
    for i, a in enumerate(accounts):
        acc_ids.setdefault(a.id, i)
    instruments = v.instruments(v.array(top, "instruments", True))
    inst_ids = {inst.key: i for i, inst in enumerate(instruments)}
    fills = v.fills(v.array(top, "fills", True), acc_ids, inst_ids, instruments)
    cash = v.cash(v.array(top, "cash", False), acc_ids)
    marks = v.marks(v.array(top, "marks", False), inst_ids)
    fx = v.fx_rates(v.array(top, "fx_rates", False))
    reported = v.reported(v.array(top, "reported_positions", False), acc_ids, inst_ids)
    if v.issues or base is None or as_of is None:
        raise BookError(path, v.issues)

    b = Book()
    b.source = path
    b.base_currency, b.as_of = base, as_of
    b.accounts, b.instruments = accounts, instruments
    b.account_index = acc_ids
    b.instrument_index = inst_ids
    fills.sort(key=lambda f: (f.time, f.seq))  # replay order: instant, then file order
    b.fills = fills
    b.cash = cash
    series = {}
    for inst, d, price in marks:
        series.setdefault(inst, []).append((d, price))
    for s in series.values():
        s.sort(key=lambda x: x[0])
    b.marks = {k: ([d for d, _ in s], [p for _, p in s]) for k, s in series.items()}
    fxs = {}
    for base_, quote_, rate, d in fx:
        fxs.setdefault((base_, quote_), {})[d] = rate
    b.fx = {k: (sorted(s), [s[d] for d in sorted(s)]) for k, s in fxs.items()}
    b.reported = reported
    return b


# ---------------------------------------------------------------------------------------
# FX
# ---------------------------------------------------------------------------------------

class Rate:
    __slots__ = ("num", "den", "date")

    def __init__(self, num, den, d):
        self.num, self.den, self.date = num, den, d

    def apply(self, amount: Decimal) -> Decimal:
        if self.den == 1:
            return CTX.multiply(amount, self.num)
        return CTX.divide(CTX.multiply(amount, self.num), self.den)

    @property
    def display(self) -> Decimal:
        return DISPLAY.divide(self.num, self.den)


IDENTITY = Rate(ONE, ONE, None)


def latest_fx(book, base, quote_, on):
    s = book.fx.get((base, quote_))
    if s is None:
        return None
    n = bisect.bisect_right(s[0], on)
    return (s[0][n - 1], s[1][n - 1]) if n else None


def direct_rate(book, frm, to, on):
    s = latest_fx(book, frm, to, on)
    i = latest_fx(book, to, frm, on)
    if s and i and i[0] > s[0]:
        return Rate(ONE, i[1], i[0])
    if s:
        return Rate(s[1], ONE, s[0])
    if i:
        return Rate(ONE, i[1], i[0])
    return None


def fx_rate(book, frm, to, on) -> Rate:
    if frm == to:
        return IDENTITY
    r = direct_rate(book, frm, to, on)
    if r is not None:
        return r
    base = book.base_currency
    if base not in (frm, to):
        a, b = direct_rate(book, frm, base, on), direct_rate(book, base, to, on)
        if a is not None and b is not None:
            return Rate(a.num * b.num, a.den * b.den, min(a.date, b.date))
    raise ToolError(
        "no_fx_rate",
        f"no {frm}/{to} rate on or before {on}, directly or through the base currency",
        f"ask in a currency the book has rates for, or add a {frm}/{to} rate dated on or before {on} "
        "to the fx_file named in tradedesk.toml (fx_rates entries: base, quote, rate, date)",
    )


class Rates:
    """Rates at one date, noting the stale ones used."""

    def __init__(self, book, on):
        self.book, self.on, self.stale = book, on, set()

    def rate(self, frm, to):
        r = fx_rate(self.book, frm, to, self.on)
        if r.date is not None and (self.on - r.date).days > STALE_DAYS:
            days = (self.on - r.date).days
            self.stale.add(f"{frm}->{to} uses a rate from {r.date}, {days} days before {self.on}")
        return r

    def convert_rounded(self, amount, frm, to):
        return round_ccy(self.rate(frm, to).apply(amount), to)


# ---------------------------------------------------------------------------------------
# FIFO replay
# ---------------------------------------------------------------------------------------

class Lot:
    __slots__ = ("fill", "quantity", "price", "commission", "open_date", "commission_known")


class Queue:
    __slots__ = ("side", "lots")

    def __init__(self):
        self.side = "long"
        self.lots = deque()  # oldest first


class Closed:
    __slots__ = ("account", "instrument", "side", "quantity", "open_fill", "close_fill",
                 "open_date", "close_date", "open_price", "close_price", "gross", "commissions",
                 "net", "commission_known")


def share(total, part, whole):
    if part == whole:
        return total
    if total == 0:
        return ZERO
    return fixed(CTX.divide(CTX.multiply(total, part), whole))


class Ledger:
    pass


def replay(book, with_cash: bool, on_close=None) -> Ledger:
    """Replays every fill in order: FIFO lots, closed lots to `on_close`, implied cash."""
    queues = {}
    cash = {}
    has_cash = [False] * len(book.accounts)
    for account, _kind, amount, ccy, _t in book.cash:
        has_cash[account] = True
        if with_cash:
            cash[(account, ccy)] = cash.get((account, ccy), ZERO) + amount
    instruments = book.instruments
    for index, f in enumerate(book.fills):
        inst = instruments[f.instrument]
        ccy = inst.currency
        own = f.commission
        if f.commission_currency == ccy or own == 0:
            commission = own
        else:
            commission = fixed(fx_rate(book, f.commission_currency, ccy, f.trade_date).apply(own))
        mult = inst.multiplier
        key = (f.account, f.instrument)
        q = queues.get(key)
        if q is None:
            q = queues[key] = Queue()
        incoming = "long" if f.side == "buy" else "short"
        remaining = f.quantity
        remaining_comm = commission
        margin_gross = ZERO
        if q.side != incoming:
            lots = q.lots
            while remaining > 0 and lots:
                lot = lots[0]
                matched = remaining if remaining < lot.quantity else lot.quantity
                open_share = share(lot.commission, matched, lot.quantity)
                close_share = share(remaining_comm, matched, remaining)
                diff = (f.price - lot.price) if q.side == "long" else (lot.price - f.price)
                gross = fixed(diff * matched * mult)
                comms = open_share + close_share
                margin_gross += gross
                if on_close is not None:
                    c = Closed()
                    c.account, c.instrument, c.side, c.quantity = f.account, f.instrument, q.side, matched
                    c.open_fill, c.close_fill = lot.fill, index
                    c.open_date, c.close_date = lot.open_date, f.trade_date
                    c.open_price, c.close_price = lot.price, f.price
                    c.gross, c.commissions, c.net = gross, comms, gross - comms
                    c.commission_known = lot.commission_known and f.commission_known
                    on_close(f, c)
                lot.quantity -= matched
                lot.commission -= open_share
                remaining -= matched
                remaining_comm -= close_share
                if lot.quantity == 0:
                    lots.popleft()
        if remaining > 0:
            if not q.lots:
                q.side = incoming
            lot = Lot()
            lot.fill, lot.quantity, lot.price = index, remaining, f.price
            lot.commission, lot.open_date, lot.commission_known = remaining_comm, f.trade_date, f.commission_known
            q.lots.append(lot)
        if with_cash:
            if inst.asset_class in MARGIN_SETTLED:
                flow = margin_gross
            else:
                value = f.quantity * f.price * mult
                flow = value if f.side == "sell" else -value
            k = (f.account, ccy)
            cash[k] = cash.get(k, ZERO) + flow
            if own != 0:
                k = (f.account, f.commission_currency)
                cash[k] = cash.get(k, ZERO) - own
    led = Ledger()
    led.queues = queues
    led.cash = cash
    led.has_cash = has_cash
    return led


def open_positions(ledger):
    return [(a, i, q) for (a, i), q in ledger.queues.items() if q.lots]


def signed_quantity(q):
    total = sum((lot.quantity for lot in q.lots), ZERO)
    return total if q.side == "long" else -total


# ---------------------------------------------------------------------------------------
# Valuation at as_of
# ---------------------------------------------------------------------------------------

def latest_mark(book, instrument, on):
    s = book.marks.get(instrument)
    if s is None:
        return None
    n = bisect.bisect_right(s[0], on)
    return (s[0][n - 1], s[1][n - 1]) if n else None


def value_book(book, currency, accounts_scope: bool, selection=None):
    ledger = replay(book, with_cash=accounts_scope)
    rates = Rates(book, book.as_of)
    positions = []
    for account, instrument, q in open_positions(ledger):
        if selection is not None and not selection.matches(account, instrument):
            continue
        positions.append(position_row(book, rates, account, instrument, q, currency, accounts_scope))
    positions.sort(key=lambda p: (p["account"], book.instruments[p["instrument"]].key))
    cash = []
    if accounts_scope:
        order = {c: n for n, c in enumerate(MINOR_UNITS)}
        for (account, ccy), amount in sorted(ledger.cash.items(), key=lambda kv: (kv[0][0], order[kv[0][1]])):
            if not ledger.has_cash[account]:
                continue
            acc_ccy = book.accounts[account].currency
            cash.append({
                "account": account, "currency": ccy, "amount": amount,
                "amount_account": rates.convert_rounded(amount, ccy, acc_ccy),
                "converted": rates.convert_rounded(amount, ccy, currency),
            })
    return {"currency": currency, "as_of": book.as_of, "positions": positions, "cash": cash,
            "cash_known": ledger.has_cash, "stale": rates.stale, "ledger": ledger}


def position_row(book, rates, account, instrument, q, currency, in_account_ccy):
    inst = book.instruments[instrument]
    ccy = inst.currency
    quantity = open_cost = commissions = ZERO
    known = True
    for lot in q.lots:
        quantity += lot.quantity
        open_cost += lot.quantity * lot.price
        commissions += lot.commission
        known = known and lot.commission_known
    sign = ONE if q.side == "long" else -ONE
    open_value = open_cost * inst.multiplier
    avg_cost = DISPLAY.divide(open_cost, quantity)
    mark = latest_mark(book, instrument, book.as_of)
    marked = None
    if mark is not None:
        mdate, price = mark
        notional = quantity * price * inst.multiplier * sign
        gross_unrealized = notional - open_value * sign
        unrealized = gross_unrealized - commissions
        market_value = gross_unrealized if inst.asset_class in MARGIN_SETTLED else notional
        acc_ccy = book.accounts[account].currency
        marked = {
            "price": price, "date": mdate,
            "notional": round_ccy(notional, ccy),
            "market_value": round_ccy(market_value, ccy),
            "unrealized_pnl": round_ccy(unrealized, ccy),
            "notional_converted": rates.convert_rounded(notional, ccy, currency),
            "market_value_converted": rates.convert_rounded(market_value, ccy, currency),
            "unrealized_pnl_converted": rates.convert_rounded(unrealized, ccy, currency),
            "market_value_account": (rates.convert_rounded(market_value, ccy, acc_ccy)
                                     if in_account_ccy else None),
        }
    return {"account": account, "instrument": instrument, "side": q.side,
            "quantity": quantity * sign, "avg_cost": avg_cost,
            "cost_basis": round_ccy(open_value + commissions, ccy),
            "commission_known": known, "marked": marked}


def sector_of(inst):
    return inst.sector or UNCLASSIFIED


def common_notes(book, v, positions, notes):
    unmarked = [f"{book.instruments[p['instrument']].qualified} in {book.accounts[p['account']].id}"
                for p in positions if p["marked"] is None]
    if unmarked:
        notes.append(f"left out of every total for lack of a mark on or before {v['as_of']}: {', '.join(unmarked)}")
    gross = [book.instruments[p["instrument"]].qualified for p in positions if not p["commission_known"]]
    if gross:
        notes.append(f"the broker reports no commissions for {', '.join(gross)}: cost basis and unrealized "
                     "P&L are gross of fees")
    for s in sorted(v["stale"]):
        notes.append(f"stale FX rate: {s}")


def account_rows(book, v, notes):
    rows = []
    for i, account in enumerate(book.accounts):
        pv = pc = ZERO
        for p in v["positions"]:
            if p["account"] == i and p["marked"] is not None:
                m = p["marked"]
                pv += m["market_value_account"] or ZERO
                pc += m["market_value_converted"]
        known = v["cash_known"][i]
        crows = [c for c in v["cash"] if c["account"] == i]
        cash = sum((c["amount_account"] for c in crows), ZERO) if known else None
        cash_conv = sum((c["converted"] for c in crows), ZERO)
        if not known:
            notes.append(f"{account.id}: the book has no cash entries for this account, so its cash is unknown "
                         "(null) and its total value is its positions' value alone")
        rows.append({
            "account": account.id, "broker": account.broker, "name": account.name,
            "account_currency": account.currency, "mode": "book",
            "cash": num(cash), "positions_value": num(pv),
            "total_value": num(pv + (cash or ZERO)),
            "total_value_converted": num(pc + cash_conv),
            "_total_converted": pc + cash_conv,
        })
    return rows


def strip_private(rows):
    for r in rows:
        r.pop("_total_converted", None)
    return rows


# ---------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------

def check_args(args: dict, allowed):
    for k in args:
        if k not in allowed:
            if not allowed:
                hint = "this tool takes no arguments; call it with {}"
            else:
                hint = f"allowed arguments: {', '.join(allowed)}; see the tool's input schema for types"
            expected = ", ".join(f"`{a}`" for a in allowed)
            raise invalid_argument(f"unknown argument `{k}`, expected one of {expected}"
                                   if allowed else f"unknown argument `{k}`, there are no arguments", hint)


def report_currency(book, code):
    if code is None:
        return book.base_currency
    if code not in MINOR_UNITS:
        if len(code) == 3 and code.isascii() and code.isalpha():
            hint = f"currency codes are upper-case ISO 4217, e.g. {code.upper()}"
        else:
            hint = "currency codes are upper-case ISO 4217 codes such as USD, MYR, EUR"
        raise invalid_argument(f"currency: {quote(code)} is not an ISO 4217 currency code", hint)
    return code


ABSOLUTE_HINT = ("dates must be absolute YYYY-MM-DD (e.g. 2026-01-31); resolve relative phrases such as "
                 "'last quarter' or 'this year' to calendar dates yourself")


def parse_date_arg(field, text):
    shaped = (isinstance(text, str) and len(text) == 10 and text[4] == "-" and text[7] == "-"
              and all(c.isdigit() and c.isascii() for i, c in enumerate(text) if i not in (4, 7)))
    d = parse_date_strict(text) if shaped else None
    if d is None:
        what = "is not a calendar date" if shaped else "is not a YYYY-MM-DD date"
        raise ToolError("invalid_date", f"{field}: {quote(str(text))} {what}", ABSOLUTE_HINT)
    return d


def parse_range(start, end):
    s, e = parse_date_arg("start", start), parse_date_arg("end", end)
    if e < s:
        raise ToolError("invalid_date_range", f"end {e} is before start {s}",
                        "give start <= end; both ends are inclusive (a single day is start = end)")
    return s, e


class Selection:
    def __init__(self, accounts, instrument):
        self.accounts, self.instrument = accounts, instrument

    def matches(self, account, instrument):
        return self.accounts[account] and (self.instrument is None or self.instrument == instrument)


def select(book, account=None, broker=None, symbol=None):
    if account is not None and account not in book.account_index:
        known = ", ".join(a.id for a in book.accounts)
        raise ToolError("unknown_account", f"account: no account {quote(account)}",
                        f"accounts are {known}; get_accounts lists them")
    if broker is not None and not any(a.broker == broker for a in book.accounts):
        known = ", ".join(sorted({a.broker for a in book.accounts}))
        raise ToolError("unknown_broker", f"broker: no configured account is at broker {quote(broker)}",
                        f"configured brokers are {known} (lower-case names)")
    accounts = [(account is None or a.id == account) and (broker is None or a.broker == broker)
                for a in book.accounts]
    instrument = resolve_symbol(book, symbol) if symbol is not None else None
    return Selection(accounts, instrument)


def resolve_symbol(book, text):
    text = text.strip()
    if ":" in text:
        exchange, symbol = text.split(":", 1)
        idx = book.instrument_index.get((exchange.upper(), symbol))
        if idx is None:
            for i, inst in enumerate(book.instruments):
                if inst.exchange.lower() == exchange.lower() and inst.symbol.lower() == symbol.lower():
                    idx = i
                    break
        if idx is None:
            raise unknown_symbol(book, text)
        return idx
    matches = [i for i, inst in enumerate(book.instruments) if inst.symbol.lower() == text.lower()]
    if not matches:
        raise unknown_symbol(book, text)
    if len(matches) == 1:
        return matches[0]
    names = sorted(book.instruments[i].qualified for i in matches)
    raise invalid_argument(f"symbol: {quote(text)} matches several instruments: {', '.join(names)}",
                           f"qualify it as EXCHANGE:SYMBOL, e.g. {names[0]}")


def unknown_symbol(book, text):
    bursa = any(i.exchange == "BURSA" for i in book.instruments)
    hint = "use a symbol the book holds or traded (get_positions, get_trade_history)"
    if bursa and any(c.isascii() and c.isalpha() for c in text):
        hint += "; Bursa symbols are numeric codes such as 1155 (Maybank), not names"
    return ToolError("unknown_symbol", f"symbol: no instrument {quote(text)} in the configured accounts", hint)


def opt_str(args, name):
    v = args.get(name)
    if v is not None and not isinstance(v, str):
        raise invalid_argument(f"{name}: invalid type: expected a string",
                               "see the tool's input schema for types")
    return v


def notes_suffix(notes):
    return f" Notes: {' | '.join(notes)}" if notes else ""


# ---------------------------------------------------------------------------------------
# The seven tools: each takes the book and a dict of arguments, returns (result, summary)
# ---------------------------------------------------------------------------------------

def tool_get_accounts(book, args):
    check_args(args, ("currency",))
    ccy = report_currency(book, opt_str(args, "currency"))
    v = value_book(book, ccy, True)
    notes = []
    accounts = account_rows(book, v, notes)
    common_notes(book, v, v["positions"], notes)
    total = sum((a["_total_converted"] for a in accounts), ZERO)
    result = {"currency": ccy, "total_value": num(total), "accounts": strip_private(accounts), "notes": notes}
    return result, f"{len(accounts)} account(s), total value {dstr(total)} {ccy}.{notes_suffix(notes)}"


def sorted_buckets(m):
    return sorted(m.items(), key=lambda kv: (-kv[1], kv[0]))


def tool_get_portfolio_summary(book, args):
    check_args(args, ("currency",))
    ccy = report_currency(book, opt_str(args, "currency"))
    v = value_book(book, ccy, True)
    notes = []
    accounts = account_rows(book, v, notes)
    common_notes(book, v, v["positions"], notes)
    by_ccy, by_broker = {}, {}
    pv = unreal = ZERO
    for p in v["positions"]:
        m = p["marked"]
        if m is None:
            continue
        pv += m["market_value_converted"]
        unreal += m["unrealized_pnl_converted"]
        c = book.instruments[p["instrument"]].currency
        by_ccy[c] = by_ccy.get(c, ZERO) + m["market_value_converted"]
        b = book.accounts[p["account"]].broker
        by_broker[b] = by_broker.get(b, ZERO) + m["market_value_converted"]
    cash_value = ZERO
    for c in v["cash"]:
        cash_value += c["converted"]
        by_ccy[c["currency"]] = by_ccy.get(c["currency"], ZERO) + c["converted"]
        b = book.accounts[c["account"]].broker
        by_broker[b] = by_broker.get(b, ZERO) + c["converted"]
    total = pv + cash_value
    result = {
        "currency": ccy, "as_of": str(v["as_of"]), "total_value": num(total),
        "positions_value": num(pv), "cash_value": num(cash_value), "unrealized_pnl": num(unreal),
        "by_currency": [{"currency": k, "value": num(x), "pct": num(pct(x, total))} for k, x in sorted_buckets(by_ccy)],
        "by_broker": [{"broker": k, "value": num(x), "pct": num(pct(x, total))} for k, x in sorted_buckets(by_broker)],
        "accounts": strip_private(accounts), "notes": notes,
    }
    summary = (f"Total value {dstr(total)} {ccy} as of {v['as_of']} (positions {dstr(pv)}, cash {dstr(cash_value)}, "
               f"unrealized P&L {dstr(unreal)}).{notes_suffix(notes)}")
    return result, summary


def tool_get_positions(book, args):
    check_args(args, ("account", "broker", "symbol", "currency"))
    ccy = report_currency(book, opt_str(args, "currency"))
    sel = select(book, opt_str(args, "account"), opt_str(args, "broker"), opt_str(args, "symbol"))
    v = value_book(book, ccy, False, sel)
    listed = [p for p in v["positions"] if sel.matches(p["account"], p["instrument"])]
    gross = sum((abs(p["marked"]["notional_converted"]) for p in listed if p["marked"]), ZERO)
    out, total = [], ZERO
    for p in listed:
        inst = book.instruments[p["instrument"]]
        acc = book.accounts[p["account"]]
        m = p["marked"]
        if m is not None:
            total += m["market_value_converted"]
        g = (lambda k: num(m[k])) if m is not None else (lambda k: None)
        out.append({
            "account": acc.id, "broker": acc.broker, "exchange": inst.exchange, "symbol": inst.symbol,
            "name": inst.name, "asset_class": inst.asset_class, "sector": sector_of(inst),
            "country": inst.country or UNKNOWN_COUNTRY, "instrument_currency": inst.currency,
            "side": p["side"], "quantity": num(p["quantity"]), "avg_cost": num(p["avg_cost"]),
            "cost_basis": num(p["cost_basis"]),
            "market_price": g("price"), "market_price_date": str(m["date"]) if m else None,
            "notional": g("notional"), "notional_converted": g("notional_converted"),
            "market_value": g("market_value"), "market_value_converted": g("market_value_converted"),
            "unrealized_pnl": g("unrealized_pnl"), "unrealized_pnl_converted": g("unrealized_pnl_converted"),
            "weight_pct": num(pct(abs(m["notional_converted"]), gross)) if m else None,
        })
    notes = []
    common_notes(book, v, listed, notes)
    if not out:
        notes.append("no open positions match: every selected instrument is flat (a real answer, not missing data)")
    result = {"currency": ccy, "as_of": str(v["as_of"]), "total_market_value": num(total),
              "positions": out, "notes": notes}
    return result, (f"{len(out)} open position(s) as of {v['as_of']}, market value {dstr(total)} {ccy}."
                    f"{notes_suffix(notes)}")


EXPOSURE_BY = ("sector", "currency", "broker", "account", "asset_class", "country", "symbol")


def tool_get_exposure(book, args):
    check_args(args, ("by", "basis", "currency"))
    if "by" not in args or args["by"] is None:
        raise invalid_argument("missing argument `by`",
                               "allowed arguments: by, basis, currency; see the tool's input schema for types")
    by = args["by"]
    if by not in EXPOSURE_BY:
        raise invalid_argument(f"by: unknown variant {quote(str(by))}, expected one of {', '.join(EXPOSURE_BY)}",
                               "allowed arguments: by, basis, currency; see the tool's input schema for types")
    basis = args.get("basis") or "gross"
    if basis not in ("gross", "net"):
        raise invalid_argument(f"basis: unknown variant {quote(str(basis))}, expected gross or net",
                               "allowed arguments: by, basis, currency; see the tool's input schema for types")
    ccy = report_currency(book, opt_str(args, "currency"))
    v = value_book(book, ccy, False)
    buckets = {}
    total = gross_total = ZERO
    for p in v["positions"]:
        m = p["marked"]
        if m is None:
            continue
        inst = book.instruments[p["instrument"]]
        acc = book.accounts[p["account"]]
        if by == "sector":
            key = sector_of(inst)
        elif by == "currency":
            key = inst.currency
        elif by == "broker":
            key = acc.broker
        elif by == "account":
            key = acc.id
        elif by == "asset_class":
            key = inst.asset_class
        elif by == "country":
            key = inst.country or UNKNOWN_COUNTRY
        else:
            key = inst.qualified
        nc = m["notional_converted"]
        value = abs(nc) if basis == "gross" else nc
        total += value
        gross_total += abs(nc)
        slot = buckets.setdefault(key, [ZERO, 0])
        slot[0] += value
        slot[1] += 1
    rows = [{"key": k, "value": x, "pct": pct(x, gross_total), "position_count": n}
            for k, (x, n) in buckets.items()]
    rows.sort(key=lambda b: (-b["value"], b["key"]))
    notes = []
    common_notes(book, v, v["positions"], notes)
    notes = [n for n in notes if not n.startswith("the broker reports no commissions")]
    for b in rows:
        if by == "sector" and b["key"] == UNCLASSIFIED:
            p = "-" if b["pct"] is None else str(b["pct"])
            notes.append(f"{b['position_count']} position(s) have no sector and sit in the Unclassified bucket "
                         f"({p}% of gross); add them to the sectors_file to classify")
        if by == "country" and b["key"] == UNKNOWN_COUNTRY:
            notes.append(f"{b['position_count']} position(s) have no country and sit in the Unknown bucket")
    if basis == "net":
        notes.append("net basis: bucket pct are shares of the gross total, so they add up to the net total's "
                     "share of gross, not to 100")
    out = [{"key": b["key"], "value": num(b["value"]), "pct": num(b["pct"]), "position_count": b["position_count"]}
           for b in rows]
    result = {"by": by, "basis": basis, "currency": ccy, "total": num(total), "gross_total": num(gross_total),
              "buckets": out, "notes": notes}
    top = ", ".join(f"{b['key']} {'-' if b['pct'] is None else b['pct']}%" for b in rows[:5])
    return result, f"{basis} exposure by {by} ({ccy}): {top}.{notes_suffix(notes)}"


def tool_get_trade_history(book, args):
    check_args(args, ("start", "end", "account", "broker", "symbol", "side", "limit"))
    for req in ("start", "end"):
        if req not in args:
            raise invalid_argument(f"missing argument `{req}`",
                                   "allowed arguments: start, end, account, broker, symbol, side, limit; "
                                   "see the tool's input schema for types")
    start, end = parse_range(args["start"], args["end"])
    limit = args.get("limit")
    limit = DEFAULT_LIMIT if limit is None else limit
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise invalid_argument("limit: invalid type: expected an integer", "see the tool's input schema for types")
    if not 1 <= limit <= MAX_LIMIT:
        raise invalid_argument(f"limit: {limit} is outside 1..={MAX_LIMIT}",
                               f"give a limit from 1 to {MAX_LIMIT}, and narrow the dates or filters to see more")
    sel = select(book, opt_str(args, "account"), opt_str(args, "broker"), opt_str(args, "symbol"))
    side = args.get("side")
    if side is not None and side not in ("buy", "sell"):
        raise invalid_argument(f"side: unknown variant {quote(str(side))}, expected buy or sell",
                               "see the tool's input schema for types")
    fills, total, unknown = [], 0, 0
    for f in reversed(book.fills):
        if not (start <= f.trade_date <= end and sel.matches(f.account, f.instrument)
                and (side is None or f.side == side)):
            continue
        total += 1
        if len(fills) >= limit:
            continue
        inst = book.instruments[f.instrument]
        acc = book.accounts[f.account]
        if not f.commission_known:
            unknown += 1
        fills.append({
            "id": f.id, "account": acc.id, "broker": acc.broker, "exchange": inst.exchange,
            "symbol": inst.symbol, "side": f.side, "quantity": num(f.quantity), "price": num(f.price),
            "commission": num(f.commission) if f.commission_known else None,
            "commission_currency": f.commission_currency, "commission_known": f.commission_known,
            "time": rfc3339(f.time), "trade_date": str(f.trade_date), "instrument_currency": inst.currency,
            "notional": num(round_ccy(f.quantity * f.price * inst.multiplier, inst.currency)),
        })
    count = len(fills)
    notes = []
    if total > count:
        notes.append(f"showing the newest {count} of {total} fills; narrow the dates or filters, or raise limit "
                     f"(at most {MAX_LIMIT})")
    if unknown:
        notes.append(f"{unknown} fill(s) carry no commission from the broker (commission null): their P&L is "
                     "gross of fees")
    if total == 0:
        notes.append("no fills match in this period: a real answer, not missing data")
    result = {"start": str(start), "end": str(end), "count": count, "total_count": total,
              "truncated": total > count, "fills": fills, "notes": notes}
    return result, f"{count} of {total} fill(s) from {start} to {end}, newest first.{notes_suffix(notes)}"


GROUP_BY = ("symbol", "account", "broker", "month", "none")


def tool_get_realized_pnl(book, args):
    allowed = ("start", "end", "account", "broker", "symbol", "currency", "group_by", "include_lots")
    check_args(args, allowed)
    for req in ("start", "end"):
        if req not in args:
            raise invalid_argument(f"missing argument `{req}`",
                                   f"allowed arguments: {', '.join(allowed)}; see the tool's input schema for types")
    start, end = parse_range(args["start"], args["end"])
    to = report_currency(book, opt_str(args, "currency"))
    sel = select(book, opt_str(args, "account"), opt_str(args, "broker"), opt_str(args, "symbol"))
    group_by = args.get("group_by") or "symbol"
    if group_by not in GROUP_BY:
        raise invalid_argument(f"group_by: unknown variant {quote(str(group_by))}, expected one of "
                               f"{', '.join(GROUP_BY)}", "see the tool's input schema for types")
    include_lots = bool(args.get("include_lots") or False)
    dp = MINOR_UNITS[to]
    q = quantum(dp)
    brokers = sorted({a.broker for a in book.accounts})
    state = {"net": ZERO, "gross": ZERO, "lots": 0, "current": None, "best": None, "worst": None}
    groups = {}
    lots = []
    dropped = [0]
    gross_of_fees = set()
    rate_cache = {}

    def finish(t):
        if t[1] > 0 and (state["best"] is None or t[1] > state["best"][1]):
            state["best"] = t
        if t[1] < 0 and (state["worst"] is None or t[1] < state["worst"][1]):
            state["worst"] = t

    def on_close(fill, lot):
        if not (start <= lot.close_date <= end) or not sel.matches(lot.account, lot.instrument):
            return
        inst = book.instruments[lot.instrument]
        ccy = inst.currency
        if ccy == to:
            rate_display = ONE
            net = lot.net.quantize(q, rounding=ROUND_HALF_UP)
            gross = lot.gross.quantize(q, rounding=ROUND_HALF_UP)
        else:
            key = (ccy, lot.close_date)
            r = rate_cache.get(key)
            if r is None:
                r = rate_cache[key] = fx_rate(book, ccy, to, lot.close_date)
            rate_display = r.display
            net = r.apply(lot.net).quantize(q, rounding=ROUND_HALF_UP)
            gross = r.apply(lot.gross).quantize(q, rounding=ROUND_HALF_UP)
        state["net"] += net
        state["gross"] += gross
        state["lots"] += 1
        if group_by != "none":
            if group_by == "symbol":
                gkey = inst.qualified
            elif group_by == "account":
                gkey = book.accounts[lot.account].id
            elif group_by == "broker":
                gkey = book.accounts[lot.account].broker
            else:
                gkey = f"{lot.close_date.year:04d}-{lot.close_date.month:02d}"
            g = groups.setdefault(gkey, [ZERO, ZERO, 0])
            g[0] += net
            g[1] += gross
            g[2] += 1
        if not lot.commission_known:
            gross_of_fees.add(lot.instrument)
        cur = state["current"]
        if cur is not None and cur[0] == lot.close_fill:
            cur[1] += net
        else:
            if cur is not None:
                finish(cur)
            state["current"] = [lot.close_fill, net]
        if include_lots:
            if len(lots) >= MAX_LOTS:
                dropped[0] += 1
                return
            acc = book.accounts[lot.account]
            cq = quantum(MINOR_UNITS[ccy])
            g_r = lot.gross.quantize(cq, rounding=ROUND_HALF_UP)
            n_r = lot.net.quantize(cq, rounding=ROUND_HALF_UP)
            lots.append({
                "account": acc.id, "broker": acc.broker, "exchange": inst.exchange, "symbol": inst.symbol,
                "side": lot.side, "quantity": num(lot.quantity), "open_date": str(lot.open_date),
                "close_date": str(lot.close_date), "open_price": num(lot.open_price),
                "close_price": num(lot.close_price), "instrument_currency": ccy,
                "gross_pnl": num(g_r), "commissions": num(g_r - n_r), "net_pnl": num(n_r),
                "fx_rate": num(rate_display), "net_pnl_converted": num(net),
                "open_fill_id": book.fills[lot.open_fill].id, "close_fill_id": book.fills[lot.close_fill].id,
                "commission_known": lot.commission_known,
            })

    replay(book, with_cash=False, on_close=on_close)
    if state["current"] is not None:
        finish(state["current"])

    def extreme(t):
        if t is None:
            return None
        f = book.fills[t[0]]
        inst = book.instruments[f.instrument]
        return {"fill_id": f.id, "account": book.accounts[f.account].id, "exchange": inst.exchange,
                "symbol": inst.symbol, "close_date": str(f.trade_date), "net_pnl": num(t[1])}

    notes = []
    if state["lots"] == 0:
        notes.append(f"no lots were closed between {start} and {end} under these filters: realized P&L is a true "
                     "zero, not missing data")
    if gross_of_fees:
        names = sorted(book.instruments[i].qualified for i in gross_of_fees)
        notes.append(f"P&L is gross of fees for {', '.join(names)}: the broker reports no commissions for these fills")
    if dropped[0]:
        notes.append(f"lots lists the first {MAX_LOTS} closed lots; {dropped[0]} more are in the totals but not "
                     "listed (narrow the dates or filters)")
    notes.append("realized P&L covers closed lots only; dividends, interest and fees are cash, not P&L")
    net, gross = state["net"], state["gross"]
    result = {
        "currency": to, "start": str(start), "end": str(end),
        "net_pnl": num(net), "gross_pnl": num(gross), "commissions": num(gross - net), "lot_count": state["lots"],
        "groups": [{"key": k, "net_pnl": num(g[0]), "gross_pnl": num(g[1]), "commissions": num(g[1] - g[0]),
                    "lot_count": g[2]} for k, g in sorted(groups.items())],
        "biggest_gain": extreme(state["best"]), "biggest_loss": extreme(state["worst"]),
    }
    if include_lots:
        result["lots"] = lots
    result["notes"] = notes
    summary = (f"Realized P&L {start} to {end}: net {dstr(net.quantize(q))} {to} over {state['lots']} closed lot(s) "
               f"(gross {dstr(gross.quantize(q))}, commissions {dstr((gross - net).quantize(q))}).{notes_suffix(notes)}")
    return result, summary


def tool_get_server_health(book, args):
    check_args(args, ())
    started = time.perf_counter()
    latency = int((time.perf_counter() - started) * 1000)
    brokers = [{"account": a.id, "broker": a.broker, "mode": "book", "status": "ok", "latency_ms": latency,
                "detail": f"{book.source}, as of {book.as_of}", "hint": None} for a in book.accounts]
    notes = []
    ledger = replay(book, with_cash=False)
    reported = {(a, i): qty for a, i, qty in book.reported}
    reporting = {a for a, _ in reported}
    implied = {(a, i): signed_quantity(q) for a, i, q in open_positions(ledger) if a in reporting}
    keys = sorted(set(reported) | set(implied), key=lambda k: (k[0], book.instruments[k[1]].key))
    recon = []
    for k in keys:
        r, i = reported.get(k, ZERO), implied.get(k, ZERO)
        if r != i:
            inst = book.instruments[k[1]]
            recon.append({"account": book.accounts[k[0]].id, "exchange": inst.exchange, "symbol": inst.symbol,
                          "reported_quantity": num(r), "implied_quantity": num(i), "difference": num(r - i)})
    if recon:
        notes.append(f"{len(recon)} position(s) reported by a broker disagree with the fills; answers follow the "
                     "fills (reconciliation lists each)")
    quotes = []
    for (base, quote_) in book.fx:
        lq = latest_fx(book, base, quote_, book.as_of)
        if lq is not None:
            quotes.append((base, quote_, lq[1], lq[0]))
    quotes.sort(key=lambda x: (x[0], x[1]))
    stale_q = [x for x in quotes if (book.as_of - x[3]).days > STALE_DAYS]
    for base, quote_, _rate, d in stale_q:
        fresher = next((o for o in quotes if o[0] == quote_ and o[1] == base and o[3] > d), None)
        if fresher is not None:
            notes.append(f"{base}/{quote_} was last quoted on {d}; conversions use the newer {fresher[0]}/{fresher[1]} "
                         f"rate of {fresher[3]} instead")
        else:
            notes.append(f"{base}/{quote_} was last quoted on {d}, more than {STALE_DAYS} days before {book.as_of}: "
                         "conversions in it are stale")
    result = {
        "health": "ok" if book.accounts else "down", "version": VERSION, "brokers": brokers,
        "reconciliation": recon,
        "fx": {"as_of": str(book.as_of),
               "pairs": [{"base": b, "quote": q_, "rate": num(r), "date": str(d)} for b, q_, r, d in quotes],
               "stale": [f"{b}/{q_}" for b, q_, _r, _d in stale_q]},
        "notes": notes,
    }
    return result, (f"Health {result['health']}: {len(brokers)} account(s), {len(recon)} reconciliation "
                    f"difference(s).{notes_suffix(notes)}")


TOOLS = {
    "get_accounts": tool_get_accounts,
    "get_positions": tool_get_positions,
    "get_trade_history": tool_get_trade_history,
    "get_realized_pnl": tool_get_realized_pnl,
    "get_portfolio_summary": tool_get_portfolio_summary,
    "get_exposure": tool_get_exposure,
    "get_server_health": tool_get_server_health,
}


def call(book, name, args):
    """Runs one tool: (is_error, structured result, summary text)."""
    with localcontext(CTX):
        try:
            result, summary = TOOLS[name](book, dict(args or {}))
            return False, {"status": "ok", **result}, summary
        except ToolError as e:
            structured = {"status": "error", "error": {"code": e.code, "message": e.message, "hint": e.hint}}
            return True, structured, f"error {e.code}: {e.message} (hint: {e.hint})"
        except Exception as e:  # noqa: BLE001 - the server stays up, the caller gets `internal`
            structured = {"status": "error", "error": {"code": "internal", "message": f"{name} failed unexpectedly: "
                                                       f"{type(e).__name__}: {e}",
                                                       "hint": "the server is still running; retry or report it"}}
            return True, structured, f"error internal: {e}"


# ---------------------------------------------------------------------------------------
# MCP server (official Python SDK, high-level MCPServer)
# ---------------------------------------------------------------------------------------

def build_server(book):
    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult, TextContent, ToolAnnotations

    server = MCPServer(
        name="tradedesk-python",
        version=VERSION,
        instructions="Python twin of tradedesk's portfolio tools (benchmark baseline).",
        log_level="WARNING",
    )
    ro = ToolAnnotations(read_only_hint=True)

    def result(name, args) -> CallToolResult:
        args = {k: v for k, v in args.items() if v is not None}
        is_error, structured, summary = call(book, name, args)
        return CallToolResult(content=[TextContent(type="text", text=summary)],
                              structured_content=structured, is_error=is_error)

    @server.tool(title="Accounts", annotations=ro,
                 description="Every account with its cash, positions value and total value (account currency), "
                             "converted into one report currency.")
    async def get_accounts(currency: str | None = None) -> CallToolResult:
        return result("get_accounts", {"currency": currency})

    @server.tool(title="Open positions", annotations=ro,
                 description="Open positions at as_of: quantity, average cost, cost basis, mark, notional, market "
                             "value, unrealized P&L and weight, each converted into the report currency.")
    async def get_positions(account: str | None = None, broker: str | None = None, symbol: str | None = None,
                            currency: str | None = None) -> CallToolResult:
        return result("get_positions", {"account": account, "broker": broker, "symbol": symbol, "currency": currency})

    @server.tool(title="Trade history", annotations=ro,
                 description="Fills between two trade dates (YYYY-MM-DD, inclusive), newest first.")
    async def get_trade_history(start: str, end: str, account: str | None = None, broker: str | None = None,
                                symbol: str | None = None, side: str | None = None,
                                limit: int | None = None) -> CallToolResult:
        return result("get_trade_history", {"start": start, "end": end, "account": account, "broker": broker,
                                            "symbol": symbol, "side": side, "limit": limit})

    @server.tool(title="Realized P&L", annotations=ro,
                 description="Realized P&L of lots closed between two dates (FIFO over the full history, net of "
                             "prorated commissions, converted at the closing date's rate), grouped.")
    async def get_realized_pnl(start: str, end: str, account: str | None = None, broker: str | None = None,
                               symbol: str | None = None, currency: str | None = None,
                               group_by: str | None = None, include_lots: bool | None = None) -> CallToolResult:
        return result("get_realized_pnl", {"start": start, "end": end, "account": account, "broker": broker,
                                           "symbol": symbol, "currency": currency, "group_by": group_by,
                                           "include_lots": include_lots})

    @server.tool(title="Portfolio summary", annotations=ro,
                 description="The whole portfolio in one currency at as_of: total value, positions, cash, "
                             "unrealized P&L, holdings by currency and by broker, and each account.")
    async def get_portfolio_summary(currency: str | None = None) -> CallToolResult:
        return result("get_portfolio_summary", {"currency": currency})

    @server.tool(title="Exposure breakdown", annotations=ro,
                 description="Exposure of open positions (notional, cash excluded) bucketed by sector, currency, "
                             "broker, account, asset_class, country or symbol; basis gross (default) or net.")
    async def get_exposure(by: str, basis: str | None = None, currency: str | None = None) -> CallToolResult:
        return result("get_exposure", {"by": by, "basis": basis, "currency": currency})

    @server.tool(title="Server health", annotations=ro,
                 description="Broker connection state, reconciliation of reported against implied positions, and "
                             "the FX rates in use with stale ones flagged.")
    async def get_server_health() -> CallToolResult:
        return result("get_server_health", {})

    return server


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_book = os.path.join(os.path.dirname(here), "demo", "demo-book.json")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("book", nargs="?", default=default_book, help="tradedesk-book/1 file (default: demo/demo-book.json)")
    p.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP on http://HOST:PORT/mcp instead of stdio")
    p.add_argument("--sse-responses", action="store_true",
                   help="HTTP: answer POSTs with SSE streams (SDK default) instead of JSON bodies")
    p.add_argument("--stateless", action="store_true", help="HTTP: stateless mode (no Mcp-Session-Id)")
    p.add_argument("--call", nargs="+", metavar=("TOOL", "ARGS"),
                   help="call one tool without MCP and print its structured result")
    a = p.parse_args()
    try:
        book = load_book(a.book)
    except BookError as e:
        print(str(e), file=sys.stderr)
        sys.exit(1)
    if a.call:
        name = a.call[0]
        if name not in TOOLS:
            print(f"error: unknown tool '{name}'\nhint: tools are {', '.join(TOOLS)}", file=sys.stderr)
            sys.exit(2)
        try:
            args = json.loads(a.call[1]) if len(a.call) > 1 else {}
        except ValueError as e:
            print(f"error: arguments are not valid JSON: {e}", file=sys.stderr)
            sys.exit(2)
        if not isinstance(args, dict):
            print("error: arguments must be a JSON object", file=sys.stderr)
            sys.exit(2)
        is_error, structured, _summary = call(book, name, args)
        print(json.dumps(structured, indent=2, ensure_ascii=False))
        sys.exit(1 if is_error else 0)
    server = build_server(book)
    if a.http:
        host, _, port = a.http.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        server.run("streamable-http", host=host, port=int(port), json_response=not a.sse_responses,
                   stateless_http=a.stateless)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
