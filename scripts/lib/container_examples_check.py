#!/usr/bin/env python3
"""Checks examples/container against the rest of the repository (their base images come from
registries this CI cannot reach, so they are checked rather than built):
  - one agent image per CLI pinned in scripts/agent-clis-install.sh, at that pin;
  - each is built FROM the sortie image of this version and runs like it (sortie copied from
    it, user 10001, /data, port 7678, the same entrypoint and command as Containerfile);
  - its Node.js major satisfies the CLI's `engines.node` when the CLI is installed
    (target/agent-clis, from scripts/agent-clis-install.sh);
  - compose.yaml builds one of them, mounts /data and the workflow directory, publishes on
    loopback only and probes /livez.

Usage: container_examples_check.py IMAGE:VERSION   (python with PyYAML)
"""

import json
import os
import re
import sys

import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLES = os.path.join(ROOT, "examples", "container")


def read(*parts):
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def instructions(text):
    """(INSTRUCTION, rest) pairs of a Containerfile, continuation lines joined."""
    out, cur = [], ""
    for line in text.splitlines():
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        cur += line.rstrip("\\").strip() + " " if line.endswith("\\") else line.strip()
        if not line.endswith("\\"):
            word, _, rest = cur.partition(" ")
            out.append((word.upper(), rest.strip()))
            cur = ""
    return out


def first(instrs, word, prefix=""):
    return [r for w, r in instrs if w == word and r.startswith(prefix)]


def pinned_clis():
    block = re.search(r"pins=\((.*?)\)", read("scripts", "agent-clis-install.sh"), re.S)
    return set(re.findall(r'"([^"\s]+@[0-9][^"\s]*)"', block.group(1)))


def engines_ok(package, node_major, errors, name):
    pkg = package.rsplit("@", 1)[0]
    path = os.path.join(ROOT, "target", "agent-clis", "node_modules", pkg, "package.json")
    if not os.path.exists(path):
        return
    with open(path) as f:
        need = (json.load(f).get("engines") or {}).get("node", "")
    m = re.match(r"\s*>=\s*(\d+)", need)
    if m and node_major < int(m.group(1)):
        errors.append(f"{name}: Node.js {node_major} does not satisfy {pkg}'s engines.node {need!r}")


def check_images(base_image, errors):
    root = instructions(read("Containerfile"))
    seen = set()
    dirs = sorted(d for d in os.listdir(EXAMPLES) if os.path.isfile(os.path.join(EXAMPLES, d, "Containerfile")))
    for d in dirs:
        instrs = instructions(read("examples", "container", d, "Containerfile"))
        args = dict(r.split("=", 1) for r in first(instrs, "ARG") if "=" in r)
        pkg = args.get("AGENT_PACKAGE", "")
        seen.add(pkg)
        if args.get("SORTIE_IMAGE") != base_image:
            errors.append(f"{d}: SORTIE_IMAGE {args.get('SORTIE_IMAGE')}, expected {base_image}")
        node = re.match(r".*/node:(\d+)-", args.get("NODE_IMAGE", ""))
        if not node:
            errors.append(f"{d}: NODE_IMAGE {args.get('NODE_IMAGE')} names no node:MAJOR- tag")
        else:
            engines_ok(pkg, int(node.group(1)), errors, d)
        if first(instrs, "FROM") != ["${SORTIE_IMAGE} AS sortie", "${NODE_IMAGE}"]:
            errors.append(f"{d}: FROM lines {first(instrs, 'FROM')}")
        if "--from=sortie /usr/local/bin/sortie /usr/local/bin/sortie" not in first(instrs, "COPY"):
            errors.append(f"{d}: sortie is not copied from the sortie image")
        if '"${AGENT_PACKAGE}"' not in " ".join(first(instrs, "RUN")):
            errors.append(f"{d}: AGENT_PACKAGE is not what npm installs")
        for word in ("USER", "WORKDIR", "VOLUME", "EXPOSE", "ENTRYPOINT", "CMD"):
            if first(instrs, word) != first(root, word):
                errors.append(f"{d}: {word} {first(instrs, word)}, Containerfile has {first(root, word)}")
    pins = pinned_clis()
    if seen != pins:
        errors.append(f"agent images install {sorted(seen)}; scripts/agent-clis-install.sh pins {sorted(pins)}")
    return dirs


def check_compose(dirs, errors):
    with open(os.path.join(EXAMPLES, "compose.yaml")) as f:
        compose = yaml.safe_load(f)
    (svc,) = compose["services"].values()
    build = svc.get("build", {})
    if build.get("context") not in dirs or build.get("dockerfile") != "Containerfile":
        errors.append(f"compose: build {build} names no agent image directory's Containerfile")
    if build.get("args", {}).get("SORTIE_IMAGE") is None:
        errors.append("compose: no SORTIE_IMAGE build argument")
    vols = svc.get("volumes", [])
    if not any(v.split(":")[1] == "/data" for v in vols):
        errors.append("compose: nothing mounted at /data")
    workflow = next((v for v in vols if v.startswith("./")), "")
    src, dst = workflow.split(":")[:2] if workflow else ("", "")
    if not os.path.isfile(os.path.join(EXAMPLES, src, "WORKFLOW.md")) or \
            svc.get("command", [])[-1:] != [f"{dst}/WORKFLOW.md"]:
        errors.append(f"compose: the command does not run the mounted workflow ({workflow})")
    if any(not str(p).startswith("127.0.0.1:") for p in svc.get("ports", [])):
        errors.append(f"compose: ports {svc.get('ports')} are not on loopback only")
    if "/livez" not in " ".join(svc.get("healthcheck", {}).get("test", [])):
        errors.append("compose: the healthcheck does not probe /livez")
    return os.path.join(EXAMPLES, src, "WORKFLOW.md")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    errors = []
    dirs = check_images(sys.argv[1], errors)
    workflow = check_compose(dirs, errors)
    if errors:
        for e in errors:
            print(f"container examples: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"container examples: {len(dirs)} agent images ({', '.join(dirs)}) at the pinned CLI "
          f"versions, FROM {sys.argv[1]}; compose.yaml consistent")
    print(os.path.relpath(workflow))


if __name__ == "__main__":
    main()
