"""Application default credentials, and a quick answer when there are none.

google.auth.default() looks in GOOGLE_APPLICATION_CREDENTIALS, then gcloud's ADC file, then asks the Compute
Engine metadata server (169.254.169.254): off Google Cloud that last step waits for its timeouts (7 s here,
more on a busy machine, once per client made) and then logs "Authentication failed using Compute Engine
authentication due to unavailable metadata server" before it fails. So before asking it, `findable` checks
the first two (files), and whether this is a Compute Engine machine or a metadata server answers google-auth's
ping within a second; when nothing can give credentials, the error comes at once, saying how to get them.
"""

from __future__ import annotations

import functools
import http.client
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vertexdist.backends.errors import ApiCallError

METADATA_PROBE_S = 1.0
_METADATA_IP = "169.254.169.254"  # google.auth.compute_engine._metadata's default


def no_credentials() -> ApiCallError:
    return ApiCallError(
        "no Google Cloud credentials found (no GOOGLE_APPLICATION_CREDENTIALS, no gcloud application default"
        " credentials, no metadata server)",
        "sign in with `gcloud auth application-default login`, or try it offline with --emulator",
        401,
    )


def adc_file(env: Mapping[str, str]) -> Path:
    """Where `gcloud auth application-default login` writes the credentials."""
    if env.get("CLOUDSDK_CONFIG"):
        return Path(env["CLOUDSDK_CONFIG"]) / "application_default_credentials.json"
    if os.name == "nt" and env.get("APPDATA"):
        return Path(env["APPDATA"]) / "gcloud" / "application_default_credentials.json"
    return (
        Path(env.get("HOME") or Path.home()) / ".config" / "gcloud" / "application_default_credentials.json"
    )


def _metadata_answers(env: Mapping[str, str]) -> bool:
    """Whether a Compute Engine metadata server answers as google-auth's own ping expects (the
    `Metadata-Flavor: Google` header), within METADATA_PROBE_S (it answers in milliseconds)."""
    if (env.get("NO_GCE_CHECK") or "").lower() == "true":
        return False  # google.auth will not ask it either
    if _on_compute_engine():
        return True  # the machine says so (DMI): let google.auth take its time
    host = env.get("GCE_METADATA_HOST") or env.get("GCE_METADATA_IP") or _METADATA_IP
    connection = http.client.HTTPConnection(host, timeout=METADATA_PROBE_S)
    try:
        connection.request("GET", "/", headers={"Metadata-Flavor": "Google"})
        return connection.getresponse().getheader("Metadata-Flavor") == "Google"
    except (OSError, ValueError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def _on_compute_engine() -> bool:
    try:
        return Path("/sys/class/dmi/id/product_name").read_text().strip().startswith("Google")
    except OSError:
        return False


def findable(env: Mapping[str, str]) -> bool:
    """Whether google.auth.default() has anywhere to find credentials."""
    return (
        bool(env.get("GOOGLE_APPLICATION_CREDENTIALS")) or adc_file(env).is_file() or _metadata_answers(env)
    )


@functools.lru_cache(maxsize=1)
def default_credentials() -> Any:
    """google.auth.default()'s credentials (looked for once per process), or ApiCallError at once."""
    if not findable(os.environ):
        raise no_credentials()
    import google.auth
    import google.auth.exceptions

    quiet = logging.getLogger("google.auth._default")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its warning repeats, less clearly, what the error below says
    try:
        credentials, _ = google.auth.default()
    except google.auth.exceptions.DefaultCredentialsError:
        raise no_credentials() from None
    finally:
        quiet.setLevel(level)
    return credentials
