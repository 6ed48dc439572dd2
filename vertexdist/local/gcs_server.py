"""A local run's gs://, served: the Cloud Storage JSON API on loopback over the run's gs:// folder
(`gcs_objects`), so every client a script may use reaches the same objects `/gcs` shows.

On Vertex a script reaches Cloud Storage through `/gcs` or a client: google-cloud-storage, fsspec's gcsfs
(`pandas.read_csv("gs://...")`, `torch.distributed.checkpoint` with an fsspec path, Lightning and Hugging Face
checkpoints) or pyarrow's `GcsFileSystem` (Ray Tune and Train's `storage_path`, Ray Data's readers). A local
run has no Cloud Storage, and pyarrow's client, sent there offline, retries for many minutes in silence. So
the run starts this server and its replicas get (`storage_env`):

- `STORAGE_EMULATOR_HOST`: google-cloud-storage and gcsfs send every call here (gcsfs's experimental
  bucket-type lookup, a gRPC call to Cloud Storage's control API that no emulator serves, is turned off
  with `GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`);
- `CLOUD_STORAGE_EMULATOR_ENDPOINT`: google-cloud-cpp's, and so pyarrow's `GcsFileSystem`, the same;
- `GCE_METADATA_ROOT`: google-cloud-cpp still wants an access token and asks the metadata server for one; this
  server answers those paths too (`metadata_server.metadata_answer`, a dummy token), unless the job has a
  metadata server of its own. google-auth reads that variable only where `GCE_METADATA_HOST` is unset, and
  only for tokens: its check "am I on GCE" pings `GCE_METADATA_IP`, which this leaves alone.

Served: buckets get/list (every folder under the root is a bucket, and any bucket is made on first write),
a bucket's storage layout (flat) and managed folders (none), as the gcloud CLI asks them; objects get
(metadata or media, with `Range`), list (prefix, delimiter, startOffset, pages), insert (media, multipart and
resumable uploads, also at gcloud's `/resumable/upload/...`), delete, copyTo/rewriteTo, moveTo, patch (a
no-op: no metadata is kept). Request bodies are read by the emulator's Cloud Storage parser, shared in
`vertexdist.gcs_body` (streamed to disk; multipart framed as every client frames it, gcloud's quoted
boundary and LF-only lines too; resumable chunks placed by `Content-Range`), and resumable sessions are
the emulator's too (`vertexdist.gcs_uploads`, under the run folder's `.gcs-uploads/sessions/`). Anything
else is answered at once with a 4xx naming the method and path, never a 5xx that clients retry for minutes.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from vertexdist.gcs_body import (
    BodyEnded,
    RequestBody,
    StoreError,
    body_chunks,
    parse_content_range,
    read_all,
    split_multipart,
    write_stream,
)
from vertexdist.gcs_uploads import UploadSessions
from vertexdist.local.gcs_objects import DEFAULT_PAGE, Entry, ObjectError, ObjectFolder, check_bucket, gs_uri
from vertexdist.local.metadata_server import JobIdentity, metadata_answer
from vertexdist.loopback_server import GuardedHandler, LoopbackServer
from vertexdist.request_guard import WritePolicy

READ_BYTES = 1 << 20
MAX_JSON_BYTES = 10 << 20
METADATA_ROOT = "/computeMetadata/"
GCSFS_EXTENSIONS = "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"
_API = r"(?:/storage/v1)?"
_ROUTES: list[tuple[str, re.Pattern[str]]] = [
    (name, re.compile(pattern))
    for name, pattern in (
        ("buckets", rf"^{_API}/b$"),
        ("storage_layout", rf"^{_API}/b/(?P<bucket>[^/]+)/storageLayout$"),
        ("managed_folders", rf"^{_API}/b/(?P<bucket>[^/]+)/managedFolders(?:/(?P<folder>.+))?$"),
        ("bucket", rf"^{_API}/b/(?P<bucket>[^/]+)$"),
        ("objects", rf"^{_API}/b/(?P<bucket>[^/]+)/o$"),
        (
            "copy",
            rf"^{_API}/b/(?P<bucket>[^/]+)/o/(?P<object>.+?)/(?:copyTo|rewriteTo)"
            r"/b/(?P<dest_bucket>[^/]+)/o/(?P<dest_object>.+)$",
        ),
        ("move", rf"^{_API}/b/(?P<bucket>[^/]+)/o/(?P<object>.+?)/moveTo/o/(?P<dest_object>.+)$"),
        ("object", rf"^{_API}/b/(?P<bucket>[^/]+)/o/(?P<object>.+)$"),
        ("upload", r"^(?:/resumable)?/upload/storage/v1/b/(?P<bucket>[^/]+)/o$"),  # gcloud: /resumable
        ("download", r"^/download/storage/v1/b/(?P<bucket>[^/]+)/o/(?P<object>.+)$"),
        ("health", r"^/$"),
        ("public", r"^/(?P<bucket>[^/]+)/(?P<object>.+)$"),
    )
]


def storage_env(endpoint: str, metadata_root: str | None) -> dict[str, str]:
    """The variables that send a replica's gs:// clients to the Cloud Storage at `endpoint` (see the
    module's text); `metadata_root` (host:port) answers google-cloud-cpp's token requests. Pure."""
    env = {
        "STORAGE_EMULATOR_HOST": endpoint,
        "CLOUD_STORAGE_EMULATOR_ENDPOINT": endpoint,
        # gcsfs's "bucket type" lookup asks Cloud Storage's control API over gRPC, which no emulator serves
        GCSFS_EXTENSIONS: "false",
    }
    if metadata_root:
        env["GCE_METADATA_ROOT"] = metadata_root
    return env


def _page_token(last: str) -> str:
    return base64.urlsafe_b64encode(last.encode("utf-8", "surrogatepass")).decode("ascii")


def _after(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode("ascii")).decode("utf-8", "surrogatepass")
    except (ValueError, UnicodeError):
        raise ObjectError(400, "invalid", f"pageToken {token[:40]!r} is not one this server gave") from None


class _Handler(GuardedHandler):
    server: FolderStorageServer
    protocol_version = "HTTP/1.1"
    write_policy = WritePolicy.STORAGE

    def log_message(self, format: str, *args: Any) -> None:
        pass  # every call of a training script is not news

    # ----- answers -------------------------------------------------------------------------------
    @property
    def _base(self) -> str:
        return self.server.endpoint

    def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value: Any, status: int = 200) -> None:
        self._answer(status, json.dumps(value).encode(), {"Content-Type": "application/json; charset=UTF-8"})

    def _error(self, error: ObjectError) -> None:
        body = {
            "error": {
                "code": error.status,
                "message": error.message,
                "errors": [{"domain": "global", "reason": error.reason, "message": error.message}],
            }
        }
        self._json(body, error.status)

    def _refuse(self, what: str) -> ObjectError:
        return ObjectError(
            405, "methodNotAllowed", f"{self.command} {what}: a local run's Cloud Storage does not serve it"
        )

    # ----- bodies (read by the parser the emulator's Cloud Storage uses) ------------------------
    def _json_body(self) -> dict[str, Any]:
        body = self._chunks
        if body.length is not None and body.length > MAX_JSON_BYTES:
            body.refuse()  # not read: the connection is closed after the answer
            raise ObjectError(413, "uploadTooLarge", f"the request body is over {MAX_JSON_BYTES} bytes")
        try:
            raw = read_all(body, MAX_JSON_BYTES)
        except StoreError:
            body.refuse()
            raise
        if not raw.strip():
            return {}
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise ObjectError(400, "parseError", f"the request body is not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ObjectError(400, "invalid", "the request body is not a JSON object")
        return value

    # ----- dispatch ------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._dispatch()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        self._query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        self._chunks: RequestBody = body_chunks(self.headers, self.rfile)
        verb = self.headers.get("X-HTTP-Method-Override") or self.command
        try:
            if split.path.startswith(METADATA_ROOT):
                self._metadata(split.path)
                return
            for route, pattern in _ROUTES:
                match = pattern.match(split.path)
                if match:
                    params = {k: unquote(v) for k, v in match.groupdict().items() if v is not None}
                    getattr(self, f"_route_{route}")(verb, params)
                    break
            else:
                raise ObjectError(
                    404, "notFound", f"{verb} {split.path}: not a Cloud Storage method a local run serves"
                )
            self._drain()
        except ObjectError as error:
            self._drain()
            self._error(error)
        except StoreError as error:  # the body parser's: a 4xx (a bad Content-Length, multipart or range)
            self._drain()
            self._error(ObjectError(error.code, error.reason, f"{verb} {split.path}: {error.message}"))
        except (BodyEnded, ConnectionError):
            self.close_connection = True
        except Exception as exc:  # an answer at once, never a 5xx that clients retry for minutes
            self._drain()
            self._error(ObjectError(400, "invalid", f"{verb} {split.path}: {type(exc).__name__}: {exc}"))

    def _drain(self) -> None:
        """Read what is left of a small body, so the connection stays in step for the next request; a big
        one is left unread, and the connection closed after the answer."""
        if not self._chunks.drain():
            self.close_connection = True

    def _metadata(self, path: str) -> None:
        if self.headers.get("Metadata-Flavor") != "Google":
            self._answer(403, b"Missing required header: Metadata-Flavor: Google")
            return
        status, kind, body = metadata_answer(self.server.identity, path, self._query)
        data = (json.dumps(body) if kind == "application/json" else str(body)).encode()
        self._answer(status, data, {"Metadata-Flavor": "Google", "Content-Type": kind})

    # ----- routes --------------------------------------------------------------------------------
    def _bucket_resource(self, bucket: str) -> dict[str, Any]:
        return {
            "kind": "storage#bucket",
            "id": bucket,
            "name": bucket,
            "selfLink": f"{self._base}/storage/v1/b/{bucket}",
            "location": "US",
            "storageClass": "STANDARD",
            "metageneration": "1",
        }

    def _route_health(self, verb: str, params: dict[str, str]) -> None:
        self._answer(200, b"OK", {"Content-Type": "text/plain"})

    def _route_buckets(self, verb: str, params: dict[str, str]) -> None:
        if verb != "GET":
            raise self._refuse("buckets")
        root = self.server.folder.root
        names = (
            sorted(p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink())
            if root.is_dir()
            else []
        )
        self._json({"kind": "storage#buckets", "items": [self._bucket_resource(n) for n in names]})

    def _route_storage_layout(self, verb: str, params: dict[str, str]) -> None:
        """buckets.getStorageLayout, which gcloud's `mv` and `rm -r` ask first: a flat namespace
        (https://cloud.google.com/storage/docs/json_api/v1/buckets/getStorageLayout)."""
        bucket = params["bucket"]
        check_bucket(bucket)
        if verb != "GET":
            raise self._refuse(f"{gs_uri(bucket)} (storage layout)")
        self._json(
            {
                "kind": "storage#storageLayout",
                "bucket": bucket,
                "location": "US",
                "locationType": "multi-region",
                "hierarchicalNamespace": {"enabled": False},
            }
        )

    def _route_managed_folders(self, verb: str, params: dict[str, str]) -> None:
        """managedFolders, which gcloud's `rm -r` lists: a local run keeps no IAM, so a bucket has none
        (https://cloud.google.com/storage/docs/json_api/v1/managedFolders)."""
        bucket = params["bucket"]
        check_bucket(bucket)
        folder = params.get("folder", "")
        if verb == "GET" and not folder:
            self._json({"kind": "storage#managedFolders", "items": []})
        elif verb in ("GET", "DELETE"):
            raise ObjectError(404, "notFound", f"{gs_uri(bucket, folder)}: no such managed folder")
        else:
            raise self._refuse(f"{gs_uri(bucket)} (managed folders: a local run keeps no IAM)")

    def _route_bucket(self, verb: str, params: dict[str, str]) -> None:
        bucket = params["bucket"]
        check_bucket(bucket)
        if verb in ("GET", "PATCH", "PUT"):
            self._json(self._bucket_resource(bucket))
        else:
            raise self._refuse(gs_uri(bucket))

    def _route_objects(self, verb: str, params: dict[str, str]) -> None:
        bucket = params["bucket"]
        if verb != "GET":
            raise self._refuse(f"{gs_uri(bucket)} (objects)")
        q = self._query
        prefix = q.get("prefix", "")
        after = _after(q["pageToken"]) if q.get("pageToken") else ""
        limit = (
            int(q["maxResults"])
            if q.get("maxResults", "").isdigit() and int(q["maxResults"])
            else DEFAULT_PAGE
        )
        objects, prefixes, last = self.server.folder.list(
            bucket, prefix, q.get("delimiter", ""), after, limit, q.get("startOffset", "")
        )
        if q.get("includeTrailingDelimiter") == "true":
            for folder in prefixes:
                with contextlib.suppress(ObjectError):
                    objects.append(self.server.folder.get(bucket, folder))
        answer: dict[str, Any] = {
            "kind": "storage#objects",
            "items": [self.server.folder.resource(e, self._base, hashes=False) for e in objects],
        }
        if prefixes:
            answer["prefixes"] = prefixes
        if last:
            answer["nextPageToken"] = _page_token(last)
        self._json(answer)

    def _route_object(self, verb: str, params: dict[str, str]) -> None:
        bucket, name = params["bucket"], params["object"]
        folder = self.server.folder
        if verb in ("GET", "HEAD"):
            if self._query.get("alt") == "media":
                self._send_media(bucket, name)
            else:
                self._json(folder.resource(folder.get(bucket, name), self._base))
        elif verb == "DELETE":
            folder.delete(bucket, name)
            self._answer(204)
        elif verb in ("PATCH", "PUT"):
            self._json_body()
            self._json(folder.resource(folder.get(bucket, name), self._base))
        else:
            raise self._refuse(gs_uri(bucket, name))

    def _route_copy(self, verb: str, params: dict[str, str]) -> None:
        if verb != "POST":
            raise self._refuse(gs_uri(params["bucket"], params["object"]))
        self._json_body()
        entry = self.server.folder.copy(
            params["bucket"], params["object"], params["dest_bucket"], params["dest_object"]
        )
        resource = self.server.folder.resource(entry, self._base)
        if "/rewriteTo/" in self.path:
            size = str(entry.size)
            self._json(
                {
                    "kind": "storage#rewriteResponse",
                    "totalBytesRewritten": size,
                    "objectSize": size,
                    "done": True,
                    "resource": resource,
                }
            )
        else:
            self._json(resource)

    def _route_move(self, verb: str, params: dict[str, str]) -> None:
        if verb != "POST":
            raise self._refuse(gs_uri(params["bucket"], params["object"]))
        folder = self.server.folder
        entry = folder.move(params["bucket"], params["object"], params["dest_object"])
        self._json(folder.resource(entry, self._base))

    def _route_download(self, verb: str, params: dict[str, str]) -> None:
        if verb not in ("GET", "HEAD"):
            raise self._refuse(gs_uri(params["bucket"], params["object"]))
        self._send_media(params["bucket"], params["object"])

    _route_public = _route_download

    def _send_media(self, bucket: str, name: str) -> None:
        folder = self.server.folder
        entry = folder.get(bucket, name)
        path = folder.path(bucket, name)
        size = entry.size
        start, end, status = 0, size, 200
        headers = {
            "Content-Type": "application/octet-stream",
            "X-Goog-Generation": str(entry.mtime_ns),
            "X-Goog-Metageneration": "1",
            "X-Goog-Stored-Content-Length": str(size),
            "X-Goog-Stored-Content-Encoding": "identity",
            "ETag": f"{entry.mtime_ns:x}",
            "Accept-Ranges": "bytes",
        }
        wanted = (self.headers.get("Range") or "").strip()
        if wanted and size:
            match = re.fullmatch(r"bytes=([0-9]{0,20})-([0-9]{0,20})", wanted)
            if not match or match.groups() == ("", ""):
                raise ObjectError(
                    400, "invalid", f"{gs_uri(bucket, name)}: Range {wanted!r} is not bytes=START-END"
                )
            first, last = match.groups()
            if first == "":
                start = max(0, size - int(last))
            else:
                start, end = int(first), min(size, int(last) + 1) if last else size
            if start >= size or start >= end:
                raise ObjectError(
                    416, "requestedRangeNotSatisfiable", f"{gs_uri(bucket, name)}: range {wanted}"
                )
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        with open(path, "rb") as handle:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(end - start))
            self.end_headers()
            if self.command == "HEAD":
                return
            handle.seek(start)
            left = end - start
            while left > 0:
                block = handle.read(min(left, READ_BYTES))
                if not block:
                    break
                self.wfile.write(block)
                left -= len(block)

    # ----- uploads -------------------------------------------------------------------------------
    def _route_upload(self, verb: str, params: dict[str, str]) -> None:
        bucket = params["bucket"]
        check_bucket(bucket)
        upload_id = self._query.get("upload_id")
        if upload_id:
            self._resumable(verb, upload_id)
            return
        if verb != "POST":
            raise self._refuse(f"{gs_uri(bucket)} (upload)")
        kind = self._query.get("uploadType", "")
        folder = self.server.folder
        if kind == "media":
            name = self._query.get("name", "")
            temp = folder.temp_file()
            try:
                write_stream(self._chunks, temp)
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
            self._json(folder.resource(folder.commit(bucket, name, temp), self._base))
        elif kind == "multipart":
            temp = folder.temp_file()
            try:
                raw, _type, _hashes = split_multipart(
                    self.headers.get("Content-Type") or "", self._chunks, temp
                )
                fields = self._json_object(raw, "the upload's metadata")
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
            name = self._query.get("name") or str(fields.get("name") or "")
            self._json(folder.resource(folder.commit(bucket, name, temp), self._base))
        elif kind == "resumable":
            fields = self._json_body()
            name = self._query.get("name") or str(fields.get("name") or "")
            folder.path(bucket, name)  # a bad name is refused now, not after the bytes came
            upload_id = self.server.uploads.start({"bucket": bucket, "name": name})
            where = f"/upload/storage/v1/b/{quote(bucket, safe='')}/o"
            location = f"{self._base}{where}?uploadType=resumable&upload_id={upload_id}"
            self._answer(200, b"", {"Location": location, "X-GUploader-UploadID": upload_id})
        else:
            raise ObjectError(
                400, "invalid", f"uploadType={kind!r}: it must be media, multipart or resumable"
            )

    @staticmethod
    def _json_object(raw: bytes, what: str) -> dict[str, Any]:
        try:
            value = json.loads(raw or b"{}")
        except ValueError as exc:
            raise ObjectError(400, "parseError", f"{what} is not JSON: {exc}") from None
        return value if isinstance(value, dict) else {}

    def _resumable(self, verb: str, upload_id: str) -> None:
        """A chunk of a resumable upload (the sessions are the emulator's: `vertexdist.gcs_uploads`)."""
        uploads, folder = self.server.uploads, self.server.folder
        session, received = uploads.get(upload_id)
        where = gs_uri(session["bucket"], session["name"])
        if verb == "DELETE":
            uploads.cancel(upload_id)
            self._answer(499)
            return
        if verb not in ("PUT", "POST"):
            raise self._refuse(where)
        if session.get("done"):
            self._json(folder.resource(Entry(**session["done"]), self._base))
            return
        content_range = (self.headers.get("Content-Range") or "").strip()
        total: int | None
        if not content_range:
            received = uploads.append(upload_id, 0, self._chunks)
            total = received
        else:
            start, total = parse_content_range(content_range)
            if start is not None:
                received = uploads.append(upload_id, start, self._chunks)
        if total is not None and received > total:
            raise ObjectError(
                400, "invalid", f"{where}: the upload has {received} bytes, more than its total of {total}"
            )
        if total is not None and received == total:
            temp = folder.temp_file()
            uploads.take(upload_id, temp)
            try:
                entry = folder.commit(session["bucket"], session["name"], temp)
            except BaseException:
                uploads.cancel(upload_id)
                raise
            uploads.finish(upload_id, dataclasses.asdict(entry))
            self._json(folder.resource(entry, self._base))
            return
        headers = {"Range": f"bytes=0-{received - 1}"} if received else {}
        self._answer(308, b"", headers)


class FolderStorageServer(LoopbackServer):
    """The JSON API over `root` (gs://BUCKET/NAME is `root/BUCKET/NAME`) on 127.0.0.1, any free port;
    uploads in progress are kept in `scratch`. It answers google-cloud-cpp's token requests as `identity`."""

    thread_name = "local-storage"
    block_on_close = False

    def __init__(self, root: Path, scratch: Path, identity: JobIdentity) -> None:
        super().__init__(0, _Handler)
        self.folder = ObjectFolder(root, scratch)
        self.identity = identity
        self.uploads = UploadSessions(Path(scratch) / "sessions")

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (pyarrow's pool closes connections so) is not news."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)
