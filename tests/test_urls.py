"""Camera URLs without their secrets (vam_engine/urls.py): one case per form a camera or a
streaming server puts a credential in, each checked to hide the secret and keep the rest; the
ordinary names of camera paths and queries stay as they are."""
import pytest

from support.camera_urls import JWT, MARKS, ORDINARY, SECRETS
from vam_engine.urls import MASK, looks_secret, redact


@pytest.mark.parametrize("form, url, want", SECRETS, ids=[s[0] for s in SECRETS])
def test_each_form_of_secret_is_hidden(form, url, want):
    got = redact(url)
    assert not any(s in got for s in MARKS), got
    assert MASK in got
    if want is not None:
        assert got == want
    assert redact(got) == got  # redacting again changes nothing


@pytest.mark.parametrize("url", ORDINARY)
def test_ordinary_camera_paths_and_queries_stay(url):
    assert redact(url) == url


def test_what_looks_like_a_credential():
    assert looks_secret(JWT) and looks_secret("9f86d081884c7d65") and looks_secret("S3CR3TuwKOymaXYC")
    assert looks_secret("dXNlcjpTM0NSM1Q6c2VjcmV0cGFzcw%3D%3D")
    for word in ("StreamingChannels", "videostreamingchannel", "MediaProfile00000", "1700000000000000", "stream1"):
        assert not looks_secret(word), word
    assert redact("/data/videos/clip.mp4") == "/data/videos/clip.mp4"  # a file path is not a URL
