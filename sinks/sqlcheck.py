"""The SQL API's allow-list: a query runs only if every table it reads is one of the store's
own and every function it calls is a known-safe one.

``check_query(sql, tables)`` tokenizes the SQL the way ClickHouse's lexer does (strings with
backslash and doubled-quote escapes, ``"quoted"`` and ``\\`backtick\\``` identifiers, nested
``/* */`` and ``--`` comments, ``{name:Type}`` parameters) and accepts it only when:

- it is ONE statement starting with SELECT or WITH (a trailing ``;`` is fine);
- no SETTINGS, FORMAT, INTO OUTFILE or APPLY clause (the API sets the limits and the format);
- every table position (after FROM, JOIN, a comma of a FROM list, IN) names a table or view
  of the store (``store_tables()``, from the migrations) or a CTE of the query; a name
  followed by ``(`` there is a table function and is refused, so are ``db.table`` names,
  ``system.*`` and ``information_schema.*``;
- every call ``name(`` is in :data:`FUNCTIONS` (aggregates with their combinators, math,
  strings, JSON, dates, arrays, conditionals, type conversions, type names for CAST). Nothing
  that reads files, URLs, other databases, dictionaries, settings, the server's or process's
  environment is in it (``file``, ``url``, ``s3``, ``remote``, ``mysql``, ``executable``,
  ``getSetting``, ``currentUser``, ``hostName``...), nor ``sleep``;
- anything the tokenizer does not know (``$$heredoc$$``, ``#`` comments, non-ASCII outside
  strings, parameters of type Identifier) is refused rather than guessed.

It refuses with :class:`sinks.store.QueryRejected` naming what was refused. The limits on
memory, time and result size are the API's (``sinks/api.py``): this module decides only
*what* may run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from .store import QueryRejected

__all__ = ["check_query", "check_select", "tokenize", "FUNCTIONS", "Token"]


@dataclass(frozen=True)
class Token:
    kind: str   # word | qident | string | number | param | op
    text: str   # for qident: the name without quotes; for word: as written
    pos: int
    end: int


_AGGREGATES = """
count sum avg min max any anyLast anyHeavy any_value first_value last_value argMin argMax
uniq uniqExact uniqCombined uniqCombined64 uniqHLL12 groupArray groupUniqArray groupArraySorted
groupArrayInsertAt groupBitAnd groupBitOr groupBitXor median medianExact medianTiming quantile
quantiles quantileExact quantilesExact quantileExactWeighted quantileTiming quantileTDigest
quantilesTDigest quantileDeterministic varPop varSamp stddevPop stddevSamp covarPop covarSamp
corr topK topKWeighted sumWithOverflow sumKahan sumMap minMap maxMap avgWeighted entropy
simpleLinearRegression histogram deltaSum boundingRatio retention windowFunnel sequenceMatch
sequenceCount row_number rank dense_rank percent_rank cume_dist ntile nth_value lagInFrame
leadInFrame groupConcat
""".split()

_COMBINATORS = ("If", "Array", "Distinct", "OrNull", "OrDefault", "ForEach", "Merge", "State", "Map")

_SCALARS = """
abs round roundBankers floor ceil ceiling trunc truncate sqrt cbrt exp exp2 exp10 log ln log2 log10
log1p pow power sin cos tan asin acos atan atan2 sinh cosh tanh pi e sign greatest least intDiv
intDivOrZero modulo moduloOrZero positiveModulo mod plus minus multiply divide negate gcd lcm isNaN
isFinite isInfinite ifNotFinite roundToExp2 roundDown erf erfc lgamma tgamma hypot degrees radians
bitAnd bitOr bitXor bitNot bitShiftLeft bitShiftRight bitCount bitTest
equals notEquals less greater lessOrEquals greaterOrEquals and or not xor if multiIf ifNull nullIf
coalesce isNull isNotNull assumeNotNull toNullable isZeroOrNull in notIn has hasAny hasAll like
notLike ilike notILike match exists transform identity materialize
length lengthUTF8 char_length empty notEmpty lower upper lowerUTF8 upperUTF8 lcase ucase concat
concatWithSeparator substring substr substringUTF8 left right leftUTF8 rightUTF8 trim trimBoth
trimLeft trimRight ltrim rtrim startsWith endsWith position positionCaseInsensitive locate replace
replaceAll replaceOne replaceRegexpOne replaceRegexpAll splitByChar splitByString splitByRegexp
splitByWhitespace arrayStringConcat extract extractAll reverse reverseUTF8 repeat format leftPad
rightPad lpad rpad hex unhex base64Encode base64Decode toValidUTF8 countSubstrings multiSearchAny
formatReadableSize formatReadableQuantity formatReadableTimeDelta MD5 SHA1 SHA256 cityHash64
sipHash64 xxHash64 murmurHash3_64 farmHash64 rand rand64 generateUUIDv4
JSONHas JSONLength JSONType JSONExtract JSONExtractString JSONExtractInt JSONExtractUInt
JSONExtractFloat JSONExtractBool JSONExtractRaw JSONExtractArrayRaw JSONExtractKeys
JSONExtractKeysAndValues JSON_VALUE JSON_QUERY JSON_EXISTS isValidJSON toJSONString
visitParamExtractString visitParamExtractInt visitParamExtractFloat visitParamExtractRaw
simpleJSONExtractString simpleJSONExtractInt simpleJSONExtractFloat simpleJSONExtractRaw simpleJSONHas
now now64 today yesterday toDate toDate32 toDateTime toDateTime64 toStartOfDay toStartOfHour
toStartOfMinute toStartOfFiveMinutes toStartOfTenMinutes toStartOfFifteenMinutes toStartOfWeek
toStartOfMonth toStartOfQuarter toStartOfYear toStartOfInterval toMonday toYear toQuarter toMonth
toDayOfMonth toDayOfWeek toDayOfYear toHour toMinute toSecond toISOWeek toISOYear toWeek toYearWeek
toYYYYMM toYYYYMMDD toYYYYMMDDhhmmss toUnixTimestamp toUnixTimestamp64Milli toUnixTimestamp64Micro
toUnixTimestamp64Nano toUnixTimestamp64Second fromUnixTimestamp fromUnixTimestamp64Milli
fromUnixTimestamp64Micro fromUnixTimestamp64Nano fromUnixTimestamp64Second dateDiff date_diff
dateAdd date_add dateSub date_sub dateTrunc date_trunc age timeSlot toTimeZone toLastDayOfMonth
addSeconds addMinutes addHours addDays addWeeks addMonths addYears addMilliseconds
subtractSeconds subtractMinutes subtractHours subtractDays subtractWeeks subtractMonths
subtractYears subtractMilliseconds toIntervalMillisecond toIntervalSecond toIntervalMinute
toIntervalHour toIntervalDay toIntervalWeek toIntervalMonth toIntervalYear formatDateTime
parseDateTimeBestEffort parseDateTimeBestEffortOrNull parseDateTime64BestEffort
parseDateTime64BestEffortOrNull toDateOrNull toDateTimeOrNull toDateTime64OrNull
toRelativeHourNum toRelativeMinuteNum toRelativeSecondNum toRelativeDayNum
toInt8 toInt16 toInt32 toInt64 toInt128 toInt256 toUInt8 toUInt16 toUInt32 toUInt64 toUInt128
toUInt256 toFloat32 toFloat64 toDecimal32 toDecimal64 toDecimal128 toString toFixedString toBool
toUUID toLowCardinality toTypeName toColumnTypeName toDecimalString cast CAST accurateCast
accurateCastOrNull toInt32OrZero toInt64OrZero toUInt32OrZero toUInt64OrZero toFloat64OrZero
toInt32OrNull toInt64OrNull toUInt32OrNull toUInt64OrNull toFloat64OrNull
array arrayConcat arrayElement indexOf countEqual arrayEnumerate arrayEnumerateUniq arrayPopBack
arrayPopFront arrayPushBack arrayPushFront arraySlice arraySort arrayReverseSort arrayUniq
arrayJoin arrayDistinct arrayMap arrayFilter arrayExists arrayAll arrayFirst arrayLast
arrayFirstIndex arrayLastIndex arraySum arrayAvg arrayMin arrayMax arrayCount arrayCumSum
arrayDifference arrayReduce arrayReverse arrayFlatten arrayZip arrayCompact arrayIntersect
arrayResize arraySplit arrayProduct arrayFold arrayPartialSort range emptyArrayString
emptyArrayUInt64 emptyArrayInt64 emptyArrayFloat64 tuple tupleElement untuple map mapKeys mapValues
mapContains columns
Nullable LowCardinality Array Tuple Map Decimal Decimal32 Decimal64 Decimal128 DateTime DateTime64
FixedString Enum8 Enum16
""".split()

#: every function (and type constructor) the API may call, lower-cased
FUNCTIONS: frozenset[str] = frozenset(f.lower() for f in _AGGREGATES + _SCALARS)
_AGG_LOWER = frozenset(a.lower() for a in _AGGREGATES)

#: words that may stand before "(" without being a call
_NOT_CALLS = frozenset("""
SELECT FROM WHERE PREWHERE IN AS AND OR NOT ON USING JOIN BY HAVING WHEN THEN ELSE CASE IS INTERVAL
GLOBAL UNION DISTINCT LIKE ILIKE BETWEEN WITH LIMIT OFFSET OVER WINDOW PARTITION QUALIFY FINAL
EXCEPT INTERSECT ALL DESC ASC
""".split())
_FORBIDDEN_WORDS = {"SETTINGS": "SETTINGS", "FORMAT": "FORMAT", "INTO": "INTO OUTFILE",
                    "OUTFILE": "INTO OUTFILE", "APPLY": "APPLY"}
_FROM_ENDS = frozenset("WHERE PREWHERE GROUP ORDER LIMIT HAVING UNION SELECT WINDOW QUALIFY ON USING "
                       "INTERSECT EXCEPT ARRAY SETTINGS".split())
_FORBIDDEN_DBS = frozenset({"system", "information_schema"})

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<line>--[^\n]*)
  | (?P<string>'(?:[^'\\]|\\.|'')*')
  | (?P<qident>"[^"\\\n]*"|`[^`\\\n]*`)
  | (?P<param>\{\s*[A-Za-z_][A-Za-z0-9_]*\s*:\s*[A-Za-z0-9_(), ']+\})
  | (?P<number>(?:\d[\w]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>::|->|<=|>=|!=|<>|==|\|\||[-+*/%=<>(),.\[\]?:;])
""", re.X)


def _skip_block_comment(sql: str, i: int) -> int:
    """Index after the ``/* ... */`` starting at ``i`` (nested, as ClickHouse reads it)."""
    depth, j = 0, i
    while j < len(sql):
        if sql.startswith("/*", j):
            depth += 1
            j += 2
        elif sql.startswith("*/", j):
            depth -= 1
            j += 2
            if depth == 0:
                return j
        else:
            j += 1
    raise QueryRejected("unterminated /* comment */")


def tokenize(sql: str) -> list[Token]:
    """ClickHouse tokens of ``sql`` without whitespace and comments; refuses what it does not know."""
    out: list[Token] = []
    i = 0
    while i < len(sql):
        if sql.startswith("/*", i):
            i = _skip_block_comment(sql, i)
            continue
        m = _TOKEN.match(sql, i)
        if not m:
            raise QueryRejected(f"cannot read the SQL at character {i} ({sql[i:i + 12]!r}): the API "
                                "accepts plain SELECT/WITH queries")
        kind = m.lastgroup or ""
        text = m.group()
        if kind == "qident":
            if m.end() < len(sql) and sql[m.end()] == text[0]:
                raise QueryRejected(f"quoted identifier with an escaped quote at character {i}")
            text = text[1:-1]
        if kind not in ("ws", "line"):
            out.append(Token(kind, text, i, m.end()))
        i = m.end()
    return out


def _is_name(t: Token | None) -> bool:
    return t is not None and t.kind in ("word", "qident")


def _upper(t: Token | None) -> str:
    return t.text.upper() if t is not None and t.kind == "word" else ""


def _function_allowed(name: str) -> bool:
    low = name.lower()
    if low in FUNCTIONS:
        return True
    return _aggregate_with_combinators(name)


def _aggregate_with_combinators(name: str) -> bool:
    """An allowed aggregate with combinator suffixes: countIf, uniqExactIf, groupArrayIf,
    sumArrayIf, ... (every way of splitting the suffixes off is tried)."""
    if name.lower() in _AGG_LOWER:
        return True
    return any(name.endswith(c) and len(name) > len(c) and _aggregate_with_combinators(name[: -len(c)])
               for c in _COMBINATORS)


def check_select(sql: str) -> list[Token]:
    """The tokens of ``sql`` if it is one SELECT/WITH statement without SETTINGS, FORMAT or
    INTO OUTFILE (what ``faultline query`` allows on the direct store too); else QueryRejected."""
    toks = tokenize(sql)
    while toks and toks[-1].text == ";":
        toks.pop()
    if not toks:
        raise QueryRejected("empty query")
    if any(t.kind == "op" and t.text == ";" for t in toks):
        raise QueryRejected("one statement per query")
    first = next((t for t in toks if not (t.kind == "op" and t.text == "(")), toks[0])
    if _upper(first) not in ("SELECT", "WITH"):
        raise QueryRejected(f"read-only: only SELECT or WITH queries, not {first.text.upper()!s}; "
                            "maintenance is `faultline store migrate|optimize`")
    for k, t in enumerate(toks):
        up = _upper(t)
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        if up in _FORBIDDEN_WORDS and not (nxt is not None and nxt.text == "("):
            raise QueryRejected(f"{_FORBIDDEN_WORDS[up]} is not allowed: the API sets the limits and "
                                "returns JSON")
    return toks


def _cte_names(toks: list[Token]) -> set[str]:
    """Names defined as ``name AS (`` (WITH name AS (subquery))."""
    out = set()
    for k in range(len(toks) - 2):
        if _is_name(toks[k]) and _upper(toks[k + 1]) == "AS" and toks[k + 2].text == "(":
            out.add(toks[k].text)
    return out


def check_query(sql: str, tables: Iterable[str]) -> str:
    """``sql`` without a trailing ``;`` if the allow-list accepts it, else QueryRejected."""
    toks = check_select(sql)
    allowed = set(tables) | _cte_names(toks)
    # one frame per parenthesis: is it a call's argument list, is a FROM list open in it
    frames: list[list] = [["top", False]]
    prev: Token | None = None
    for k, t in enumerate(toks):
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        frame = frames[-1]
        if t.kind == "param":
            if "identifier" in t.text.lower():
                raise QueryRejected("parameters of type Identifier are not allowed")
            if _table_position(prev, frame) and _upper(prev) != "IN":
                raise QueryRejected("a parameter cannot name a table")
        elif t.kind == "op" and t.text == "(":
            frames.append(["call" if _is_call(prev) else "group", False])
        elif t.kind == "op" and t.text == ")":
            if len(frames) > 1:
                frames.pop()
        elif _is_name(t):
            if t.text.lower() in _FORBIDDEN_DBS and nxt is not None and nxt.text == ".":
                raise QueryRejected(f"{t.text}.* tables are not allowed: query the store's own tables")
            if _table_position(prev, frame):
                _check_table(t, nxt, allowed)
            elif nxt is not None and nxt.text == "(" and _is_call(t):
                if not _function_allowed(t.text):
                    raise QueryRejected(f"function {t.text}() is not allowed by the read-only API's allow-list "
                                        "(no file/URL/remote/settings/environment access; readonly)")
                if t.text.lower() == "arrayreduce":
                    _check_reduce(toks, k)
            up = _upper(t)
            if frame[0] != "call":
                if up == "FROM":
                    frame[1] = True
                elif up == "JOIN":
                    frame[1] = _upper(prev) != "ARRAY"
                elif up in _FROM_ENDS:
                    frame[1] = False
        prev = t
    return sql[toks[0].pos:toks[-1].end]


def _is_call(t: Token | None) -> bool:
    """``t`` followed by "(" is a function call (a quoted name always is)."""
    if t is None or t.kind not in ("word", "qident"):
        return False
    return t.kind == "qident" or t.text.upper() not in _NOT_CALLS


def _table_position(prev: Token | None, frame: list) -> bool:
    up = _upper(prev)
    if up == "IN":
        return True
    if frame[0] == "call":
        return False
    if up in ("FROM", "JOIN"):
        return up == "FROM" or frame[1]
    return frame[1] and prev is not None and prev.kind == "op" and prev.text == ","


def _check_table(t: Token, nxt: Token | None, allowed: set[str]) -> None:
    if nxt is not None and nxt.text == "(":
        raise QueryRejected(f"table function {t.text}() is not allowed: query the store's own tables")
    if nxt is not None and nxt.text == ".":
        raise QueryRejected(f"{t.text}.<table>: qualified table names are not allowed; query the store's own tables")
    if t.text not in allowed:
        raise QueryRejected(f"table {t.text} is not one of the store's tables "
                            f"({', '.join(sorted(x for x in allowed if not x.startswith('mv_')))})")


def _check_reduce(toks: list[Token], k: int) -> None:
    """``arrayReduce('agg', ...)``: the aggregate, given as a string, must be allowed too."""
    arg = toks[k + 2] if k + 2 < len(toks) else None
    name = arg.text[1:-1].split("(", 1)[0].strip() if arg is not None and arg.kind == "string" else ""
    if not name or not _function_allowed(name):
        raise QueryRejected("arrayReduce() takes one of the allowed aggregate functions, as a string literal")
