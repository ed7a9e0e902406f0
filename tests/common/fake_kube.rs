//! The fake Kubernetes API server (`tests/fake_kube/server.py`) run under the packaging venv's
//! Python (`scripts/lib/packaging-venv.sh`, which pins kubernetes-validate), with a kubeconfig
//! that reaches it with a bearer token read from a `tokenFile`. Killed on drop.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::{FAKE_AGENT, Project};

pub const TOKEN: &str = "fake-kube-token-7f3a";

pub struct FakeKube {
    child: Child,
    /// The API's port.
    pub port: u16,
    /// The test hooks' port (the API's, unless the API is HTTPS).
    control_port: u16,
    pub dir: tempfile::TempDir,
    tls: bool,
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate it signed, by `openssl`.
fn make_certificates(dir: &Path) {
    let script = r#"set -e
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
openssl req -x509 $ec -keyout ca.key -out ca.crt -days 2 -subj /CN=fake-kube-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
for who in server client; do
  openssl req $ec -keyout $who.key -out $who.csr -subj /CN=$who
done
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' > server.ext
printf 'extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n' > client.ext
for who in server client; do
  openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile $who.ext -out $who.crt
done
"#;
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "certificates: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The packaging venv's Python, created on first use.
fn venv_python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/lib/packaging-venv.sh"))
        .output()
        .expect("scripts/lib/packaging-venv.sh runs");
    assert!(
        out.status.success(),
        "packaging venv: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

impl FakeKube {
    pub fn start() -> FakeKube {
        Self::launch(false)
    }

    /// The API over HTTPS, requiring a client certificate (and no token): the kubeconfig
    /// trusts the fake's CA from a file and presents a certificate inline and its key from a
    /// file, as `kubectl` writes them.
    pub fn start_tls() -> FakeKube {
        Self::launch(true)
    }

    fn launch(tls: bool) -> FakeKube {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_kube/server.py");
        let mut cmd = Command::new(venv_python());
        cmd.arg(script).arg(TOKEN).arg(dir.path());
        if tls {
            make_certificates(dir.path());
            cmd.args(["server.crt", "server.key", "ca.crt"].map(|f| dir.path().join(f)));
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("fake kube server starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("port line");
        let mut ports = line.split_whitespace().map(|p| p.parse().expect("a port"));
        let port = ports.next().expect("the API's port");
        let control_port = ports.next().unwrap_or(port);
        let fk = FakeKube {
            child,
            port,
            control_port,
            dir,
            tls,
        };
        std::fs::write(fk.dir.path().join("token"), TOKEN).expect("token file");
        std::fs::write(fk.kubeconfig(), fk.kubeconfig_text()).expect("kubeconfig");
        fk
    }

    /// The server's directory: the pods' working directories are under it.
    pub fn workdir(&self) -> &Path {
        self.dir.path()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    fn kubeconfig_text(&self) -> String {
        if self.tls {
            let cert = std::fs::read(self.dir.path().join("client.crt")).expect("client.crt");
            return format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: fake\ncontexts:\n- name: fake\n  context: {{cluster: fake, user: fake}}\nclusters:\n- name: fake\n  cluster: {{server: 'https://127.0.0.1:{}', certificate-authority: ca.crt}}\nusers:\n- name: fake\n  user: {{client-certificate-data: {}, client-key: client.key}}\n",
                self.port,
                data_encoding::BASE64.encode(&cert)
            );
        }
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\ncontexts:\n- name: fake\n  context: {{cluster: fake, user: fake}}\nclusters:\n- name: fake\n  cluster: {{server: 'http://127.0.0.1:{}'}}\nusers:\n- name: fake\n  user: {{tokenFile: token}}\n",
            self.port
        )
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let url = format!("http://127.0.0.1:{}{path}", self.control_port);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(10)))
            .build()
            .into();
        let resp = match (method, body) {
            ("POST", Some(b)) => agent.post(&url).send_json(b),
            _ => agent.get(&url).call(),
        };
        resp.expect("fake kube answers")
            .body_mut()
            .read_json()
            .expect("JSON")
    }

    /// Jobs, pods, secrets, the request journal and the objects refused as invalid.
    pub fn state(&self) -> Value {
        self.call("GET", "/_fake/state", None)
    }

    /// The next log stream closes after `n` lines.
    pub fn drop_log_after(&self, n: usize) {
        self.call(
            "POST",
            "/_fake/config",
            Some(&serde_json::json!({"drop_log_after": n})),
        );
    }

    /// A deleted Job stays, marked, with its pod running, for `ms` before it goes (the pod's
    /// termination grace under foreground deletion).
    pub fn deletion_grace_ms(&self, ms: u64) {
        self.call(
            "POST",
            "/_fake/config",
            Some(&serde_json::json!({"deletion_grace_ms": ms})),
        );
    }

    /// Stores a Job as an earlier sortie process would have left it.
    pub fn seed_job(&self, job: &Value) {
        self.call("POST", "/_fake/job", Some(job));
    }

    /// The requests whose method is `method` and whose path ends with `suffix`.
    pub fn requests(&self, method: &str, suffix: &str) -> Vec<Value> {
        self.state()["requests"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["method"] == method && r["path"].as_str().unwrap_or("").ends_with(suffix))
            .collect()
    }
}

impl Drop for FakeKube {
    /// SIGINT first: the server then kills the pods it started, each in a session of its own
    /// that would outlive it (a pod still running when a test ends was left behind after the
    /// suite). SIGKILL if it has not ended within 10 s.
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        }
        let ended = super::wait::poll(Duration::from_secs(10), super::wait::POLL, || {
            self.child.try_wait().ok().flatten()
        });
        if ended.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A file-tracker workflow whose sessions run as Jobs on `kube` (the fake agent as the
/// image's command); `extra_kube` is more of the `worker.kubernetes` block, indented.
pub fn workflow(p: &Project, kube: &FakeKube, extra_kube: &str) {
    let wf = format!(
        r#"---
tracker:
  kind: file
  active_states: [To Do, In Progress]
  terminal_states: [Done, Cancelled]
  handoff_state: Review
file:
  path: ./issues.json
polling:
  interval_ms: 200
workspace:
  root: {root}
agent:
  kind: claude-code
  command: {agent}
  max_turns: 1
  stall_timeout_ms: 60000
  env: [{{FAKE_AGENT_SCENARIO: {scenario}}}]
worker:
  kubernetes:
    kubeconfig: {kubeconfig}
    namespace: agents
    image: registry.example/agents/claude:1
    daemon_label: test-daemon
    pending_timeout_ms: 5000
    resources:
      requests: {{cpu: 500m, memory: 1Gi}}
      limits: {{memory: 2Gi}}
{extra_kube}server:
  port: {port}
---
Work on {{{{ .issue.identifier }}}}: {{{{ .issue.title }}}}
"#,
        root = p.path("ws").display(),
        agent = FAKE_AGENT,
        scenario = p.path("scenarios/default.jsonl").display(),
        kubeconfig = kube.kubeconfig().display(),
        port = p.port(),
    );
    p.write("WORKFLOW.md", &wf);
}

/// One issue, K-1 (id 101), ready for dispatch.
pub fn one_issue(p: &Project) {
    p.issues(json!([
        {"id": "101", "identifier": "K-1", "title": "Runs as a Job", "state": "To Do", "priority": 1}
    ]));
}

/// The Jobs the fake API server holds now.
pub fn jobs(kube: &FakeKube) -> Vec<Value> {
    kube.state()["jobs"]
        .as_object()
        .map(|m| m.values().cloned().collect())
        .unwrap_or_default()
}

/// No object sortie created was refused, and every request is one the example Role allows.
pub fn assert_all_valid(kube: &FakeKube) {
    let invalid = &kube.state()["invalid"];
    assert_eq!(
        invalid,
        &json!([]),
        "objects the API would refuse: {invalid:#}"
    );
    assert_rbac_covers(kube);
}

/// `(group, resource, verb)` of an API request as RBAC sees it.
fn rbac_of(r: &Value) -> Option<(String, String, String)> {
    let path = r["path"].as_str()?;
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match *parts.first()? {
        "api" => ("", &parts[2..]),
        "apis" => (parts[1], &parts[3..]),
        _ => return None,
    };
    // namespaces/<ns>/<resource>[/<name>[/<sub>]]
    let resource = match rest.get(4) {
        Some(sub) => format!("{}/{sub}", rest[2]),
        None => rest.get(2)?.to_string(),
    };
    let named = rest.len() > 3;
    let verb = match (r["method"].as_str()?, named) {
        ("POST", _) => "create",
        ("DELETE", _) => "delete",
        ("GET", true) => "get",
        ("GET", false) => "list",
        _ => return None,
    };
    Some((group.to_string(), resource, verb.to_string()))
}

/// Every request sortie made is allowed by the Role of `examples/k8s/agent-jobs-rbac.yaml`.
pub fn assert_rbac_covers(kube: &FakeKube) {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/k8s/agent-jobs-rbac.yaml"),
    )
    .unwrap();
    let role = serde_yaml::Deserializer::from_str(&text)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
        .find(|d| d["kind"] == "Role")
        .expect("a Role");
    let allowed = |(g, res, verb): &(String, String, String)| {
        role["rules"].as_array().unwrap().iter().any(|rule| {
            let has = |k: &str, v: &str| rule[k].as_array().unwrap().iter().any(|x| x == v);
            has("apiGroups", g) && has("resources", res) && has("verbs", verb)
        })
    };
    for r in kube.state()["requests"].as_array().unwrap() {
        if r["path"].as_str().unwrap().starts_with("/_fake") {
            continue;
        }
        let need = rbac_of(r).unwrap_or_else(|| panic!("an API request: {r}"));
        assert!(allowed(&need), "the Role does not allow {need:?} ({r})");
    }
}

/// How many stored agent events carry `text`.
pub fn events_with(p: &Project, text: &str) -> i64 {
    p.db_i64(&format!(
        "SELECT COUNT(*) FROM agent_events WHERE payload LIKE '%{text}%'"
    ))
}
