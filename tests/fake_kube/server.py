"""A fake Kubernetes API server for sortie's tests (worker.kubernetes).

Serves the batch/v1 Jobs and core/v1 Pods, pod logs (follow, timestamps, sinceTime), Secrets and
PersistentVolumeClaims of the upstream OpenAPI descriptions, list by label selector, and delete with a propagation
policy. Every object a client creates is validated with kubernetes-validate (strict, the pinned
schema version) plus the name, label and key rules the real API server enforces; an object the
real API would refuse is answered 422 and recorded under /_fake/state "invalid", which the tests
assert empty.

The pod lifecycle is simulated by running the Job's container here: its command and args run as
a local process with the environment its secretKeyRef entries name, its Secret volume written
to a directory and its mount paths replaced by local directories; its stdout and stderr become
the pod log. An image whose name contains "pull-fails" never pulls (ErrImagePull, then
ImagePullBackOff); one containing "unschedulable" is never scheduled. Once the container has
written two lines, an image containing "oom-killed" has it killed for memory (OOMKilled, exit
137), one containing "evicted" has its pod evicted by the kubelet (phase Failed, reason Evicted),
and one containing "past-deadline" has its Job stopped by the Job controller as past its
activeDeadlineSeconds (conditions FailureTarget then Failed with reason DeadlineExceeded, the pod
deleted), each reported the way the API server reports it.

A claim's volume is the directory WORKDIR/claims/<name> (a mount's subPath below it), kept while
the claim exists; a pod whose claim does not exist is not scheduled. Deleting a claim a running
pod still mounts marks it (deletionTimestamp, the kubernetes.io/pvc-protection finalizer) and
removes it once no such pod is left, as the API server does, and records its name under
"claims_deleted_in_use", which the tests assert empty.

Usage: server.py TOKEN WORKDIR [CERT KEY CLIENT_CA]
(prints the API's port and the test hooks' port on its first line)
With CERT, KEY and CLIENT_CA it serves HTTPS and requires a client certificate CLIENT_CA signed,
which then authenticates a request as a bearer token does.
Test hooks: GET /_fake/state, POST /_fake/config {"drop_log_after": N} (the next log stream
closes after N lines, once), {"deletion_grace_ms": N} (a deleted Job stays, marked, with its
pod running, for N ms).
"""

import datetime
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import kubernetes_validate

VERSION = "1.37.0"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")

LOCK = threading.Condition()
STATE = {
    "jobs": {},
    "pods": {},
    "secrets": {},
    "pvcs": {},
    "claims_deleted_in_use": [],
    "log": {},  # pod name -> [(timestamp text, line)]
    "procs": {},  # job name -> Popen
    "requests": [],
    "invalid": [],
    "drop_log_after": None,
    "deletion_grace_ms": 0,
}


def now_text(t=None):
    t = time.time() if t is None else t
    dt = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    nanos = int((t % 1) * 1e9)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + ".%09dZ" % nanos


def parse_time(s):
    s = s.rstrip("Z")
    base, _, frac = s.partition(".")
    dt = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp() + (float("0." + frac) if frac else 0.0)


def semantic_problems(obj):
    """What the API server's own validation would refuse beyond the schema."""
    out = []
    meta = obj.get("metadata", {})
    name = meta.get("name", "")
    if obj.get("kind") == "Job":
        if not DNS_LABEL.match(name) or len(name) > 63:
            out.append("metadata.name %r: a Job name must be a DNS label (its pods' job-name label)" % name)
    elif not DNS_SUBDOMAIN.match(name) or len(name) > 253:
        out.append("metadata.name %r is not a DNS subdomain" % name)
    for where, labels in (("metadata.labels", meta.get("labels") or {}),
                          ("spec.template.metadata.labels",
                           (((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {})):
        for k, v in labels.items():
            if len(v) > 63 or not LABEL_VALUE.match(v):
                out.append("%s[%s]: invalid label value %r" % (where, k, v))
    if obj.get("kind") == "Secret":
        size = 0
        for k, v in (obj.get("stringData") or {}).items():
            if not SECRET_KEY.match(k):
                out.append("stringData key %r is invalid" % k)
            size += len(v.encode())
        if size > 1 << 20:
            out.append("Secret larger than 1 MiB")
        for ref in meta.get("ownerReferences") or []:
            if not ref.get("uid"):
                out.append("ownerReferences entry without uid")
    if obj.get("kind") == "Job":
        pod = obj["spec"]["template"]["spec"]
        if pod.get("restartPolicy") not in ("Never", "OnFailure"):
            out.append("a Job's pod restartPolicy must be Never or OnFailure")
        for c in pod.get("containers", []):
            for e in c.get("env", []):
                if not ENV_NAME.match(e["name"]):
                    out.append("env name %r is invalid" % e["name"])
    return out


def validate(obj):
    problems = semantic_problems(obj)
    try:
        kubernetes_validate.validate(obj, VERSION, strict=True)
    except Exception as e:  # noqa: BLE001 - any refusal is the finding
        problems.insert(0, str(e).split("\n")[0])
    return problems


def matches(labels, selector):
    for part in filter(None, (selector or "").split(",")):
        k, _, v = part.partition("=")
        if labels.get(k) != v:
            return False
    return True


def meta_new(obj, ns):
    meta = obj.setdefault("metadata", {})
    meta["namespace"] = ns
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_text()[:19] + "Z"
    meta["resourceVersion"] = str(int(time.time() * 1000))
    return obj


def set_job_condition(job, ctype, reason="", message=""):
    st = job.setdefault("status", {})
    st.setdefault("conditions", []).append(
        {"type": ctype, "status": "True", "reason": reason, "message": message,
         "lastTransitionTime": now_text()[:19] + "Z"})


def append_log(pod, line):
    with LOCK:
        STATE["log"].setdefault(pod, []).append((now_text(), line))
        LOCK.notify_all()


def run_pod(job_name, pod_name, workdir):
    """The kubelet: pull, wait for the Secret, run the container, record how it ended."""
    with LOCK:
        job = STATE["jobs"].get(job_name)
        pod = STATE["pods"].get(pod_name)
    if job is None or pod is None:
        return
    spec = pod["spec"]

    def claim_dir(name):
        return os.path.join(workdir, "claims", name)

    c = spec["containers"][0]
    status = pod["status"]
    if "unschedulable" in c["image"]:
        with LOCK:
            status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": "0/3 nodes are available: 3 Insufficient cpu."}]
        return
    if "pull-fails" in c["image"]:
        for reason in ("ErrImagePull", "ImagePullBackOff"):
            with LOCK:
                status["containerStatuses"] = [{
                    "name": c["name"], "image": c["image"], "imageID": "", "ready": False, "restartCount": 0,
                    "state": {"waiting": {"reason": reason,
                                          "message": 'failed to pull image "%s": not found' % c["image"]}}}]
            time.sleep(0.2)
        return
    missing = [v["persistentVolumeClaim"]["claimName"] for v in spec.get("volumes", [])
               if "persistentVolumeClaim" in v]
    with LOCK:
        missing = [c for c in missing if c not in STATE["pvcs"]]
        if missing:
            status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": 'persistentvolumeclaim "%s" not found' % missing[0]}]
            return
    secret_name = None
    for v in spec.get("volumes", []):
        if "secret" in v:
            secret_name = v["secret"]["secretName"]
    deadline = time.time() + 20
    secret = None
    while time.time() < deadline:
        with LOCK:
            secret = STATE["secrets"].get(secret_name)
            gone = job_name not in STATE["jobs"]
        if secret is not None or gone:
            break
        time.sleep(0.05)
    if secret is None:
        return
    data = secret.get("stringData") or {}
    base = os.path.join(workdir, pod_name)

    def prepared(ctr):
        """The container's argv, cwd and env with its mounts made local directories."""
        mounts = {}
        for m in ctr.get("volumeMounts", []):
            vol = next(v for v in spec["volumes"] if v["name"] == m["name"])
            if "persistentVolumeClaim" in vol:
                local_dir = os.path.join(claim_dir(vol["persistentVolumeClaim"]["claimName"]), m.get("subPath", ""))
            else:
                local_dir = os.path.join(base, m["name"])
            os.makedirs(local_dir, exist_ok=True)
            if "secret" in vol:
                for item in vol["secret"].get("items", []):
                    with open(os.path.join(local_dir, item["path"]), "w") as f:
                        f.write(data.get(item["key"], ""))
            mounts[m["mountPath"]] = local_dir

        def local(s):
            for mp in sorted(mounts, key=len, reverse=True):
                s = s.replace(mp, mounts[mp])
            return s

        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": base}
        for e in ctr.get("env", []):
            ref = e["valueFrom"]["secretKeyRef"]
            env[e["name"]] = local(data.get(ref["key"], ""))
        argv = [local(a) for a in ctr["command"] + ctr.get("args", [])]
        return argv, local(ctr.get("workingDir", "/")), env

    for init in spec.get("initContainers", []):
        argv, cwd, env = prepared(init)
        code = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=60).returncode
        if code != 0:
            with LOCK:
                status["phase"] = "Failed"
                status["initContainerStatuses"] = [{"name": init["name"], "image": init["image"], "imageID": "x",
                                                    "ready": False, "restartCount": 0,
                                                    "state": {"terminated": {"exitCode": code, "reason": "Error"}}}]
                if job_name in STATE["jobs"]:
                    set_job_condition(job, "Failed", "BackoffLimitExceeded")
                LOCK.notify_all()
            return
    argv, cwd, env = prepared(c)
    with LOCK:
        if job_name not in STATE["jobs"]:
            return
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        STATE["procs"][job_name] = proc
        status["phase"] = "Running"
        status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        status["containerStatuses"] = [{"name": c["name"], "image": c["image"], "imageID": "x", "ready": True,
                                        "restartCount": 0, "state": {"running": {"startedAt": now_text()[:19] + "Z"}}}]
    fault = next((f for f in FAULTS if f in c["image"]), None)
    seen = 0
    for raw in proc.stdout:
        append_log(pod_name, raw.decode("utf-8", "replace").rstrip("\n"))
        seen += 1
        if fault is not None and seen == 2:
            return inject_fault(fault, job_name, pod_name, proc)
    code = proc.wait()
    with LOCK:
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        status["containerStatuses"][0]["state"] = {"terminated": {"exitCode": code if code >= 0 else 128 - code,
                                                                  "reason": "Completed" if code == 0 else "Error"}}
        status["containerStatuses"][0]["ready"] = False
        if job_name in STATE["jobs"]:
            set_job_condition(job, "Complete" if code == 0 else "Failed",
                              "" if code == 0 else "BackoffLimitExceeded")
        finalize_claims()
        LOCK.notify_all()


FAULTS = ("oom-killed", "evicted", "past-deadline")
BACKOFF_LIMIT = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")


def inject_fault(fault, job_name, pod_name, proc):
    """Ends a running pod the way the kubelet or the Job controller would for `fault`."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    stamp = now_text()[:19] + "Z"
    with LOCK:
        job = STATE["jobs"].get(job_name)
        pod = STATE["pods"].get(pod_name)
        if job is None or pod is None:
            return
        status = pod["status"]
        cstatus = status["containerStatuses"][0]
        cstatus["ready"] = False
        job["status"].update({"active": 0, "failed": 1})
        if fault == "oom-killed":
            status["phase"] = "Failed"
            cstatus["state"] = {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                               "startedAt": stamp, "finishedAt": stamp}}
            set_job_condition(job, "FailureTarget", *BACKOFF_LIMIT)
            set_job_condition(job, "Failed", *BACKOFF_LIMIT)
        elif fault == "evicted":
            status["phase"] = "Failed"
            status["reason"] = "Evicted"
            status["message"] = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 61Mi. "
                                 "Container agent was using 1853Mi, request is 1Gi, has larger consumption of memory. ")
            status.setdefault("conditions", []).append(
                {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                 "message": "The node was low on resource: memory.", "lastTransitionTime": stamp})
            cstatus["state"] = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                                               "message": "The container could not be located when the pod was terminated",
                                               "startedAt": stamp, "finishedAt": stamp}}
            set_job_condition(job, "FailureTarget", *BACKOFF_LIMIT)
            set_job_condition(job, "Failed", *BACKOFF_LIMIT)
        else:
            deadline = ("DeadlineExceeded", "Job was active longer than specified deadline")
            set_job_condition(job, "FailureTarget", *deadline)
            set_job_condition(job, "Failed", *deadline)
            STATE["pods"].pop(pod_name, None)
        STATE["procs"].pop(job_name, None)
        LOCK.notify_all()


def claim_in_use(name):
    """Whether a pod that has not ended mounts the claim `name` (LOCK held)."""
    for pod in STATE["pods"].values():
        if pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        for v in pod["spec"].get("volumes", []):
            if (v.get("persistentVolumeClaim") or {}).get("claimName") == name:
                return True
    return False


def finalize_claims():
    """Removes the claims marked for deletion that no pod uses any more (LOCK held)."""
    for name in [n for n, c in STATE["pvcs"].items()
                 if c["metadata"].get("deletionTimestamp") and not claim_in_use(n)]:
        STATE["pvcs"].pop(name)


def delete_claim(name):
    with LOCK:
        claim = STATE["pvcs"].get(name)
        if claim is None:
            return None
        if claim_in_use(name):
            STATE["claims_deleted_in_use"].append(name)
            claim["metadata"]["deletionTimestamp"] = now_text()[:19] + "Z"
            claim["metadata"]["finalizers"] = ["kubernetes.io/pvc-protection"]
        else:
            STATE["pvcs"].pop(name)
        return claim


def delete_job_gracefully(name, policy):
    """Foreground deletion as the API server does it: the Job is marked (deletionTimestamp,
    the foregroundDeletion finalizer) and stays, its pod running out its termination grace,
    until the grace (`deletion_grace_ms`) has passed; then it goes with what it owns."""
    with LOCK:
        grace = STATE["deletion_grace_ms"]
        job = STATE["jobs"].get(name)
        if job is None:
            return False
        if grace <= 0:
            marked = None
        else:
            marked = job["metadata"].get("deletionTimestamp")
            job["metadata"]["deletionTimestamp"] = marked or now_text()[:19] + "Z"
            job["metadata"]["finalizers"] = ["foregroundDeletion"]
    if grace <= 0:
        return delete_job(name, policy)
    if marked is None:
        threading.Timer(grace / 1000.0, delete_job, args=(name, policy)).start()
    return True


def delete_job(name, policy):
    with LOCK:
        job = STATE["jobs"].pop(name, None)
        if job is None:
            return False
        proc = STATE["procs"].pop(name, None)
        uid = job["metadata"]["uid"]
        for pname in [p for p, o in STATE["pods"].items() if o["metadata"]["labels"].get("job-name") == name]:
            STATE["pods"].pop(pname)
        for sname in [s for s, o in STATE["secrets"].items()
                      if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]:
            STATE["secrets"].pop(sname)
        finalize_claims()
        LOCK.notify_all()
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    token = ""
    workdir = ""

    def log_message(self, *args):
        pass

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def status(self, code, reason, message):
        self.send_json(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                              "message": message, "reason": reason, "code": code})

    def route(self, method):
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        parts = url.path.strip("/").split("/")
        with LOCK:
            STATE["requests"].append({"method": method, "path": url.path, "query": q})
        if parts[0] == "_fake":
            return self.fake(method, parts[1])
        by_cert = hasattr(self.connection, "getpeercert") and bool(self.connection.getpeercert())
        if not by_cert and self.headers.get("Authorization") != "Bearer " + self.token:
            return self.status(401, "Unauthorized", "Unauthorized")
        # /api/v1/namespaces/NS/RES[/NAME[/log]] or /apis/batch/v1/namespaces/NS/RES[/NAME]
        p = parts[2:] if parts[0] == "api" else parts[3:]
        if len(p) < 3 or p[0] != "namespaces":
            return self.status(404, "NotFound", "no route")
        ns, res, rest = p[1], p[2], p[3:]
        store = {"jobs": "jobs", "pods": "pods", "secrets": "secrets", "persistentvolumeclaims": "pvcs"}.get(res)
        if store is None:
            return self.status(404, "NotFound", "unknown resource " + res)
        if method == "POST" and not rest:
            return self.create(ns, store, q)
        if method == "GET" and not rest:
            with LOCK:
                items = [o for o in STATE[store].values() if matches(o["metadata"].get("labels", {}), q.get("labelSelector"))]
                items = json.loads(json.dumps(items))
            return self.send_json(200, {"kind": res.capitalize()[:-1] + "List", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": "1"}, "items": items})
        name = rest[0]
        if method == "GET" and len(rest) == 2 and rest[1] == "log" and store == "pods":
            return self.logs(name, q)
        if method == "GET":
            with LOCK:
                obj = json.loads(json.dumps(STATE[store].get(name)))
            if obj is None:
                return self.status(404, "NotFound", '%s "%s" not found' % (res, name))
            return self.send_json(200, obj)
        if method == "DELETE" and store == "pvcs":
            claim = delete_claim(name)
            if claim is None:
                return self.status(404, "NotFound", 'persistentvolumeclaims "%s" not found' % name)
            return self.send_json(200, claim)
        if method == "DELETE" and store == "jobs":
            policy = q.get("propagationPolicy")
            if not delete_job_gracefully(name, policy):
                return self.status(404, "NotFound", 'jobs.batch "%s" not found' % name)
            return self.send_json(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
        return self.status(405, "MethodNotAllowed", method)

    def create(self, ns, store, q):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            obj = json.loads(self.rfile.read(length))
        except ValueError:
            return self.status(400, "BadRequest", "body is not JSON")
        problems = validate(obj)
        want_kind = {"jobs": "Job", "secrets": "Secret", "pods": "Pod", "pvcs": "PersistentVolumeClaim"}[store]
        if obj.get("kind") != want_kind:
            problems.append("kind %r posted to %s" % (obj.get("kind"), store))
        if obj.get("metadata", {}).get("namespace") not in (None, ns):
            problems.append("namespace in the body differs from the path")
        if problems:
            with LOCK:
                STATE["invalid"].append({"kind": obj.get("kind"), "problems": problems})
            return self.status(422, "Invalid", "; ".join(problems))
        name = obj["metadata"]["name"]
        with LOCK:
            if name in STATE[store]:
                return self.status(409, "AlreadyExists", "%s %s exists" % (store, name))
            meta_new(obj, ns)
            if store == "pvcs":
                obj["status"] = {"phase": "Bound", "accessModes": obj["spec"].get("accessModes", []),
                                 "capacity": {"storage": obj["spec"]["resources"]["requests"]["storage"]}}
                obj["spec"]["volumeName"] = "pvc-" + obj["metadata"]["uid"]
            STATE[store][name] = obj
            if store == "jobs":
                obj["status"] = {"active": 1}
                pod = self.pod_for(obj, ns)
                STATE["pods"][pod["metadata"]["name"]] = pod
        if store == "jobs":
            threading.Thread(target=run_pod, args=(name, pod["metadata"]["name"], self.workdir), daemon=True).start()
        return self.send_json(201, obj)

    def pod_for(self, job, ns):
        tpl = json.loads(json.dumps(job["spec"]["template"]))
        labels = tpl.get("metadata", {}).get("labels", {})
        labels.update({"job-name": job["metadata"]["name"], "batch.kubernetes.io/job-name": job["metadata"]["name"],
                       "controller-uid": job["metadata"]["uid"]})
        name = job["metadata"]["name"] + "-" + uuid.uuid4().hex[:5]
        return meta_new({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": name, "labels": labels},
                         "spec": tpl["spec"], "status": {"phase": "Pending"}}, ns)

    def logs(self, name, q):
        with LOCK:
            if name not in STATE["pods"]:
                return self.status(404, "NotFound", 'pods "%s" not found' % name)
            drop = STATE["drop_log_after"]
            STATE["drop_log_after"] = None
        since = parse_time(q["sinceTime"]) if q.get("sinceTime") else None
        follow = q.get("follow") == "true"
        stamps = q.get("timestamps") == "true"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        sent = 0
        i = 0
        while True:
            with LOCK:
                lines = STATE["log"].get(name, [])
                pod = STATE["pods"].get(name)
                done = (pod is None or pod["status"].get("phase") in ("Succeeded", "Failed")
                        or "terminated" in json.dumps(pod["status"].get("containerStatuses", [])))
                batch = lines[i:]
                i = len(lines)
                if not batch and follow and not done:
                    LOCK.wait(0.2)
                    continue
            for ts, line in batch:
                if since is not None and parse_time(ts) < since:
                    continue
                out = (ts + " " + line) if stamps else line
                try:
                    self.wfile.write(out.encode() + b"\n")
                    self.wfile.flush()
                except OSError:
                    return
                sent += 1
                if drop is not None and sent >= drop:
                    return
            if not follow or done:
                with LOCK:
                    if len(STATE["log"].get(name, [])) == i:
                        return

    def fake(self, method, what):
        if what == "state":
            with LOCK:
                snap = {k: STATE[k] for k in ("jobs", "pods", "secrets", "pvcs", "claims_deleted_in_use",
                                              "requests", "invalid")}
                return self.send_json(200, json.loads(json.dumps(snap)))
        if what == "config" and method == "POST":
            length = int(self.headers.get("Content-Length") or 0)
            cfg = json.loads(self.rfile.read(length) or b"{}")
            with LOCK:
                for key in ("drop_log_after", "deletion_grace_ms"):
                    if key in cfg:
                        STATE[key] = cfg[key]
            return self.send_json(200, {})
        if what == "job" and method == "POST":
            # Creates a Job as an earlier sortie would have, without validation or a pod.
            length = int(self.headers.get("Content-Length") or 0)
            obj = json.loads(self.rfile.read(length))
            with LOCK:
                STATE["jobs"][obj["metadata"]["name"]] = meta_new(obj, obj["metadata"].get("namespace", "default"))
            return self.send_json(201, obj)
        return self.status(404, "NotFound", what)

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")


def main():
    Handler.token = sys.argv[1]
    Handler.workdir = sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    control = server
    if len(sys.argv) > 5:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[3], sys.argv[4])
        ctx.load_verify_locations(sys.argv[5])
        ctx.verify_mode = ssl.CERT_REQUIRED
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        # The test hooks stay on plain HTTP, on a port of their own.
        control = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        control.daemon_threads = True
        threading.Thread(target=control.serve_forever, daemon=True).start()
    print(server.server_address[1], control.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass  # The test ends (SIGINT): stop the pods below.
    finally:
        for p in list(STATE["procs"].values()):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    main()
