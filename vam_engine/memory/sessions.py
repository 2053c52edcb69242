"""Sessions: one conversation each, durable in the store. A session is bound at creation to the
cameras its turns may name; it keeps its turns (what the user said and what the engine said
back, newest ``keep`` of them) and the standing requests ("tell me when ...") it started,
each a monitors row bound to it here, so a restart keeps replying to the right conversation.

Turns carry the stream time they are about (``t``, camera axis) and the wall clock; an
answer's or a reply's cited evidence is stored with it. Turn ids are never reused (streams of
a session resume after the last id a client saw). The QA history (qa.py) stays the dialogue a
question reads; the turns are the conversation as the user saw it.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

from ..errors import VamError
from .db import Database, placeholders
from .qa import forget_sessions
from .records import BoxRef, Evidence, Pose

ROLES = ("user", "engine")
TURN_KINDS = ("question", "answer", "watch", "cancel", "reply")
MAX_SESSION_ID = 200
MAX_TURN_CHARS = 8000  # of a turn's text stored
_TURN_COLS = "turn_id, session_id, role, kind, text, t, evidence, monitor_id, alert_id, created_at"


class SessionError(VamError):
    """A session that cannot take the turn: unknown, ended, or a camera outside its scope."""


class WatchNotAllowed(SessionError):
    """A request to be told later from a caller who may not start monitors (a read token)."""


class SessionLimit(VamError):
    """A session holds as many standing requests as it may (the service answers 429)."""


@dataclass(frozen=True)
class SessionTurn:
    """One turn of a conversation. ``role``: who said it (user, engine); ``kind``: question,
    answer, watch (a request to be told later, or its acknowledgement), cancel (a request to
    stop, or its confirmation), reply (the engine telling the user the watched event happened)."""

    turn_id: int
    session_id: str
    role: str
    kind: str
    text: str
    t: float | None            # stream time it is about (camera axis); None: nothing in view yet
    wall: float                # wall clock when it was stored
    evidence: tuple[Evidence, ...] = ()
    monitor_id: str | None = None
    alert_id: int | None = None


@dataclass(frozen=True)
class SessionWatch:
    """A standing request of a session: the monitor it started and what the user said."""

    monitor_id: str
    session_id: str
    request: str
    condition: str
    active: bool
    created_at: float
    cameras: tuple[str, ...] | None = None  # the monitor's (None: every camera)


@dataclass(frozen=True)
class Session:
    """A conversation. ``cameras`` None: every camera; ``turns`` oldest first (those asked for);
    ``watches``: its standing requests still active."""

    session_id: str
    cameras: tuple[str, ...] | None
    created_at: float
    ended_at: float | None
    turns: tuple[SessionTurn, ...] = ()
    watches: tuple[SessionWatch, ...] = ()

    @property
    def open(self) -> bool:
        return self.ended_at is None


def check_session_id(session_id) -> str:
    if not (isinstance(session_id, str) and 0 < len(session_id) <= MAX_SESSION_ID and session_id.isprintable()):
        raise VamError(f"session must be a printable string of 1..{MAX_SESSION_ID} characters, got "
                       f"{session_id!r:.60}")
    return session_id


def _cameras_text(cameras) -> str:
    return "*" if cameras is None else json.dumps(sorted(set(cameras)))


def _cameras(text: str) -> tuple[str, ...] | None:
    return None if text == "*" else tuple(json.loads(text))


def evidence_to_json(e: Evidence) -> dict:
    d = asdict(e)
    d["moment_ids"], d["frame_paths"] = list(e.moment_ids), list(e.frame_paths)
    return d


def _evidence(text: str) -> tuple[Evidence, ...]:
    """Evidence as ``evidence_to_json`` wrote it, its nested records rebuilt (a turn written
    before poses or boxes existed has neither)."""
    out = []
    for d in json.loads(text):
        d["moment_ids"], d["frame_paths"] = tuple(d["moment_ids"]), tuple(d["frame_paths"])
        d["pose"] = Pose(**d["pose"]) if d.get("pose") else None
        d["boxes"] = tuple(BoxRef(b["moment_id"], tuple(b["box"]), b["label"], b["score"], b["kind"],
                                  tuple(b["frame_size"])) for b in d.get("boxes", ()))
        out.append(Evidence(**d))
    return tuple(out)


def _turn(r) -> SessionTurn:
    return SessionTurn(r[0], r[1], r[2], r[3], r[4], r[5], r[9], _evidence(r[6]), r[7], r[8])


@dataclass(frozen=True)
class NewTurn:
    """A turn to store (``SessionRepository.add_turns``)."""

    role: str
    kind: str
    text: str
    t: float | None
    evidence: tuple = ()
    monitor_id: str | None = None
    alert_id: int | None = None

    def __post_init__(self):
        if self.role not in ROLES or self.kind not in TURN_KINDS:
            raise ValueError(f"a turn's role must be one of {ROLES} and kind one of {TURN_KINDS}, got "
                             f"{self.role!r}, {self.kind!r}")


class SessionRepository:
    def __init__(self, db: Database):
        self.db = db

    # -- sessions ------------------------------------------------------------------------------
    def ensure(self, session_id: str, cameras=None) -> tuple[Session, bool]:
        """The session, created now (bound to ``cameras``; None: every camera) when it does not
        exist yet; and whether it was created."""
        with self.db.transaction() as conn:
            cur = conn.execute("INSERT OR IGNORE INTO sessions (session_id, cameras, created_at) VALUES (?,?,?)",
                               (check_session_id(session_id), _cameras_text(cameras), time.time()))
            created = cur.rowcount > 0
        return self.get(session_id, turns=0), created

    def get(self, session_id: str, *, turns: int | None = None, after: int | None = None) -> Session | None:
        """The session with its last ``turns`` turns (None: all kept; 0: none) after turn id
        ``after``, and its active watches; None when there is no such session."""
        r = self.db.conn().execute("SELECT session_id, cameras, created_at, ended_at FROM sessions WHERE session_id=?",
                                   (session_id,)).fetchone()
        if r is None:
            return None
        listed = () if turns == 0 else tuple(self.turns(session_id, after=after, last=turns))
        return Session(r[0], _cameras(r[1]), r[2], r[3], listed, tuple(self.watches(session_id)))

    def list(self, *, prefix: str | None = None, include_ended: bool = False) -> list[Session]:
        """Sessions (without their turns) whose id begins with ``prefix``, oldest first."""
        sql, args = "SELECT session_id, cameras, created_at, ended_at FROM sessions WHERE 1=1", []
        if prefix is not None:
            sql += " AND substr(session_id, 1, ?) = ?"
            args += [len(prefix), prefix]
        if not include_ended:
            sql += " AND ended_at IS NULL"
        rows = self.db.conn().execute(sql + " ORDER BY created_at, session_id", args).fetchall()
        return [Session(r[0], _cameras(r[1]), r[2], r[3]) for r in rows]

    def end(self, session_id: str) -> bool:
        """Mark an open session ended (its turns stay readable). False: none such was open."""
        with self.db.transaction() as conn:
            cur = conn.execute("UPDATE sessions SET ended_at=? WHERE session_id=? AND ended_at IS NULL",
                               (time.time(), session_id))
            return cur.rowcount > 0

    def delete_ended(self, *, owner: str, keep: int, ended_before: float | None = None) -> list[str]:
        """Delete ended sessions with their turns and question history: those of ``owner`` (the
        part of their id up to its first "/", "" for an id without one) beyond its newest
        ``keep`` ended ones, and every one that ended before ``ended_before`` (None: no age
        rule). Returns the ids deleted. (Sessions are no camera's time, so this is not part of
        ``Store.delete``'s protocol. The monitors they started stay, ended, with their alerts,
        until their cameras' deletion or retention, and so do their bindings here: a row each,
        which keeps them their token's, never anybody's.)"""
        owner_of = "substr(session_id, 1, instr(session_id, '/'))"
        with self.db.transaction() as conn:
            ids = [r[0] for r in conn.execute(
                f"SELECT session_id FROM sessions WHERE ended_at IS NOT NULL AND {owner_of} = ? "
                "ORDER BY ended_at DESC, session_id DESC LIMIT -1 OFFSET ?", (owner, max(0, int(keep))))]
            if ended_before is not None:
                ids += [r[0] for r in conn.execute("SELECT session_id FROM sessions WHERE ended_at IS NOT NULL "
                                                   "AND ended_at < ?", (float(ended_before),))]
            ids = sorted(set(ids))
            for sid in ids:
                for table in ("session_turns", "sessions"):
                    conn.execute(f"DELETE FROM {table} WHERE session_id=?", (sid,))
            forget_sessions(conn, ids)
        return ids

    # -- turns ---------------------------------------------------------------------------------
    def add_turns(self, session_id: str, turns, keep: int) -> list[SessionTurn]:
        """Store ``turns`` (NewTurn, in order) in one transaction; the session keeps its newest
        ``keep`` turns (older ones are deleted in the same transaction)."""
        now = time.time()
        ids = []
        with self.db.transaction() as conn:
            for x in turns:
                ev = json.dumps([evidence_to_json(e) for e in x.evidence], allow_nan=False)
                cur = conn.execute(f"INSERT INTO session_turns ({_TURN_COLS}) VALUES (NULL,?,?,?,?,?,?,?,?,?)",
                                   (session_id, x.role, x.kind, str(x.text)[:MAX_TURN_CHARS], x.t, ev, x.monitor_id,
                                    x.alert_id, now))
                ids.append(int(cur.lastrowid))
            conn.execute("DELETE FROM session_turns WHERE session_id=? AND turn_id NOT IN (SELECT turn_id FROM "
                         "session_turns WHERE session_id=? ORDER BY turn_id DESC LIMIT ?)",
                         (session_id, session_id, int(keep)))
            rows = conn.execute(f"SELECT {_TURN_COLS} FROM session_turns WHERE turn_id IN ({placeholders(ids)})"
                                " ORDER BY turn_id", ids).fetchall()
        return [_turn(r) for r in rows]

    def turns(self, session_id: str, *, after: int | None = None, last: int | None = None) -> list[SessionTurn]:
        """Turns of a session with turn_id > ``after``, oldest first (``last``: only the newest
        that many)."""
        sql, args = f"SELECT {_TURN_COLS} FROM session_turns WHERE session_id=?", [session_id]
        if after is not None:
            sql += " AND turn_id>?"
            args.append(int(after))
        if last is not None:
            rows = self.db.conn().execute(sql + " ORDER BY turn_id DESC LIMIT ?", args + [int(last)]).fetchall()[::-1]
        else:
            rows = self.db.conn().execute(sql + " ORDER BY turn_id", args).fetchall()
        return [_turn(r) for r in rows]

    # -- standing requests -----------------------------------------------------------------------
    def bind(self, monitor_id: str, session_id: str, request: str) -> None:
        """Bind a monitor to the session whose watch turn started it (before it can fire)."""
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO session_monitors (monitor_id, session_id, request, created_at) VALUES (?,?,?,?)",
                         (monitor_id, session_id, str(request)[:MAX_TURN_CHARS], time.time()))

    def monitor_sessions(self, monitor_ids=None) -> dict[str, str]:
        """Monitor id -> the session whose standing request it serves, for every monitor a
        session started (``monitor_ids``: only those), active or ended."""
        sql, args = "SELECT monitor_id, session_id FROM session_monitors", []
        if monitor_ids is not None:
            ids = list(monitor_ids)
            if not ids:
                return {}
            sql += f" WHERE monitor_id IN ({placeholders(ids)})"
            args = ids
        return dict(self.db.conn().execute(sql, args).fetchall())

    def watch_of(self, monitor_id: str) -> SessionWatch | None:
        """The standing request a monitor serves (None: a monitor of no session)."""
        rows = self._watches("s.monitor_id=?", [monitor_id])
        return rows[0] if rows else None

    def watches(self, session_id: str, *, include_ended: bool = False) -> list[SessionWatch]:
        """The session's standing requests (active ones unless ``include_ended``), oldest first."""
        return self._watches("s.session_id=?" + ("" if include_ended else " AND m.active=1"), [session_id])

    def _watches(self, where: str, args) -> list[SessionWatch]:
        rows = self.db.conn().execute(
            "SELECT s.monitor_id, s.session_id, s.request, m.condition, m.active, s.created_at, m.cameras"
            " FROM session_monitors s JOIN monitors m ON m.monitor_id = s.monitor_id"
            f" WHERE {where} ORDER BY s.created_at, s.monitor_id", args).fetchall()
        return [SessionWatch(r[0], r[1], r[2], r[3], bool(r[4]), r[5], _cameras(r[6])) for r in rows]
