"""The full-text index with Chinese and Japanese text: what setting each CJK character apart as
a word (memory/words.py, schema 12) costs against the index of schema 11 (unicode61 over the
text as written, which finds no phrase inside a CJK line), on the same documents in one run.

Documents: OCR lines and transcript sentences, half Chinese or Japanese (built from 400 common
words of 1-4 characters, no spaces, as recognisers write them), half English (from 400 words);
``--sizes`` of them in one store each.

Rows per size and index ("schema 11" the baseline, "schema 12" the engine's):

- ``write``: documents indexed per second (``fulltext.put``'s statements, one transaction);
- ``size``: bytes of the SQLite file per document;
- ``reindex``: the 11 -> 12 migration's seconds for the whole store (schema 12 rows only);
- query p50 / p99 (ms, ``FullTextIndex.search``, limit 50) and hits, for an English phrase, an
  English any-word query, and CJK phrases of 1, 2 and 4 characters and an unquoted CJK sentence
  (pairs of characters); the schema 11 index's hits for CJK show what it cannot find (no
  latency ratio there: finding nothing is not a baseline).

Usage (from the repository root, with the package importable):

    python benchmarks/bench_fulltext.py                  # 1e4 and 1e5 documents, about a minute on 2 cores
    python benchmarks/bench_fulltext.py --sizes 1000     # a smoke run

Prints one table and writes benchmarks/results/bench_fulltext.json.
"""
from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import percentiles, print_table, write_json

from vam_engine.memory import fulltext
from vam_engine.memory.db import Database
from vam_engine.memory.fulltext import FullTextIndex

HAN = ("出口 左边 右边 禁止 吸烟 电梯 大厅 洗手间 请问 哪里 东京 车站 三号线 停车场 入口 安全 注意 小心 地滑 "
       "紧急 出口在 左转 右转 直走 楼梯 门口 前台 会议室 办公室 欢迎 光临 营业 时间 周一 至 周五 上午 下午 关门 开门 "
       "警告 高压 危险 请勿 靠近 监控 区域 摄像头 工作 人员 专用 通道 消防 栓 灭火器 急救 箱 医院 药店 超市 银行 "
       "駅 東京駅 新宿 渋谷 出口 改札 ホーム 番線 電車 切符 乗り場 案内 お手洗い どこ ですか ありがとう すみません "
       "危険 立入禁止 非常口 エレベーター 階段 受付 営業中 準備中 禁止吸烟").split()
EN = ("the a exit left right door loading dock truck parked car red blue person walked into warehouse please "
      "remember water plants kitchen tomorrow morning delivery arrived noon keys table window someone opened back "
      "lift stairs lobby meeting room office welcome open closed monday friday warning danger keep out camera "
      "staff only fire extinguisher first aid hospital pharmacy market bank station platform ticket gate").split()
QUERIES = (("english phrase", '"loading dock"'), ("english any", "red truck window"),
           ("cjk 1 char", '"梯"'), ("cjk 2 chars", '"吸烟"'), ("cjk 4 chars", '"禁止吸烟"'),
           ("cjk sentence", "请问电梯在哪里"))


def documents(n: int, seed: int = 5) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        if i % 2:
            out.append("".join(rng.choice(HAN, int(rng.integers(2, 9)))))
        else:
            out.append(" ".join(rng.choice(EN, int(rng.integers(4, 14)))))
    return out


def old_index(path: Path) -> sqlite3.Connection:
    """The schema 11 full-text tables (unicode61 over the text as written)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")  # as the store's connections (memory/db.py)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript("""
        CREATE TABLE fulltext_docs (doc_id INTEGER PRIMARY KEY, kind TEXT NOT NULL, ref_id INTEGER NOT NULL,
            camera_id TEXT NOT NULL, t_start REAL NOT NULL, t_end REAL NOT NULL, UNIQUE (kind, ref_id));
        CREATE INDEX fulltext_docs_filter ON fulltext_docs (kind, camera_id, t_end, t_start);
        CREATE VIRTUAL TABLE fulltext USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);""")
    return conn


def write_old(conn, docs) -> float:
    t0 = time.perf_counter()
    conn.execute("BEGIN")
    for i, text in enumerate(docs):
        doc = conn.execute("INSERT INTO fulltext_docs (kind, ref_id, camera_id, t_start, t_end) VALUES "
                           "('ocr', ?, 'cam', ?, ?)", (i, float(i), float(i))).lastrowid
        conn.execute("INSERT INTO fulltext (rowid, text) VALUES (?, ?)", (doc, text))
    conn.execute("COMMIT")
    return time.perf_counter() - t0


def write_new(db: Database, docs) -> float:
    t0 = time.perf_counter()
    with db.transaction() as conn:
        for i, text in enumerate(docs):
            fulltext.put(conn, "ocr", i, "cam", float(i), float(i), text)
    return time.perf_counter() - t0


def old_search(conn, query: str) -> list:
    """The schema 11 query: the same expression builder as then (words at non-letters)."""
    import re

    words = re.findall(r"[^\W_]+", query.lower())
    quoted = re.findall(r'"([^"]*)"', query)
    if quoted:
        expr = " AND ".join('"' + " ".join(re.findall(r"[^\W_]+", q.lower())) + '"' for q in quoted)
    else:
        expr = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
    return conn.execute("SELECT d.ref_id, bm25(fulltext) AS rank FROM fulltext JOIN fulltext_docs d ON "
                        "d.doc_id = fulltext.rowid WHERE fulltext MATCH ? ORDER BY rank, d.t_start LIMIT 50",
                        (expr,)).fetchall()


def file_bytes(path: Path) -> int:
    """The bytes of a closed database (its last connection folded the write-ahead log in)."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def latencies(fn, repeats: int) -> tuple[list[float], int]:
    hits = len(fn())
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out, hits


def one_size(n: int, repeats: int, tmp: Path) -> list[dict]:
    docs = documents(n)
    rows = []
    old_path = tmp / f"old_{n}.sqlite"
    conn = old_index(old_path)
    w_old = write_old(conn, docs)
    base = {"size": n, "index": "schema 11", "write_docs_s": n / w_old,
            "bytes_per_doc": old_path.stat().st_size / n}
    for name, q in QUERIES:
        lat, hits = latencies(lambda: old_search(conn, q), repeats)
        p50, p99 = percentiles(lat, 50, 99, scale=1e3)
        rows.append({**base, "query": name, "p50_ms": p50, "p99_ms": p99, "hits": hits})
    conn.execute("INSERT INTO meta VALUES ('schema_version', '11')")
    conn.close()
    for r in rows:
        r["bytes_per_doc"] = file_bytes(old_path) / n
    migrated = tmp / f"migrated_{n}.sqlite"
    migrated.write_bytes(old_path.read_bytes())
    t0 = time.perf_counter()
    with sqlite3.connect(migrated, isolation_level=None) as mconn:
        from vam_engine.memory import db as dbmod
        mconn.execute("BEGIN")
        dbmod.MIGRATIONS[11](mconn)
        mconn.execute("COMMIT")
    reindex_s = time.perf_counter() - t0
    new_db = Database(tmp / f"new_{n}.sqlite")
    w_new = write_new(new_db, docs)
    index = FullTextIndex(new_db)
    new = {"size": n, "index": "schema 12", "write_docs_s": n / w_new, "reindex_s": reindex_s}
    for name, q in QUERIES:
        lat, hits = latencies(lambda: index.search(q), repeats)
        p50, p99 = percentiles(lat, 50, 99, scale=1e3)
        rows.append({**new, "query": name, "p50_ms": p50, "p99_ms": p99, "hits": hits})
    new_db.close()
    for r in rows[len(QUERIES):]:
        r["bytes_per_doc"] = file_bytes(Path(new_db.path)) / n
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--json", default="bench_fulltext")
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for n in a.sizes:
            rows += one_size(n, a.repeats, Path(d))
    base = {(r["size"], r["query"]): r for r in rows if r["index"] == "schema 11"}
    table = []
    for r in rows:
        b = base[(r["size"], r["query"])]
        table.append([r["size"], r["index"], r["query"], r["hits"], r["p50_ms"], r["p99_ms"],
                      r["p50_ms"] / b["p50_ms"] if b["hits"] else None,  # none to an index that finds nothing
                      r["write_docs_s"],
                      r["write_docs_s"] / b["write_docs_s"], r["bytes_per_doc"], r.get("reindex_s", "")])
    print_table(["docs", "index", "query", "hits", "p50 ms", "p99 ms", "p50 x 11", "write docs/s", "write x 11",
                 "bytes/doc", "reindex s"], table)
    path = write_json(a.json, {"sizes": a.sizes, "repeats": a.repeats, "rows": rows})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
