"""The QA history: every question asked with its answer, and the rolling QA summary s_qa
(OASIS 3.1). Every read takes ``as_of``: only records and summaries at or before it.

History is partitioned: a question sees only the records and the rolling summary of its own
scope, the exact set of cameras it was asked about ("*": every camera) and its session (""
without one). A question about some cameras never meets what was asked or answered about
others, and a camera-limited asker never puts text into the prompts of a wider one (nor of
another session)."""
from __future__ import annotations

import json
import time

import numpy as np

from ..ingest import camera_list
from ..numerics import finite_time, unit
from .db import Database
from .records import QARecord

def scope_text(cameras) -> str:
    """How a camera scope is stored: "*" for every camera, else the sorted JSON list."""
    cams = camera_list(cameras)
    return json.dumps(sorted(set(cams))) if cams else "*"


def _scope(text: str) -> tuple[str, ...] | None:
    return None if text == "*" else tuple(json.loads(text))


def _summary_key(cameras, session: str) -> str:
    return f"{session}|{scope_text(cameras)}"


def forget_sessions(conn, session_ids) -> int:
    """Inside a transaction: the history records and rolling summaries of ``session_ids`` go
    (the sessions are deleted: memory/sessions.py). Returns the records deleted."""
    n = 0
    for sid in session_ids:
        n += conn.execute("DELETE FROM qa_history WHERE session=?", (sid,)).rowcount
        conn.execute("DELETE FROM qa_summary WHERE substr(key, 1, ?) = ?", (len(sid) + 1, f"{sid}|"))
    return n


class QAHistory:
    def __init__(self, db: Database):
        self.db = db

    def add(self, t: float, question: str, answer: str, embedding, cameras=None, session: str = "") -> int:
        """Record one answered question at time ``t`` in the history of (``cameras``,
        ``session``); ``embedding`` may be None (the record is then never retrieved, only kept).
        Returns its id."""
        t = finite_time(t, "QAHistory.add: t")
        blob = None if embedding is None else unit(embedding, "QAHistory.add").tobytes()
        with self.db.transaction() as conn:
            cur = conn.execute("INSERT INTO qa_history (t, cameras, session, question, answer, embedding, created_at)"
                               " VALUES (?,?,?,?,?,?,?)",
                               (t, scope_text(cameras), str(session), str(question), str(answer), blob, time.time()))
            return int(cur.lastrowid)

    def retrieve(self, query_emb, k: int = 1, as_of: float | None = None, cameras=None,
                 session: str = "") -> list[QARecord]:
        """The ``k`` records of (``cameras``, ``session``) most similar (cosine) to the query among
        those with t <= as_of, best first. Records embedded in another dimension (a different
        text model) are skipped."""
        if k < 1:
            return []
        q = unit(query_emb, "QAHistory.retrieve query")
        sql = ("SELECT qa_id, t, cameras, question, answer, embedding FROM qa_history"
               " WHERE embedding IS NOT NULL AND cameras=? AND session=?")
        args: tuple = (scope_text(cameras), str(session))
        if as_of is not None:
            sql += " AND t <= ?"
            args += (float(as_of),)
        rows = [r for r in self.db.conn().execute(sql, args).fetchall() if len(r[5]) == 4 * len(q)]
        if not rows:
            return []
        m = np.frombuffer(b"".join(r[5] for r in rows), dtype=np.float32).reshape(len(rows), len(q))
        scores = m @ q
        order = np.argsort(-scores, kind="stable")[:k]
        return [QARecord(rows[i][0], rows[i][1], _scope(rows[i][2]), rows[i][3], rows[i][4], float(scores[i]))
                for i in order]

    def records(self, as_of: float | None = None) -> list[QARecord]:
        """Every record with t <= as_of, in time order."""
        sql, args = "SELECT qa_id, t, cameras, question, answer FROM qa_history", ()
        if as_of is not None:
            sql, args = sql + " WHERE t <= ?", (float(as_of),)
        return [QARecord(r[0], r[1], _scope(r[2]), r[3], r[4])
                for r in self.db.conn().execute(sql + " ORDER BY t, qa_id", args).fetchall()]

    def set_embedding(self, qa_id: int, embedding) -> None:
        """Attach the embedding of a record added without one (its answer was returned first;
        the embedding is computed off the response path)."""
        blob = unit(embedding, "QAHistory.set_embedding").tobytes()
        with self.db.transaction() as conn:
            conn.execute("UPDATE qa_history SET embedding=? WHERE qa_id=?", (blob, int(qa_id)))

    def recent(self, n: int, as_of: float | None = None, cameras=None, session: str = "") -> list[QARecord]:
        """The ``n`` latest records of (``cameras``, ``session``) with t <= as_of (by time, then
        id: the order they were asked in), oldest first."""
        if n < 1:
            return []
        sql = "SELECT qa_id, t, cameras, question, answer FROM qa_history WHERE cameras=? AND session=?"
        args: tuple = (scope_text(cameras), str(session))
        if as_of is not None:
            sql, args = sql + " AND t <= ?", args + (float(as_of),)
        rows = self.db.conn().execute(sql + " ORDER BY t DESC, qa_id DESC LIMIT ?", args + (n,)).fetchall()
        return [QARecord(r[0], r[1], _scope(r[2]), r[3], r[4]) for r in rows[::-1]]

    def summary(self, as_of: float | None = None, cameras=None, session: str = "") -> str:
        """The rolling QA summary of (``cameras``, ``session``) as it stood at ``as_of`` (the
        latest one when None); "" when there is none yet."""
        sql, args = "SELECT text FROM qa_summary WHERE key=?", (_summary_key(cameras, session),)
        if as_of is not None:
            sql, args = sql + " AND t <= ?", args + (float(as_of),)
        row = self.db.conn().execute(sql + " ORDER BY t DESC LIMIT 1", args).fetchone()
        return "" if row is None else row[0]

    def update_summary(self, t: float, text: str, cameras=None, session: str = "") -> None:
        """Set the summary of (``cameras``, ``session``) from time ``t`` on. Earlier versions
        stay, so ``summary(as_of)`` of an earlier time reads what was known then."""
        t = finite_time(t, "QAHistory.update_summary: t")
        if not isinstance(text, str):
            raise ValueError(f"QAHistory.update_summary: text must be a str, got {type(text).__name__}")
        with self.db.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO qa_summary (key, text, t) VALUES (?,?,?)",
                         (_summary_key(cameras, session), text, t))
