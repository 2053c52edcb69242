"""Camera URLs without their secrets: what the engine stores, logs, reports and serves of a URL
(foundation: ``SourceError`` names its source through it, so no error message carries one).

Cameras put credentials in many places: ``user:pass@`` before the host, query values
(``?password=``, ``?pw=``, ``?api_key=``, ``?access_token=``...), path parameters
(``rtsp://host/stream;user=admin;password=x``, ``/user=admin&password=x/``), path segments
after a name that says what follows (``/token/<t>/``, ``/key/<k>/``), and bare keys in the path
(a long run of letters and digits: ``/live/9f86d081884c7d659a2feaa0c55ad015/``). Every one of
them is replaced by ``***``. The user name stays: it says which account a camera uses.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

# names whose value is a secret: pass, passwd, password, passphrase, pw, pwd, key, apikey, api_key,
# access_key, token, access_token, auth, authorization, secret, signature, sig, credential(s)
_SECRET_NAME = (r"(?:pass(?:wd|word|phrase)?|pwd?|(?:api|access|private|secret)?[_-]?key|apikey|"
                r"(?:access[_-]?|auth[_-]?|id[_-]?)?token|auth(?:orization)?|secret|signature|sig|credentials?)")
_NAME_EQ = rf"(?:[\w.-]*[_.-])?{_SECRET_NAME}\s*[=:]"
_PAIR_PATH = re.compile(rf"(?i)((?:^|[&;/,])\s*{_NAME_EQ})([^&;/,#]*)")  # a value ends at a path separator
_PAIR_QUERY = re.compile(rf"(?i)((?:^|[&;])\s*{_NAME_EQ})([^&;#]*)")
_AFTER_NAME = re.compile(rf"(?i)(/{_SECRET_NAME}/)([^/?#;]+)")
_BARE_KEY = re.compile(r"(?<=/)(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{24,}(?=/|$|\?|;|#)")
MASK = "***"


def redact(url: str) -> str:
    """``url`` with every secret it holds replaced by ``***`` (anything that is not a URL, such
    as a file path, is returned as it is)."""
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = (user.split(":", 1)[0] + f":{MASK}@" if ":" in user else user + "@") + host
    path = _BARE_KEY.sub(MASK, _AFTER_NAME.sub(rf"\1{MASK}", _PAIR_PATH.sub(rf"\1{MASK}", parts.path)))
    query = _PAIR_QUERY.sub(rf"\1{MASK}", parts.query)
    fragment = _PAIR_QUERY.sub(rf"\1{MASK}", parts.fragment)
    return urlunsplit((parts.scheme, netloc, path, query, fragment))
