"""Camera URLs without their secrets: what the engine stores, logs, reports and serves of a URL
(foundation: ``SourceError`` names its source through it, so no error message carries one).

Cameras and streaming servers put credentials in many places, and every one of them is
replaced by ``***``:

- ``user:pass@`` before the host (the user name stays: it says which account a camera uses,
  unless it looks like a key itself);
- values of names that say a secret follows, in the query, the fragment or path parameters
  (``?password=``, ``?pw=``, ``?psw=``, Foscam's ``?loginpas=``, ``?p=``, ``?api_key=``,
  ``?access_token=``, ``?jwt=``, ``?hash=``, ``?md5=``, ``?sessionid=``, Akamai's ``?hdnts=``,
  Wowza's ``?wmsAuthSign=``, ``;password=``, ``/user=admin&password=x/``,
  ``/user=admin_password=x_channel=1``): ``SECRET_NAMES``;
- path segments after such a name (``/token/<t>/``, ``/key/<k>/``);
- anything that looks like a credential wherever it is (``looks_secret``): a JWT
  (``eyJ...``, three dot-separated base64url parts), a hex string of 16 characters or more
  (digests, keys), and a run of 16 or more letters and digits as random as a generated key
  (UniFi Protect's 16-character stream keys, ``/live/9f86d0.../``, base64 tokens).

Ordinary names stay: ``/stream1``, ``/Streaming/Channels/101``, ``/h264Preview_01_main``,
``?channel=1&subtype=0``, ``profile=Profile_1``, ``resolution=1920x1080``.
"""
from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"
# names whose value is a secret (case folded; each may carry a prefix such as ``x-amz-`` or
# ``login_``): pass, passwd, password, passphrase, psw, pw, pwd, loginpas, key, apikey,
# api_key, access_key, token, access_token, auth, authorization, authbasic, secret, signature,
# sig, sign, hmac, credential(s), jwt, hash, md5, session id, hdnts/hdnea, wmsAuthSign
SECRET_NAMES = (r"(?:pass(?:wd|word|phrase)?|psw|pwd?|loginpas(?:s|swd|sword)?|(?:api|access|private|secret)?[_-]?key|"
                r"apikey|(?:access[_-]?|auth[_-]?|id[_-]?)?token|auth(?:orization|basic)?|secret|signature|sig|sign|"
                r"hmac|credentials?|jwt|hash|md5|session[_-]?id|sid|hdnts|hdnea|wmsauthsign)")
_NAME_EQ = rf"(?:(?:[\w.-]*[_.-])?{SECRET_NAMES}_*|p)\s*[=:]"  # "p" alone: never as a suffix (ch_p=1 stays)
_PAIR_PATH = re.compile(rf"(?i)((?:^|[&;/,_])\s*{_NAME_EQ})((?:(?!_[a-z]\w*=)[^&;/,#])*)")  # to a separator or _name=
_PAIR_QUERY = re.compile(rf"(?i)((?:^|[&;])\s*{_NAME_EQ})([^&;#]*)")
_AFTER_NAME = re.compile(rf"(?i)(/{SECRET_NAMES}/)([^/?#;]+)")
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_~+%-]{16,}")  # a key's alphabet (base64, base64url, percent-encoded)
_QUERY_VALUE = re.compile(r"((?:^|[&;])[^&;=#]*=)([^&;#]*)")
_ALNUM = re.compile(r"[A-Za-z0-9]+")
_HEX = re.compile(r"[0-9a-fA-F]+")


def _class(c: str) -> int:
    return 0 if c.isdigit() else 1 if c.islower() else 2


def _random_part(part: str) -> bool:
    """Whether a run of letters and digits reads as generated: long and mixing its kinds of
    character far more often than words do (a CamelCase name changes kind about once a word)."""
    n = len(part)
    if n < 16:
        return False
    has_digit, has_alpha = any(c.isdigit() for c in part), any(c.isalpha() for c in part)
    if _HEX.fullmatch(part) and has_digit and has_alpha:
        return True  # a digest or a hex key
    if n >= 24 and has_digit and has_alpha:
        return True
    if len({_class(c) for c in part}) < 2:
        return False
    changes = sum(_class(a) != _class(b) for a, b in zip(part, part[1:]))
    return changes > n / 3


def looks_secret(text: str) -> bool:
    """Whether ``text`` (a value, a path segment, a user name) holds something shaped like a
    credential: a JWT, a long hex string, or a long random run of letters and digits."""
    text = unquote(text)
    return bool(_JWT.search(text)) or any(_random_part(p) for p in _ALNUM.findall(text))


def _mask_shaped(text: str) -> str:
    """``text`` with every JWT and every key-shaped run replaced by the mask."""
    text = _JWT.sub(MASK, text)
    return _TOKEN_RUN.sub(lambda m: MASK if looks_secret(m.group()) else m.group(), text)


def _mask_values(query: str) -> str:
    """A query (or fragment) with each value shaped like a credential masked, whatever its name."""
    query = _QUERY_VALUE.sub(lambda m: m.group(1) + (MASK if looks_secret(m.group(2)) else m.group(2)), query)
    return _mask_shaped(query)


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
        name = user.split(":", 1)[0]
        name = MASK if looks_secret(name) else name
        netloc = (name + f":{MASK}@" if ":" in user else name + "@") + host
    path = _AFTER_NAME.sub(rf"\1{MASK}", _PAIR_PATH.sub(rf"\1{MASK}", parts.path))
    query = _PAIR_QUERY.sub(rf"\1{MASK}", parts.query)
    fragment = _PAIR_QUERY.sub(rf"\1{MASK}", parts.fragment)
    return urlunsplit((parts.scheme, netloc, _mask_shaped(path), _mask_values(query), _mask_values(fragment)))
