#!/usr/bin/env python3
"""Checks examples/k8s against the sortie image, beyond the schema check.

  k8s_check.py static DIR IMAGE
      the manifests fit together and fit the image: one replica, Recreate, the PVC mounted at
      /data, the ConfigMap's WORKFLOW.md passed as the argument, liveness on /livez and
      readiness on /readyz through the named port, the Secret the Deployment reads defined by
      secret.example.yaml, the pod's user the image's, the Service and the ServiceMonitor
      selecting the pod's port
  k8s_check.py run DIR ROOTFS PORT
      runs the pod as the kubelet would, from the image's unpacked root filesystem under
      bubblewrap (read-only root, the ConfigMap's files at their mount, a fresh /data and
      /tmp, the pod's user): the init container, then the container with its args (the port
      rewritten to PORT); passes when /livez and /readyz answer 200 to the probes' requests and
      the seeded issue is dispatched, and sortie exits 0 on SIGTERM
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import smoke_demo  # noqa: E402  (the sandbox's main process)

IMAGE_UID = 10001


def load(dir_):
    docs = []
    for name in ("sortie.yaml", "secret.example.yaml", "servicemonitor.yaml"):
        with open(os.path.join(dir_, name)) as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    return by_kind


def one(by_kind, kind):
    items = by_kind.get(kind, [])
    if len(items) != 1:
        sys.exit(f"k8s check: expected one {kind}, found {len(items)}")
    return items[0]


def pod_parts(by_kind):
    dep = one(by_kind, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return dep, pod, container


def check_probe(container, kind, path, port_names, errors):
    probe = container.get(kind, {}).get("httpGet", {})
    if probe.get("path") != path or probe.get("port") not in port_names:
        errors.append(f"{kind}: {probe}, expected GET {path} on the http port")
    headers = {h["name"].lower(): h["value"] for h in probe.get("httpHeaders", [])}
    if headers.get("host") != "localhost":
        errors.append(f"{kind}: no `Host: localhost` header (server.allowed_hosts would refuse it)")


def check_static(dir_, image):
    by_kind = load(dir_)
    dep, pod, c = pod_parts(by_kind)
    errors = []
    if dep["spec"].get("replicas") != 1:
        errors.append(f"replicas {dep['spec'].get('replicas')}, expected 1 (one SQLite writer)")
    if dep["spec"].get("strategy", {}).get("type") != "Recreate":
        errors.append("strategy is not Recreate")
    sc = pod.get("securityContext", {})
    if (sc.get("runAsUser"), sc.get("runAsGroup"), sc.get("runAsNonRoot")) != (IMAGE_UID, IMAGE_UID, True):
        errors.append(f"pod securityContext {sc}, expected the image's user {IMAGE_UID}")
    for ctr in pod.get("initContainers", []) + [c]:
        if ctr.get("image") != image:
            errors.append(f"container {ctr['name']}: image {ctr.get('image')}, expected {image}")
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    pvc = one(by_kind, "PersistentVolumeClaim")["metadata"]["name"]
    data_volume = volumes.get(mounts.get("/data"), {})
    if data_volume.get("persistentVolumeClaim", {}).get("claimName") != pvc:
        errors.append(f"/data is not the PersistentVolumeClaim {pvc}")
    cm = one(by_kind, "ConfigMap")
    workflow_mount = next((p for p, n in mounts.items()
                           if volumes[n].get("configMap", {}).get("name") == cm["metadata"]["name"]), None)
    if "WORKFLOW.md" not in cm.get("data", {}):
        errors.append("the ConfigMap holds no WORKFLOW.md")
    if workflow_mount is None or c.get("args", [])[-1:] != [f"{workflow_mount}/WORKFLOW.md"]:
        errors.append(f"args {c.get('args')} do not end with the ConfigMap's WORKFLOW.md")
    if c.get("args", [])[:2] != ["--host", "0.0.0.0"]:
        errors.append("args do not bind 0.0.0.0 (the Service could not reach sortie)")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    if ports.get("http") != 7678:
        errors.append(f"container ports {ports}, expected http: 7678")
    check_probe(c, "livenessProbe", "/livez", ("http", 7678), errors)
    check_probe(c, "readinessProbe", "/readyz", ("http", 7678), errors)
    check_probe(c, "startupProbe", "/livez", ("http", 7678), errors)
    secret = one(by_kind, "Secret")["metadata"]["name"]
    refs = [e["secretRef"]["name"] for e in c.get("envFrom", []) if "secretRef" in e]
    if refs != [secret]:
        errors.append(f"envFrom secrets {refs}, expected [{secret}] (secret.example.yaml)")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    svc = one(by_kind, "Service")
    if svc["spec"]["selector"] != labels or svc["spec"]["ports"][0].get("targetPort") != "http":
        errors.append("the Service does not select the pod's http port")
    sm = one(by_kind, "ServiceMonitor")
    if (sm["spec"]["selector"]["matchLabels"].items() > svc["metadata"]["labels"].items()
            or sm["spec"]["endpoints"][0]["port"] != svc["spec"]["ports"][0]["name"]):
        errors.append("the ServiceMonitor does not select the Service's port")
    if errors:
        for e in errors:
            print(f"k8s check: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"k8s check: manifests consistent with {image}: 1 replica, Recreate, PVC at /data, "
          f"WORKFLOW.md from the ConfigMap, probes /livez /readyz, Secret {secret}")
    return cm


def bwrap(rootfs, data, cm_dir, mounts, argv):
    """The pod's view: read-only image root, the volumes at their mount paths, its user."""
    cmd = ["setpriv", f"--reuid={IMAGE_UID}", f"--regid={IMAGE_UID}", "--clear-groups",
           "bwrap", "--unshare-all", "--share-net", "--as-pid-1", "--die-with-parent",
           "--new-session", "--ro-bind", rootfs, "/", "--proc", "/proc", "--dev", "/dev",
           "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
           "--setenv", "HOME", "/data", "--setenv", "SORTIE_PRICE_TABLE_FETCH", "off",
           "--chdir", "/data"]
    for path, kind in mounts.items():
        if kind == "data":
            cmd += ["--bind", data, path]
        elif kind == "configmap":
            cmd += ["--ro-bind", cm_dir, path]
        else:
            cmd += ["--tmpfs", path]
    return cmd + ["--"] + argv


def get(port, path):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": "localhost"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def run_pod(dir_, rootfs, port):
    by_kind = load(dir_)
    _, pod, c = pod_parts(by_kind)
    cm = one(by_kind, "ConfigMap")
    volumes = {v["name"]: v for v in pod["volumes"]}

    def mounts_of(ctr):
        out = {}
        for m in ctr["volumeMounts"]:
            v = volumes[m["name"]]
            out[m["mountPath"]] = ("data" if "persistentVolumeClaim" in v
                                   else "configmap" if "configMap" in v else "emptydir")
        return out

    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        data, cm_dir = os.path.join(tmp, "data"), os.path.join(tmp, "configmap")
        os.mkdir(data)
        os.chown(data, IMAGE_UID, IMAGE_UID)
        os.mkdir(cm_dir)
        # The runtime's part: mount points the image lacks.
        for ctr in pod.get("initContainers", []) + [c]:
            for path in ["/proc", "/dev"] + list(mounts_of(ctr)):
                os.makedirs(os.path.join(rootfs, path.lstrip("/")), exist_ok=True)
        for name, text in cm["data"].items():
            with open(os.path.join(cm_dir, name), "w") as f:
                f.write(text)
        for init in pod.get("initContainers", []):
            for attempt in (1, 2):  # a restarted pod runs its init containers again
                r = subprocess.run(bwrap(rootfs, data, cm_dir, mounts_of(init), init["command"]),
                                   capture_output=True, text=True, timeout=30)
                if r.returncode != 0:
                    sys.exit(f"k8s check: init container {init['name']} (run {attempt}) exited "
                             f"{r.returncode}: {r.stderr.strip()}")
        seeded = os.path.join(data, "issues.json")
        if "issues.json" in cm["data"]:
            try:
                with open(seeded) as f:
                    ok = json.load(f) == json.loads(cm["data"]["issues.json"])
            except (OSError, ValueError):
                ok = False
            if not ok:
                sys.exit("k8s check: the init container did not seed /data/issues.json")
        args = list(c["args"])
        args[args.index("--port") + 1] = str(port)
        log = open(os.path.join(tmp, "sortie.log"), "wb")
        proc = subprocess.Popen(bwrap(rootfs, data, cm_dir, mounts_of(c),
                                      ["/usr/local/bin/sortie"] + args),
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_ready(port, proc, os.path.join(tmp, "sortie.log"))
            os.kill(smoke_demo.main_pid(proc), signal.SIGTERM)
            rc = proc.wait(timeout=30)
            if rc != 0:
                fail(f"sortie exited {rc} after SIGTERM", os.path.join(tmp, "sortie.log"))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    print("k8s check: the pod ran from the image: init container seeded the volume, /livez and "
          "/readyz 200 with the probes' Host, the seeded issue dispatched, SIGTERM exit 0")


def wait_ready(port, proc, log_path):
    deadline = time.time() + 60
    seen = set()
    while time.time() < deadline and len(seen) < 3:
        if proc.poll() is not None:
            fail(f"sortie exited early with status {proc.returncode}", log_path)
        try:
            if get(port, "/livez")[0] == 200:
                seen.add("livez")
            if get(port, "/readyz")[0] == 200:
                seen.add("readyz")
            status, body = get(port, "/api/v1/runs")
            state = json.loads(get(port, "/api/v1/state")[1])
            if b"K8S-1" in body or any(r.get("issue_identifier") == "K8S-1" for r in state["running"]):
                seen.add("dispatch")
        except Exception:
            pass
        time.sleep(0.3)
    if len(seen) < 3:
        fail(f"not seen within 60 s: {sorted({'livez', 'readyz', 'dispatch'} - seen)}", log_path)


def fail(msg, log_path):
    with open(log_path, errors="replace") as f:
        sys.exit(f"k8s check: {msg}; log:\n{f.read()[-20000:]}")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "static":
        check_static(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "run":
        run_pod(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
