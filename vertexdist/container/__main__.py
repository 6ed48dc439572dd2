"""`python -m vertexdist.container {tag,hash,files} [--dockerfile F] [--build-arg K=V ...] CONTEXT`.

Standard library only, so a bare `python` image in Cloud Build computes the same tag as `vertexdist build`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vertexdist.container.context import collect_context, content_hash, image_tag
from vertexdist.errors import VertexdistError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vertexdist.container", description=__doc__)
    parser.add_argument("what", choices=["tag", "hash", "files"])
    parser.add_argument("context", type=Path)
    parser.add_argument("--dockerfile", default="Dockerfile", help="relative to CONTEXT")
    parser.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE")
    ns = parser.parse_args(argv)
    build_args = dict(item.split("=", 1) for item in ns.build_arg if "=" in item)
    try:
        context = collect_context(ns.context, ns.context / ns.dockerfile)
        if ns.what == "files":
            print("\n".join(context.paths()))
            return 0
        digest = content_hash(context, build_args)
    except VertexdistError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    print(image_tag(digest) if ns.what == "tag" else digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
