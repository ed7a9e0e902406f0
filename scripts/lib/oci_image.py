#!/usr/bin/env python3
"""Reads an OCI image layout (index.json -> manifest -> config and layers) without any
container tool, for the image scripts.

  oci_image.py size  LAYOUT TAG BINARY
      prints the image's size (uncompressed layers, and compressed) against the binary's;
      exits 1 when the image is more than 1 MiB larger than the binary
  oci_image.py tag   LAYOUT
      prints the layout's one tag (its one manifest's ref name)
  oci_image.py check LAYOUT TAG --version V --source URL --revision R
      checks the config (user, entrypoint, command, port, working directory, volume,
      environment, labels) and the files of the layers (owners, modes, nothing setuid, no
      file beyond the expected ones); exits 1 naming every difference
"""

import argparse
import gzip
import io
import json
import os
import sys
import tarfile

MIB = 1024 * 1024
SIZE_MARGIN = MIB
EXPECTED_FILES = {
    # path: (type, mode, uid, gid)
    "bin": ("dir", 0o755, 0, 0),
    "bin/sh": ("file", 0o755, 0, 0),
    "data": ("dir", 0o755, 10001, 10001),
    "etc": ("dir", 0o755, 0, 0),
    "etc/group": ("file", 0o644, 0, 0),
    "etc/passwd": ("file", 0o644, 0, 0),
    "etc/ssl": ("dir", 0o755, 0, 0),
    "etc/ssl/certs": ("dir", 0o755, 0, 0),
    "etc/ssl/certs/ca-certificates.crt": ("file", 0o644, 0, 0),
    "tmp": ("dir", 0o1777, 0, 0),
    "usr": ("dir", 0o755, 0, 0),
    "usr/local": ("dir", 0o755, 0, 0),
    "usr/local/bin": ("dir", 0o755, 0, 0),
    "usr/local/bin/sortie": ("file", 0o755, 0, 0),
    "usr/share": ("dir", 0o755, 0, 0),
    "usr/share/doc": ("dir", 0o755, 0, 0),
    "usr/share/doc/ca-certificates": ("dir", 0o755, 0, 0),
    "usr/share/doc/ca-certificates/copyright": ("file", 0o644, 0, 0),
    "usr/share/doc/mksh": ("dir", 0o755, 0, 0),
    "usr/share/doc/mksh/copyright": ("file", 0o644, 0, 0),
}


def blob(layout, digest):
    algo, hexd = digest.split(":", 1)
    with open(os.path.join(layout, "blobs", algo, hexd), "rb") as f:
        return f.read()


def manifest(layout, tag):
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    for m in index.get("manifests", []):
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
            return json.loads(blob(layout, m["digest"]))
    sys.exit(f"error: no manifest tagged {tag} in {layout}/index.json")


def layer_tar(layout, layer):
    data = blob(layout, layer["digest"])
    if layer["mediaType"].endswith("+gzip"):
        data = gzip.decompress(data)
    elif not layer["mediaType"].endswith(".tar"):
        sys.exit(f"error: unsupported layer media type {layer['mediaType']}")
    return data


def cmd_size(args):
    m = manifest(args.layout, args.tag)
    raw = sum(len(layer_tar(args.layout, l)) for l in m["layers"])
    packed = sum(l["size"] for l in m["layers"])
    binary = os.path.getsize(args.binary)
    delta = raw - binary
    print(f"binary: {binary} bytes ({binary / MIB:.2f} MiB)")
    print(f"image: {raw} bytes uncompressed ({raw / MIB:.2f} MiB, {len(m['layers'])} layer(s)), "
          f"{packed} bytes compressed ({packed / MIB:.2f} MiB)")
    print(f"image - binary: {delta} bytes ({delta / MIB:.2f} MiB; target <= 1 MiB)")
    if delta > SIZE_MARGIN:
        sys.exit("error: the image is more than 1 MiB larger than the binary")


def check_config(cfg, args, errors):
    c = cfg.get("config", {})
    want = {
        "User": "10001:10001",
        "Entrypoint": ["/usr/local/bin/sortie"],
        "Cmd": ["--host", "0.0.0.0"],
        "WorkingDir": "/data",
        "ExposedPorts": {"7678/tcp": {}},
        "Volumes": {"/data": {}},
    }
    for key, value in want.items():
        if c.get(key) != value:
            errors.append(f"config {key}: {c.get(key)!r}, expected {value!r}")
    env = dict(e.split("=", 1) for e in c.get("Env", []))
    for key, value in {"HOME": "/data", "PATH": "/usr/local/bin:/usr/bin:/bin"}.items():
        if env.get(key) != value:
            errors.append(f"config Env {key}: {env.get(key)!r}, expected {value!r}")
    labels = c.get("Labels") or {}
    for key, value in {
        "org.opencontainers.image.version": args.version,
        "org.opencontainers.image.source": args.source,
        "org.opencontainers.image.revision": args.revision,
        "org.opencontainers.image.licenses": "Apache-2.0",
    }.items():
        if labels.get(key) != value:
            errors.append(f"label {key}: {labels.get(key)!r}, expected {value!r}")
    if cfg.get("architecture") != "amd64" or cfg.get("os") != "linux":
        errors.append(f"platform {cfg.get('os')}/{cfg.get('architecture')}, expected linux/amd64")


def check_files(layout, m, errors):
    seen = {}
    for layer in m["layers"]:
        with tarfile.open(fileobj=io.BytesIO(layer_tar(layout, layer))) as t:
            for member in t.getmembers():
                seen[member.name.lstrip("./").rstrip("/")] = member
    seen.pop("", None)
    for path, member in sorted(seen.items()):
        kind = "dir" if member.isdir() else "file" if member.isfile() else "other"
        got = (kind, member.mode & 0o7777, member.uid, member.gid)
        want = EXPECTED_FILES.get(path)
        if want is None:
            errors.append(f"unexpected file /{path}")
        elif got != want:
            errors.append(f"/{path}: (type, mode, uid, gid) {got[0]}, {oct(got[1])}, {got[2]}, "
                          f"{got[3]}; expected {want[0]}, {oct(want[1])}, {want[2]}, {want[3]}")
        if member.mode & 0o6000:
            errors.append(f"/{path} is setuid or setgid")
    for path in sorted(set(EXPECTED_FILES) - set(seen)):
        errors.append(f"missing /{path}")


def cmd_tag(args):
    with open(os.path.join(args.layout, "index.json")) as f:
        manifests = json.load(f).get("manifests", [])
    if len(manifests) != 1:
        sys.exit(f"error: {args.layout} holds {len(manifests)} images, expected 1")
    print(manifests[0].get("annotations", {}).get("org.opencontainers.image.ref.name", ""))


def cmd_check(args):
    m = manifest(args.layout, args.tag)
    cfg = json.loads(blob(args.layout, m["config"]["digest"]))
    errors = []
    check_config(cfg, args, errors)
    check_files(args.layout, m, errors)
    if errors:
        for e in errors:
            print(f"image check: {e}", file=sys.stderr)
        sys.exit(1)
    c = cfg["config"]
    print(f"image check: user {c['User']}, entrypoint {c['Entrypoint']} {c['Cmd']}, "
          f"port {list(c['ExposedPorts'])}, workdir {c['WorkingDir']}, volume {list(c['Volumes'])}, "
          f"version {args.version}, source {args.source}; {len(EXPECTED_FILES)} files as expected")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("size")
    s.add_argument("layout")
    s.add_argument("tag")
    s.add_argument("binary")
    t = sub.add_parser("tag")
    t.add_argument("layout")
    c = sub.add_parser("check")
    c.add_argument("layout")
    c.add_argument("tag")
    c.add_argument("--version", required=True)
    c.add_argument("--source", required=True)
    c.add_argument("--revision", required=True)
    args = ap.parse_args()
    {"size": cmd_size, "tag": cmd_tag, "check": cmd_check}[args.cmd](args)


if __name__ == "__main__":
    main()
