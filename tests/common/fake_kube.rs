//! The fake Kubernetes API server (`tests/fake_kube/server.py`) run under the packaging venv's
//! Python (`scripts/lib/packaging-venv.sh`, which pins kubernetes-validate), with a kubeconfig
//! that reaches it with a bearer token read from a `tokenFile`. Killed on drop.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

pub const TOKEN: &str = "fake-kube-token-7f3a";

pub struct FakeKube {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
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
        let dir = tempfile::tempdir().expect("tempdir");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_kube/server.py");
        let mut child = Command::new(venv_python())
            .arg(script)
            .arg(TOKEN)
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("fake kube server starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("port line");
        let port = line.trim().parse().expect("a port");
        let fk = FakeKube { child, port, dir };
        std::fs::write(fk.dir.path().join("token"), TOKEN).expect("token file");
        std::fs::write(fk.kubeconfig(), fk.kubeconfig_text()).expect("kubeconfig");
        fk
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    fn kubeconfig_text(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\ncontexts:\n- name: fake\n  context: {{cluster: fake, user: fake}}\nclusters:\n- name: fake\n  cluster: {{server: 'http://127.0.0.1:{}'}}\nusers:\n- name: fake\n  user: {{tokenFile: token}}\n",
            self.port
        )
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
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
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
