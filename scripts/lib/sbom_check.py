#!/usr/bin/env python3
"""Checks the release SBOM against Cargo.toml and Cargo.lock: CycloneDX 1.5 JSON describing
the sortie application at VERSION, listing every direct dependency at its locked version, and
only crates that Cargo.lock holds at those versions, each with a package URL.

Usage: sbom_check.py SBOM.json VERSION   (run from the repository root; Python 3.11+)
"""

import json
import sys
import tomllib


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    path, version = sys.argv[1], sys.argv[2]
    with open(path) as f:
        bom = json.load(f)
    with open("Cargo.lock", "rb") as f:
        locked = {(p["name"], p["version"]) for p in tomllib.load(f)["package"]}
    with open("Cargo.toml", "rb") as f:
        deps = tomllib.load(f)["dependencies"]
    direct = {spec.get("package", name) if isinstance(spec, dict) else name
              for name, spec in deps.items()}

    errors = []
    if (bom.get("bomFormat"), bom.get("specVersion")) != ("CycloneDX", "1.5"):
        errors.append(f"format {bom.get('bomFormat')} {bom.get('specVersion')}, expected CycloneDX 1.5")
    top = bom.get("metadata", {}).get("component", {})
    if (top.get("type"), top.get("name"), top.get("version")) != ("application", "sortie", version):
        errors.append(f"describes {top.get('type')} {top.get('name')} {top.get('version')}, "
                      f"expected application sortie {version}")
    comps = bom.get("components", [])
    listed = {(c.get("name"), c.get("version")) for c in comps}
    for c in comps:
        if (c.get("name"), c.get("version")) not in locked:
            errors.append(f"{c.get('name')} {c.get('version')} is not in Cargo.lock")
        if not str(c.get("purl", "")).startswith("pkg:cargo/"):
            errors.append(f"{c.get('name')} has no cargo package URL")
    for name in sorted(direct):
        if not any(n == name for n, _ in listed):
            errors.append(f"direct dependency {name} is missing")
    if errors:
        for e in errors:
            print(f"sbom check: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"sbom check: {path}: CycloneDX 1.5, sortie {version}, {len(comps)} crates, all "
          f"{len(direct)} direct dependencies, every entry in Cargo.lock")


if __name__ == "__main__":
    main()
