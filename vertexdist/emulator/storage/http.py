"""The Cloud Storage JSON API over `store`, as google-cloud-storage (and the Node and Go clients, through
STORAGE_EMULATOR_HOST) speak it: https://cloud.google.com/storage/docs/json_api/v1.

Served: buckets insert/get/list/patch/delete (and an empty IAM policy, its storage layout, no managed
folders); objects insert (media, multipart and resumable uploads, also at gcloud's `/resumable/upload/...`:
https://cloud.google.com/storage/docs/performing-resumable-uploads), get (metadata or
`alt=media`, with `Range`), list (prefix, delimiter, offsets, matchGlob, pages), patch/update, delete,
copyTo, rewriteTo, moveTo (within a bucket: gcsfs's `mv`, so `torch.distributed.checkpoint`'s), compose;
downloads at `/download/storage/v1/...` and `/BUCKET/OBJECT`. Batch requests are
not. Links in answers (`mediaLink`, `selfLink`, a resumable session's `Location`) are made from the address
this server serves (127.0.0.1 and its own port), never from the request's Host header: objects stored by an
emulator on another port are served by this one, and a forged Host never sends a client elsewhere.

Hostile input gets Cloud Storage's error JSON, never a 500: numbers (generations, preconditions, ranges)
must be ASCII decimal int64s, JSON bodies at most 10 MiB (a larger declared length is refused before any
of it is read) and 100 levels deep, page tokens ones this server gave. Fields served back as headers are
checked when written and encoded when served (`fields`). Media is served with
`Content-Security-Policy: sandbox` and `X-Content-Type-Options: nosniff`: an HTML object opened in a
browser runs no script and has no origin, so it cannot drive this API (same origin) as a page would.
"""

from __future__ import annotations

import fnmatch
import json
import re
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from vertexdist.emulator.http_body import parse_json_object
from vertexdist.emulator.storage.fields import media_headers
from vertexdist.emulator.storage.store import (
    ObjectStore,
    Preconditions,
    Record,
    StoreError,
    checked_fields,
    parse_int64,
)
from vertexdist.gcs_body import (
    BodyEnded,
    RequestBody,
    body_chunks,
    parse_content_range,
    read_all,
    split_multipart,
    write_stream,
)
from vertexdist.loopback_server import GuardedHandler, LoopbackServer
from vertexdist.request_guard import WritePolicy

MAX_JSON_BYTES = 10 << 20
MAX_OBJECT_BYTES = 5 << 40  # https://cloud.google.com/storage/quotas: an object is at most 5 TiB
_DIGITS = re.compile(r"[0-9]{1,20}")  # ASCII: str.isdigit() and \d also take "²" and "١"
# Served with every object's bytes: no script runs and no origin is granted (a page stored as an object
# could otherwise call this API as same-origin), and no type is guessed from the bytes.
MEDIA_SAFETY = {"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"}
_API = r"(?:/storage/v1)?"  # Node's client leaves /storage/v1 out
_ROUTES: list[tuple[str, re.Pattern[str]]] = [
    (name, re.compile(pattern))
    for name, pattern in (
        ("buckets", rf"^{_API}/b$"),
        ("bucket_iam", rf"^{_API}/b/(?P<bucket>[^/]+)/iam(?P<test>/testPermissions)?$"),
        ("storage_layout", rf"^{_API}/b/(?P<bucket>[^/]+)/storageLayout$"),
        ("managed_folders", rf"^{_API}/b/(?P<bucket>[^/]+)/managedFolders(?:/(?P<folder>.+))?$"),
        ("bucket", rf"^{_API}/b/(?P<bucket>[^/]+)$"),
        ("objects", rf"^{_API}/b/(?P<bucket>[^/]+)/o$"),
        (
            "copy",
            rf"^{_API}/b/(?P<bucket>[^/]+)/o/(?P<object>.+?)/(?P<kind>copyTo|rewriteTo)"
            r"/b/(?P<dest_bucket>[^/]+)/o/(?P<dest_object>.+)$",
        ),
        ("move", rf"^{_API}/b/(?P<bucket>[^/]+)/o/(?P<object>.+?)/moveTo/o/(?P<dest_object>.+)$"),
        ("compose", rf"^{_API}/b/(?P<bucket>[^/]+)/o/(?P<object>.+)/compose$"),
        ("object", rf"^{_API}/b/(?P<bucket>[^/]+)/o/(?P<object>.+)$"),
        ("upload", r"^(?:/resumable)?/upload/storage/v1/b/(?P<bucket>[^/]+)/o$"),  # gcloud: /resumable
        ("download", r"^/download/storage/v1/b/(?P<bucket>[^/]+)/o/(?P<object>.+)$"),
        ("batch", r"^/batch/storage/v1$"),
        ("health", r"^/$"),
        ("public", r"^/(?P<bucket>[^/]+)/(?P<object>.+)$"),
    )
]


def _glob(pattern: str) -> Any:
    """matchGlob: `**` crosses folders, `*` and `?` do not (https://cloud.google.com/storage/docs/json_api/v1/objects/list#list-object-glob)."""
    regex = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            regex, i = regex + ".*", i + 2
        elif pattern[i] == "*":
            regex, i = regex + "[^/]*", i + 1
        elif pattern[i] == "?":
            regex, i = regex + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                regex, i = regex + re.escape("["), i + 1
            else:
                regex, i = regex + fnmatch.translate(pattern[i : end + 1])[4:-3], end + 1
        else:
            regex, i = regex + re.escape(pattern[i]), i + 1
    compiled = re.compile(regex + r"\Z", re.DOTALL)
    return lambda name: compiled.match(name) is not None


class _Handler(GuardedHandler):
    server: StorageHTTPServer
    write_policy = WritePolicy.STORAGE  # its upload types too (request_guard)
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # clients poll for objects that do not exist yet: those 404s are routine, not news

    # --- answers ----------------------------------------------------------------------------------
    @property
    def _base(self) -> str:
        return self.server.endpoint  # never the request's Host: a forged one must not steer a client

    def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value: Any, status: int = 200) -> None:
        self._answer(status, json.dumps(value).encode(), {"Content-Type": "application/json; charset=UTF-8"})

    def _error(self, error: StoreError) -> None:
        self._json(
            {
                "error": {
                    "code": error.code,
                    "message": error.message,
                    "errors": [{"message": error.message, "domain": "global", "reason": error.reason}],
                }
            },
            error.code,
        )

    def _object(self, record: Record) -> dict[str, Any]:
        bucket, name = quote(record["bucket"], safe=""), quote(record["name"], safe="")
        return {
            "kind": "storage#object",
            "id": f"{record['bucket']}/{record['name']}/{record['generation']}",
            "selfLink": f"{self._base}/storage/v1/b/{bucket}/o/{name}",
            "mediaLink": f"{self._base}/download/storage/v1/b/{bucket}/o/{name}"
            f"?generation={record['generation']}&alt=media",
            **record,
        }

    # --- dispatch ---------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        self._query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        self._chunks: Iterator[bytes] = body_chunks(self.headers, self.rfile)
        verb = self.headers.get("X-HTTP-Method-Override") or self.command
        try:
            for route, pattern in _ROUTES:
                match = pattern.match(split.path)
                if match:
                    params = {k: unquote(v) for k, v in match.groupdict().items() if v is not None}
                    getattr(self, f"_route_{route}")(verb, params)
                    break
            else:
                raise StoreError(404, "notFound", f"{verb} {split.path} is not a Cloud Storage method")
            self._drain()
        except StoreError as error:
            self._drain()
            self._error(error)
        except BodyEnded:
            self.close_connection = True
        except ConnectionError:
            self.close_connection = True
        except Exception as exc:  # an answer, never a dropped connection that clients retry for minutes
            self._drain()
            BaseHTTPRequestHandler.log_message(self, "internal error on %s %s: %r", verb, self.path, exc)
            self._error(
                StoreError(500, "backendError", f"the storage emulator failed: {type(exc).__name__}: {exc}")
            )

    def _drain(self) -> None:
        """Read what is left of a small body, so the connection stays in step for the next request; a big
        or refused one is left unread, and the connection closed after the answer."""
        body = self._chunks
        if not isinstance(body, RequestBody) or not body.drain():
            self.close_connection = True

    def _refuse_body(self, error: StoreError) -> StoreError:
        if isinstance(self._chunks, RequestBody):
            self._chunks.refuse()
        return error

    def _body(self) -> dict[str, Any]:
        body = self._chunks
        if isinstance(body, RequestBody) and body.length is not None and body.length > MAX_JSON_BYTES:
            raise self._refuse_body(
                StoreError(
                    413,
                    "uploadTooLarge",
                    f"Request payload size {body.length} exceeds the limit: {MAX_JSON_BYTES} bytes.",
                )
            )
        try:
            raw = read_all(self._chunks, MAX_JSON_BYTES)
        except StoreError as error:
            raise self._refuse_body(error) from None
        return self._json_object(raw, "The request body")

    @staticmethod
    def _json_object(raw: bytes, what: str) -> dict[str, Any]:
        """`raw` as one JSON object (bounded depth, `http_body`), else 400 in Cloud Storage's terms."""
        try:
            return parse_json_object(raw)
        except ValueError as exc:
            reason = "invalid" if "JSON object" in str(exc) else "parseError"
            raise StoreError(400, reason, f"{what}: {exc}") from None

    def _name(self, fields: dict[str, Any]) -> str:
        """The object's name: `name=` in the query, else the metadata's (which must be a string)."""
        name = self._query.get("name") or fields.get("name") or ""
        if not isinstance(name, str):
            raise StoreError(400, "invalid", f"An object's name must be a string, not {name!r:.60}")
        return name

    def _declared_size(self, value: str | None, what: str) -> int | None:
        """An upload's declared size (Content-Length, X-Upload-Content-Length): refused over 5 TiB."""
        if value is None or not value.strip():
            return None
        if not _DIGITS.fullmatch(value.strip()):
            raise StoreError(400, "invalid", f"{what} {value[:40]!r} is not a number of bytes.")
        size = int(value)
        if size > MAX_OBJECT_BYTES:
            raise self._refuse_body(
                StoreError(
                    400, "invalid", f"{what} {size} is over the largest object Cloud Storage takes (5 TiB)."
                )
            )
        return size

    @staticmethod
    def _refuse(verb: str) -> StoreError:
        return StoreError(405, "methodNotAllowed", f"{verb} is not allowed here.")

    def _generation(self) -> int | None:
        value = self._query.get("generation")
        if not value:
            return None
        return parse_int64(value, "generation")

    # --- buckets ----------------------------------------------------------------------------------
    def _route_buckets(self, verb: str, params: dict[str, str]) -> None:
        store = self.server.store
        if verb == "POST":
            project = self._query.get("project", "")
            self._json(self._bucket_resource(store.create_bucket(self._body(), project)))
        elif verb == "GET":
            prefix = self._query.get("prefix", "")
            items = [self._bucket_resource(b) for b in store.buckets() if b["name"].startswith(prefix)]
            self._json({"kind": "storage#buckets", "items": items})
        else:
            raise self._refuse(verb)

    def _route_bucket(self, verb: str, params: dict[str, str]) -> None:
        store, name = self.server.store, params["bucket"]
        if verb == "GET":
            self._json(self._bucket_resource(store.bucket(name)))
        elif verb in ("PATCH", "PUT"):
            self._json(self._bucket_resource(store.patch_bucket(name, self._body())))
        elif verb == "DELETE":
            store.delete_bucket(name)
            self._answer(204)
        else:
            raise self._refuse(verb)

    def _route_storage_layout(self, verb: str, params: dict[str, str]) -> None:
        """buckets.getStorageLayout (gcloud's `mv` and `rm -r` ask it first): a flat namespace, where the
        bucket is (https://cloud.google.com/storage/docs/json_api/v1/buckets/getStorageLayout)."""
        if verb != "GET":
            raise self._refuse(verb)
        record = self.server.store.bucket(params["bucket"])
        self._json(
            {
                "kind": "storage#storageLayout",
                "bucket": record["name"],
                "location": record.get("location", "US"),
                "locationType": record.get("locationType", "multi-region"),
                "hierarchicalNamespace": {"enabled": False},
            }
        )

    def _route_managed_folders(self, verb: str, params: dict[str, str]) -> None:
        """managedFolders (gcloud's `rm -r` lists them): the emulator keeps no IAM, so a bucket has none;
        a named one is not found (https://cloud.google.com/storage/docs/json_api/v1/managedFolders)."""
        self.server.store.bucket(params["bucket"])
        if verb == "GET" and not params.get("folder"):
            self._json({"kind": "storage#managedFolders", "items": []})
        elif verb in ("GET", "DELETE"):
            raise StoreError(404, "notFound", f"No such managed folder: {params.get('folder', '')!r}")
        else:
            raise StoreError(
                501,
                "notImplemented",
                "The emulator keeps no managed folders (they carry IAM, which it lacks).",
            )

    def _bucket_resource(self, record: Record) -> dict[str, Any]:
        return {**record, "selfLink": f"{self._base}/storage/v1/b/{quote(record['name'], safe='')}"}

    def _route_bucket_iam(self, verb: str, params: dict[str, str]) -> None:
        self.server.store.bucket(params["bucket"])
        if params.get("test"):
            permissions = parse_qs(urlsplit(self.path).query).get("permissions", [])
            self._json({"kind": "storage#testIamPermissionsResponse", "permissions": permissions})
        elif verb == "GET":
            self._json(
                {
                    "kind": "storage#policy",
                    "resourceId": f"projects/_/buckets/{params['bucket']}",
                    "version": 1,
                    "etag": "CAE=",
                    "bindings": [],
                }
            )
        elif verb == "PUT":
            self._json({"kind": "storage#policy", "etag": "CAE=", **self._body()})
        else:
            raise self._refuse(verb)

    # --- objects ----------------------------------------------------------------------------------
    def _route_objects(self, verb: str, params: dict[str, str]) -> None:
        if verb == "POST" and self._query.get("uploadType"):
            self._route_upload("POST", params)  # some clients upload without the /upload prefix
            return
        if verb != "GET":
            raise self._refuse(verb)
        query = self._query
        glob = query.get("matchGlob")
        max_results = max(1, min(1000, parse_int64(query.get("maxResults") or "1000", "maxResults")))
        items, prefixes, token = self.server.store.list(
            params["bucket"],
            prefix=query.get("prefix", ""),
            delimiter=query.get("delimiter", ""),
            start_offset=query.get("startOffset", ""),
            end_offset=query.get("endOffset", ""),
            match=_glob(glob) if glob else None,
            include_trailing_delimiter=query.get("includeTrailingDelimiter", "").lower() == "true",
            page_token=query.get("pageToken", ""),
            max_results=max_results,
        )
        answer: dict[str, Any] = {"kind": "storage#objects", "items": [self._object(r) for r in items]}
        if prefixes:
            answer["prefixes"] = prefixes
        if token:
            answer["nextPageToken"] = token
        self._json(answer)

    def _route_object(self, verb: str, params: dict[str, str]) -> None:
        store, bucket, name = self.server.store, params["bucket"], params["object"]
        when = Preconditions.from_query(self._query)
        if verb in ("GET", "HEAD"):
            if self._query.get("alt") == "media":
                self._route_download(verb, params)
                return
            self._json(self._object(store.get(bucket, name, self._generation(), when)))
        elif verb in ("PATCH", "PUT"):
            self._json(self._object(store.patch(bucket, name, self._body(), when, replace=verb == "PUT")))
        elif verb == "DELETE":
            store.delete(bucket, name, when)
            self._answer(204)
        else:
            raise self._refuse(verb)

    def _route_copy(self, verb: str, params: dict[str, str]) -> None:
        if verb != "POST":
            raise self._refuse(verb)
        store = self.server.store
        source_generation = self._query.get("sourceGeneration")
        source = store.get(
            params["bucket"],
            params["object"],
            parse_int64(source_generation, "sourceGeneration") if source_generation else None,
            Preconditions.from_query(self._query, prefix="ifSource"),
        )
        fields = self._body()
        if "contentType" not in fields and self._query.get("destinationContentType"):
            fields["contentType"] = self._query["destinationContentType"]
        record = self._object(
            store.copy(
                source,
                params["dest_bucket"],
                params["dest_object"],
                fields,
                Preconditions.from_query(self._query),
            )
        )
        if params["kind"] == "copyTo":
            self._json(record)
            return
        size = str(record["size"])
        self._json(
            {
                "kind": "storage#rewriteResponse",
                "totalBytesRewritten": size,
                "objectSize": size,
                "done": True,
                "resource": record,
            }
        )

    def _route_move(self, verb: str, params: dict[str, str]) -> None:
        """objects.move: the object under its new name, the old one gone (a copy, then a delete of the
        generation copied, so a writer in between keeps its own)."""
        if verb != "POST":
            raise self._refuse(verb)
        store = self.server.store
        source = store.get(
            params["bucket"], params["object"], None, Preconditions.from_query(self._query, prefix="ifSource")
        )
        record = store.copy(
            source, params["bucket"], params["dest_object"], {}, Preconditions.from_query(self._query)
        )
        store.delete(
            params["bucket"], params["object"], Preconditions(generation_match=int(source["generation"]))
        )
        self._json(self._object(record))

    def _route_compose(self, verb: str, params: dict[str, str]) -> None:
        if verb != "POST":
            raise self._refuse(verb)
        store, bucket = self.server.store, params["bucket"]
        body = self._body()
        sources = []
        items = body.get("sourceObjects") or []
        if not isinstance(items, list):
            raise StoreError(400, "invalid", "sourceObjects must be a list of objects.")
        for item in items:
            if not isinstance(item, dict) or not item.get("name") or not isinstance(item["name"], str):
                raise StoreError(400, "invalid", "Each of sourceObjects needs a name (a string).")
            generation = item.get("generation")
            preconditions = item.get("objectPreconditions")
            when = (
                Preconditions(
                    generation_match=parse_int64(
                        preconditions["ifGenerationMatch"], "objectPreconditions.ifGenerationMatch"
                    )
                )
                if isinstance(preconditions, dict) and "ifGenerationMatch" in preconditions
                else None
            )
            number = parse_int64(generation, "sourceObjects.generation") if generation else None
            sources.append(store.get(bucket, item["name"], number, when))
        destination = body.get("destination") if isinstance(body.get("destination"), dict) else {}
        record = store.compose(
            bucket, params["object"], sources, destination or {}, Preconditions.from_query(self._query)
        )
        self._json(self._object(record))

    # --- uploads ----------------------------------------------------------------------------------
    def _route_upload(self, verb: str, params: dict[str, str]) -> None:
        store, bucket = self.server.store, params["bucket"]
        upload_id = self._query.get("upload_id")
        if upload_id:
            if verb == "DELETE":
                store.cancel_upload(upload_id)
                self._answer(499)
            elif verb in ("PUT", "POST"):
                self._resumable_chunk(upload_id)
            else:
                raise self._refuse(verb)
            return
        if verb != "POST":
            raise self._refuse(verb)
        kind = self._query.get("uploadType", "")
        store.bucket(bucket)
        when = Preconditions.from_query(self._query)
        if kind == "media":
            self._declared_size(self.headers.get("Content-Length"), "Content-Length")
            name = self._query.get("name", "")
            fields = {"contentType": self.headers.get("Content-Type") or "application/octet-stream"}
            if self._query.get("contentEncoding"):
                fields["contentEncoding"] = self._query["contentEncoding"]
            checked_fields(fields)  # before any byte is stored
            with store.temporary() as temp:
                hashes = write_stream(self._chunks, temp)
                record = store.commit(bucket, name, temp, fields, when=when, hashes=hashes)
            self._json(self._object(record))
        elif kind == "multipart":
            self._declared_size(self.headers.get("Content-Length"), "Content-Length")
            with store.temporary() as temp:
                raw, content_type, hashes = split_multipart(
                    self.headers.get("Content-Type") or "", self._chunks, temp
                )
                fields = self._json_object(raw, "The multipart upload's metadata")
                fields.setdefault("contentType", content_type)
                name = self._name(fields)
                record = store.commit(bucket, name, temp, fields, when=when, hashes=hashes)
            self._json(self._object(record))
        elif kind == "resumable":
            fields = self._body()
            name = self._name(fields)
            if "contentType" not in fields and self.headers.get("X-Upload-Content-Type"):
                fields["contentType"] = self.headers["X-Upload-Content-Type"]
            size = self._declared_size(self.headers.get("X-Upload-Content-Length"), "X-Upload-Content-Length")
            upload_id = store.start_upload(bucket, name, fields, when, size)
            where = f"/upload/storage/v1/b/{quote(bucket, safe='')}/o"
            location = f"{self._base}{where}?uploadType=resumable&upload_id={upload_id}"
            self._answer(200, b"", {"Location": location, "X-GUploader-UploadID": upload_id})
        else:
            raise StoreError(400, "invalid", f"uploadType={kind!r}: it must be media, multipart or resumable")

    def _resumable_chunk(self, upload_id: str) -> None:
        store = self.server.store
        session, received = store.session(upload_id)
        if session.get("done"):
            self._json(self._object(session["done"]))
            return
        content_range = (self.headers.get("Content-Range") or "").strip()
        total: int | None
        if not content_range:
            received = store.append(upload_id, 0, self._chunks)
            total = received
        else:
            start, total = parse_content_range(content_range)
            if start is not None:
                received = store.append(upload_id, start, self._chunks)
        if total is not None and received > total:
            raise StoreError(
                400, "invalid", f"The upload has {received} bytes, more than its total of {total}."
            )
        if total is not None and received == total:
            self._json(self._object(store.finish_upload(upload_id)))
            return
        headers = {"Range": f"bytes=0-{received - 1}"} if received else {}
        self._answer(308, b"", headers)

    # --- downloads --------------------------------------------------------------------------------
    def _route_download(self, verb: str, params: dict[str, str]) -> None:
        if verb not in ("GET", "HEAD"):
            raise self._refuse(verb)
        store = self.server.store
        when = Preconditions.from_query(self._query)
        record = store.get(params["bucket"], params["object"], self._generation(), when)
        size = int(record["size"])
        headers = {
            **media_headers(record),
            **MEDIA_SAFETY,
            "X-Goog-Generation": record["generation"],
            "X-Goog-Metageneration": record["metageneration"],
            "X-Goog-Stored-Content-Length": record["size"],
            "X-Goog-Stored-Content-Encoding": media_headers(record).get("Content-Encoding", "identity"),
            "X-Goog-Hash": ",".join(
                f"{k}={record[f]}" for k, f in (("crc32c", "crc32c"), ("md5", "md5Hash")) if record.get(f)
            ),
            "ETag": record["etag"],
            "Accept-Ranges": "bytes",
        }
        start, end, status = 0, size, 200
        wanted = (self.headers.get("Range") or "").strip()
        if wanted and size:
            start, end = self._range(wanted, size)
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        with store.open(record) as handle:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(end - start))
            self.end_headers()
            if verb == "HEAD":
                return
            handle.seek(start)
            left = end - start
            while left > 0:
                block = handle.read(min(left, 1 << 20))
                if not block:
                    break
                self.wfile.write(block)
                left -= len(block)

    @staticmethod
    def _range(wanted: str, size: int) -> tuple[int, int]:
        match = re.fullmatch(r"bytes=([0-9]{0,20})-([0-9]{0,20})", wanted)
        if not match or match.groups() == ("", ""):
            raise StoreError(400, "invalid", f"Range {wanted!r} is not bytes=START-END")
        first, last = match.groups()
        if first == "":
            start, end = max(0, size - int(last)), size
        else:
            start, end = int(first), min(size, int(last) + 1) if last else size
        if start >= size or start >= end:
            raise StoreError(416, "requestedRangeNotSatisfiable", "The requested range cannot be satisfied.")
        return start, end

    def _route_public(self, verb: str, params: dict[str, str]) -> None:
        self._route_download(verb, params)

    def _route_batch(self, verb: str, params: dict[str, str]) -> None:
        raise StoreError(501, "notImplemented", "The storage emulator does not take batch requests.")

    def _route_health(self, verb: str, params: dict[str, str]) -> None:
        self._answer(200, b"OK", {"Content-Type": "text/plain"})


class StorageHTTPServer(LoopbackServer):
    """The storage API on 127.0.0.1:`port` (0: any free port), over `store`; `start()`/`stop()` are the
    loopback server's."""

    thread_name = "storage-emulator-http"
    block_on_close = False

    def __init__(self, store: ObjectStore, port: int = 0) -> None:
        super().__init__(port, _Handler)
        self.store = store
