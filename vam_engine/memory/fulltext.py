"""The store's one full-text index (SQLite FTS5), for every kind of text it keeps.

A document is a text of some ``kind`` ("speech": a transcript segment; other kinds, such as OCR
text, object labels or event and summary documents, go in the same index) keyed by ``(kind,
ref_id)``, the id of its row in that kind's own table, with the camera and the interval it
covers on the camera's axis. The FTS5 table ``fulltext`` keeps the text as written (column
``text``, not indexed) and the words it is indexed by (column ``words``: memory/words.py sets
each Chinese, Japanese or Korean character apart, since those scripts put no space between
words; tokenizer unicode61: case and diacritics folded, split at anything not a letter or
digit); its key, camera and times are in ``fulltext_docs``, whose ``doc_id`` is the FTS rowid.
Both are written in the caller's transaction (``put``, ``drop``), so a document and the row it
indexes commit together or not at all.

Queries are built here from untrusted text, never passed to FTS5 as syntax: each word is
quoted as an FTS5 string. ``search`` ranks with bm25 (FTS5's ``bm25()``: lower is better;
hits carry ``score = -bm25``, higher is better) and filters by kinds, cameras (exactly those
cameras: a '*' document is not in a camera's scope), a time range (overlap) and ``as_of``
(nothing that ends after it, as the vector filters). Modes: "phrase" (the words adjacent, in
order), "all" (every word, anywhere), "any" (at least one word; ranked by how many and how
rare); a word of a CJK run is a pair of its characters (memory/words.py), so "phrase" finds
a CJK string of any length exactly and "all"/"any" find its pairs. ``match_query`` turns a
user's search text into an expression: quoted parts (``"..."``, ``“...”``, ``「...」``,
``『...』``: ``phrases``) are phrases that must all occur; without quotes any word may match.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .db import Database, placeholders, select_in
from .words import index_text, term_tokens, terms, tokens  # terms: also the words entities match on

MODES = ("phrase", "all", "any")
_QUOTED = re.compile(r'["“„「『]([^"“”„「」『』]*)["”」』]')  # ASCII, curly and CJK corner-bracket quotes


@dataclass(frozen=True)
class FullTextHit:
    kind: str
    ref_id: int
    camera_id: str
    t_start: float
    t_end: float
    score: float  # -bm25: higher is better, comparable within one result list only


def _quote(tokens: list[str]) -> str:
    """An FTS5 phrase of index tokens (letters and digits only: nothing in it is syntax)."""
    return '"' + " ".join(tokens).replace('"', '""') + '"'


def expression(text: str, mode: str = "any") -> str | None:
    """An FTS5 MATCH expression for ``text`` in ``mode``; None when it has no word."""
    if mode not in MODES:
        raise ValueError(f"full-text mode must be one of {MODES}, got {mode!r}")
    if mode == "phrase":
        phrase = tokens(text)
        return _quote(phrase) if phrase else None
    unique = list(dict.fromkeys(terms(text)))
    if not unique:
        return None
    return (" AND " if mode == "all" else " OR ").join(_quote(term_tokens(w)) for w in unique)


def phrases(text: str) -> list[str]:
    """The quoted parts of a user's search text that hold a word."""
    return [p for p in _QUOTED.findall(str(text)) if tokens(p)]


def match_query(text: str) -> str | None:
    """A user's search text as an expression: its quoted parts as phrases that must all occur;
    without quotes, any of its words (ranked by bm25)."""
    quoted = phrases(text)
    if quoted:
        return " AND ".join(expression(p, "phrase") for p in quoted)
    return expression(text, "any")


def put(conn, kind: str, ref_id: int, camera_id: str, t_start: float, t_end: float, text: str) -> None:
    """Inside a transaction: index (or re-index) one document."""
    old = conn.execute("SELECT doc_id FROM fulltext_docs WHERE kind=? AND ref_id=?", (kind, int(ref_id))).fetchone()
    if old is not None:
        conn.execute("DELETE FROM fulltext WHERE rowid=?", (old[0],))
        conn.execute("DELETE FROM fulltext_docs WHERE doc_id=?", (old[0],))
    doc = conn.execute("INSERT INTO fulltext_docs (kind, ref_id, camera_id, t_start, t_end) VALUES (?,?,?,?,?)",
                       (kind, int(ref_id), camera_id, float(t_start), float(t_end))).lastrowid
    conn.execute("INSERT INTO fulltext (rowid, text, words) VALUES (?,?,?)", (doc, str(text), index_text(text)))


def set_end(conn, kind: str, ref_id: int, t_end: float) -> None:
    """Inside a transaction: a document's interval now ends at ``t_end`` (if later; its text
    is unchanged: a span of text shown on longer)."""
    conn.execute("UPDATE fulltext_docs SET t_end=MAX(t_end, ?) WHERE kind=? AND ref_id=?", (float(t_end), kind,
                                                                                          int(ref_id)))


def drop(conn, kind: str, ref_ids) -> int:
    """Inside a transaction: remove the documents of some rows of one kind. Returns how many."""
    docs = [r[0] for r in select_in(conn, "SELECT doc_id FROM fulltext_docs WHERE kind=? AND ref_id IN ({ids})",
                                    ref_ids, kind)]
    conn.executemany("DELETE FROM fulltext WHERE rowid=?", [(d,) for d in docs])
    conn.executemany("DELETE FROM fulltext_docs WHERE doc_id=?", [(d,) for d in docs])
    return len(docs)


def _scope(where: list, args: list, cameras, t0, t1, as_of) -> None:
    """Add a query's scope to ``where``/``args``: exactly ``cameras``, documents overlapping
    [t0, t1], and none that ends after ``as_of``."""
    if cameras:
        where.append(f"d.camera_id IN ({placeholders(cameras)})")
        args += list(cameras)
    for clause, value in (("d.t_end >= ?", t0), ("d.t_start <= ?", t1), ("d.t_end <= ?", as_of)):
        if value is not None:
            where.append(clause)
            args.append(float(value))


class FullTextIndex:
    def __init__(self, db: Database):
        self.db = db

    def search(self, query: str, *, mode: str | None = None, kinds=None, cameras=None, t0: float | None = None,
               t1: float | None = None, as_of: float | None = None, limit: int = 50) -> list[FullTextHit]:
        """Documents matching ``query``, best first. ``mode`` None: ``match_query`` (quoted
        phrases, else any word); else "phrase", "all" or "any" over the whole text."""
        expr = match_query(query) if mode is None else expression(query, mode)
        if expr is None or int(limit) < 1:
            return []
        where, args = ["fulltext MATCH ?"], [expr]
        if kinds:
            where.append(f"d.kind IN ({placeholders(kinds)})")
            args += list(kinds)
        _scope(where, args, cameras, t0, t1, as_of)
        rows = self.db.conn().execute(
            "SELECT d.kind, d.ref_id, d.camera_id, d.t_start, d.t_end, bm25(fulltext) AS rank FROM fulltext "
            f"JOIN fulltext_docs d ON d.doc_id = fulltext.rowid WHERE {' AND '.join(where)} "
            "ORDER BY rank, d.t_start LIMIT ?", [*args, int(limit)]).fetchall()
        return [FullTextHit(k, int(r), c, a, b, -float(s)) for k, r, c, a, b, s in rows]

    def camera_counts(self, word: str, *, cameras=None, t0: float | None = None,
                      as_of: float | None = None) -> dict[str, int]:
        """{camera: documents holding ``word``} over documents ending in [t0, as_of] (of
        ``cameras``, else every camera; documents of every camera, '*', left out)."""
        expr = expression(word, "all")
        if expr is None:
            return {}
        where, args = ["fulltext MATCH ?", "d.camera_id != '*'"], [expr]
        _scope(where, args, cameras, t0, None, as_of)
        rows = self.db.conn().execute(
            "SELECT d.camera_id, COUNT(*) FROM fulltext JOIN fulltext_docs d ON d.doc_id = fulltext.rowid "
            f"WHERE {' AND '.join(where)} GROUP BY d.camera_id", args).fetchall()
        return {c: int(n) for c, n in rows}

    def count(self, kind: str | None = None) -> int:
        if kind is None:
            return self.db.conn().execute("SELECT COUNT(*) FROM fulltext_docs").fetchone()[0]
        return self.db.conn().execute("SELECT COUNT(*) FROM fulltext_docs WHERE kind=?", (kind,)).fetchone()[0]

    def text(self, kind: str, ref_id: int) -> str | None:
        row = self.db.conn().execute("SELECT f.text FROM fulltext_docs d JOIN fulltext f ON f.rowid = d.doc_id "
                                     "WHERE d.kind=? AND d.ref_id=?", (kind, int(ref_id))).fetchone()
        return None if row is None else row[0]
