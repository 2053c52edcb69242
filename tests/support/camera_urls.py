"""Camera URLs holding secrets in the forms cameras and streaming servers use (each secret
holds one of ``MARKS``), and ordinary camera URLs that hold none, for the redaction's tests
(tests/test_urls.py) and the service's (tests/server/test_server_camera_secrets.py)."""

JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjYW0xIiwiZXhwIjoxNzAwMDAwMDAwfQ."
       "Qm9ndXNTaWduYXR1cmVGb3JUZXN0aW5nT25seQ")

# (form, URL holding the secret S3CR3T..., what must remain)
SECRETS = [
    ("user:pass@", "rtsp://admin:S3CR3Tpass@10.0.0.5:554/stream1", "rtsp://admin:***@10.0.0.5:554/stream1"),
    ("password=", "rtsp://10.0.0.5/live?user=admin&password=S3CR3Tpw", "rtsp://10.0.0.5/live?user=admin&password=***"),
    ("psw=", "http://10.0.0.5/videostream.cgi?user=admin&psw=S3CR3Tpsw",
     "http://10.0.0.5/videostream.cgi?user=admin&psw=***"),
    ("loginpas= (Foscam)", "http://10.0.0.5:88/videostream.cgi?loginuse=admin&loginpas=S3CR3Tfoscam&resolution=32",
     "http://10.0.0.5:88/videostream.cgi?loginuse=admin&loginpas=***&resolution=32"),
    ("pwd= (Foscam HD)", "rtsp://10.0.0.5:88/cgi-bin/CGIStream.cgi?cmd=GetMJStream&usr=admin&pwd=S3CR3Tpwd",
     "rtsp://10.0.0.5:88/cgi-bin/CGIStream.cgi?cmd=GetMJStream&usr=admin&pwd=***"),
    ("p=", "http://10.0.0.5/mjpg/video.mjpg?u=admin&p=S3CR3Tp&channel=1",
     "http://10.0.0.5/mjpg/video.mjpg?u=admin&p=***&channel=1"),
    ("jwt=", f"wss://cams.example.org/stream?camera=7&jwt={JWT}", "wss://cams.example.org/stream?camera=7&jwt=***"),
    ("hash=", "http://10.0.0.5/live.flv?channel=2&hash=S3CR3Thash", "http://10.0.0.5/live.flv?channel=2&hash=***"),
    ("sessionid=", "http://10.0.0.5/cgi-bin/stream.cgi?sessionid=S3CR3Tsess&ch=1",
     "http://10.0.0.5/cgi-bin/stream.cgi?sessionid=***&ch=1"),
    ("hdnts= (Akamai)", "https://live.example-cdn.net/hls/live/2003680/cam/master.m3u8?"
     "hdnts=exp=1700000000~acl=/*~hmac=S3CR3Tf0e1d2c3b4a5", "https://live.example-cdn.net/hls/live/2003680/cam/"
     "master.m3u8?hdnts=***"),
    ("wmsAuthSign= (Wowza)", "https://wowza.example.org/live/cam1/playlist.m3u8?wmsAuthSign=c2VydmVyX3RpbWU9S3CR3T",
     "https://wowza.example.org/live/cam1/playlist.m3u8?wmsAuthSign=***"),
    ("md5= (nginx secure link)", "http://10.0.0.5/hls/cam.m3u8?md5=S3CR3TmD5v4lue&expires=1700000000",
     "http://10.0.0.5/hls/cam.m3u8?md5=***&expires=1700000000"),
    (";password=", "rtsp://10.0.0.5/Streaming/Channels/101;user=admin;password=S3CR3Tsemi",
     "rtsp://10.0.0.5/Streaming/Channels/101;user=admin;password=***"),
    ("/password=/ in the path", "http://10.0.0.5/user=admin&password=S3CR3Tpath/video.cgi",
     "http://10.0.0.5/user=admin&password=***/video.cgi"),
    ("_password=_ in the path", "rtsp://10.0.0.5:554/user=admin_password=S3CR3Tunder_channel=1_stream=0.sdp",
     "rtsp://10.0.0.5:554/user=admin_password=***_channel=1_stream=0.sdp"),
    ("/token/<t>/", "http://10.0.0.5/api/token/S3CR3Tseg/stream.m3u8", "http://10.0.0.5/api/token/***/stream.m3u8"),
    ("api_key=, x-access-token=", "https://10.0.0.5/v1/stream?api_key=S3CR3Tkey&x-access-token=S3CR3Ttok",
     "https://10.0.0.5/v1/stream?api_key=***&x-access-token=***"),
    ("__token__= (CDN)", "https://cdn.example.org/cam.m3u8?__token__=st=1700000000~exp=1700003600~hmac=S3CR3T",
     "https://cdn.example.org/cam.m3u8?__token__=***"),
    ("authbasic= (Dahua)", "rtsp://10.0.0.5/cam/realmonitor?channel=1&subtype=0&authbasic=YWRtaW46S3CR3T",
     "rtsp://10.0.0.5/cam/realmonitor?channel=1&subtype=0&authbasic=***"),
    ("X-Amz-Signature (presigned)", "https://bucket.s3.amazonaws.com/cam.mp4?X-Amz-Credential=AKIAS3CR3T%2F2024&"
     "X-Amz-Signature=S3CR3Tsig", "https://bucket.s3.amazonaws.com/cam.mp4?X-Amz-Credential=***&X-Amz-Signature=***"),
    ("a key-shaped path segment (UniFi Protect)", "rtsps://10.0.0.1:7441/S3CR3TuwKOymaXYC?enableSrtp",
     "rtsps://10.0.0.1:7441/***?enableSrtp"),
    ("a long key in the path", "https://10.0.0.5/live/9f86d081884c7d659a2feaa0c55ad015S3CR3T/index.m3u8",
     "https://10.0.0.5/live/***/index.m3u8"),
    ("a hex key in the path", "rtmp://live.example.org/app/S3C0a1b2c3d4e5f6a7b8", None),
    ("a JWT in the path", f"https://cams.example.org/v2/{JWT}/live.m3u8",
     "https://cams.example.org/v2/***/live.m3u8"),
    ("a key-shaped value under any name", "http://10.0.0.5/stream?camera=3&k9=S3CR3TqL7vXe2RmW9tZb",
     "http://10.0.0.5/stream?camera=3&k9=***"),
    ("a base64 token", "http://10.0.0.5/stream?auth_code=dXNlcjpTM0NSM1Q6c2VjcmV0cGFzcw%3D%3D",
     "http://10.0.0.5/stream?auth_code=***"),
    ("a key as the user name", "rtsp://S3CR3TuwKOymaXYC8p@10.0.0.5/stream1", "rtsp://***@10.0.0.5/stream1"),
    ("the fragment", "http://10.0.0.5/live#access_token=S3CR3Tfrag", "http://10.0.0.5/live#access_token=***"),
]

MARKS = (JWT, "S3CR3T", "9f86d081", "0a1b2c3d", "dXNlcjpTM0NSM1Q", "AKIA")  # a piece of every secret above


ORDINARY = [
    "rtsp://admin@10.0.0.5:554/stream1",
    "rtsp://10.0.0.5:554/Streaming/Channels/101?transportmode=unicast&profile=Profile_1",
    "rtsp://10.0.0.5:554/cam/realmonitor?channel=1&subtype=0",
    "rtsp://10.0.0.5:554/h264Preview_01_main",
    "rtsp://10.0.0.5/ISAPI/Streaming/channels/102/httpPreview",
    "rtsp://10.0.0.5/axis-media/media.amp?videocodec=h264&resolution=1920x1080&fps=15",
    "rtsp://10.0.0.5/MediaProfile00000/live.sdp",
    "http://10.0.0.5/videostream.cgi?loginuse=admin&resolution=32&keyframes=1",
    "https://live.example-cdn.net/hls/live/2003680/lobbycamera/master.m3u8",
    "rtsp://10.0.0.5/live/ch00_0",
    "rtsp://10.0.0.5/videoMain",
    "http://10.0.0.5/mjpg/video.mjpg?camera=1&ch_p=1",
    "rtsp://10.0.0.5/onvif-media/media.amp?profile=profile_1_h264&sessiontimeout=60&streamtype=unicast",
    "rtsp://10.0.0.5/H264StreamProfileMain",
]
