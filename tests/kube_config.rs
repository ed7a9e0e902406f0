//! `worker.kubernetes` through `sortie validate`: a usable block passes; each problem is an
//! error naming its field.

mod common;

use common::Project;

fn validate(p: &Project) -> (i32, String) {
    let out = common::sortie_command()
        .current_dir(p.dir.path())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .arg("validate")
        .arg(p.workflow())
        .output()
        .expect("run sortie validate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\nclusters:\n- name: k\n  cluster: {server: 'https://127.0.0.1:6443'}\nusers:\n- name: u\n  user: {tokenFile: token}\n";

fn project(kube_yaml: &str, agent_yaml: &str) -> Project {
    let p = Project::new();
    p.issues(serde_json::json!([]));
    p.write("kubeconfig", KUBECONFIG);
    p.fake_agent_workflow(
        agent_yaml,
        &format!("worker:\n  kubernetes:\n    kubeconfig: ./kubeconfig\n{kube_yaml}"),
    );
    p
}

fn refused(kube_yaml: &str, agent_yaml: &str, field: &str, words: &str) {
    let p = project(kube_yaml, agent_yaml);
    let (code, stderr) = validate(&p);
    assert_eq!(code, 1, "{kube_yaml}: {stderr}");
    assert!(
        stderr.contains(field),
        "{kube_yaml}: names {field}: {stderr}"
    );
    assert!(
        stderr.contains(words),
        "{kube_yaml}: says {words:?}: {stderr}"
    );
}

#[test]
fn a_usable_block_passes() {
    let p = project(
        "    namespace: agents\n    resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {memory: 2Gi}}\n    max_jobs_per_namespace: 8\n    workspace: pvc\n    pvc: {size: 20Gi, storage_class: fast-ssd}\n",
        "",
    );
    let (code, stderr) = validate(&p);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("unknown"), "{stderr}");
}

#[test]
fn each_problem_is_an_error_naming_its_field() {
    refused(
        "    colour: blue\n",
        "",
        "worker.kubernetes.colour",
        "unknown key",
    );
    refused(
        "    namespace: Not_A_Label\n",
        "",
        "worker.kubernetes.namespace",
        "DNS label",
    );
    refused(
        "    workspace: volume\n",
        "",
        "worker.kubernetes.workspace",
        "expected emptydir or pvc",
    );
    refused(
        "    workspace: pvc\n    pvc: {size: lots}\n",
        "",
        "worker.kubernetes.pvc.size",
        "quantity",
    );
    refused(
        "    workspace: pvc\n    pvc: {storage_class: Fast_SSD}\n",
        "",
        "worker.kubernetes.pvc.storage_class",
        "storage class name",
    );
    refused(
        "    pvc: {size: 1Gi}\n",
        "",
        "worker.kubernetes.pvc",
        "only with workspace: pvc",
    );
    refused(
        "    resources: {limits: {memory: lots}}\n",
        "",
        "worker.kubernetes.resources.limits.memory",
        "quantity",
    );
    refused(
        "    run_as_user: 0\n",
        "",
        "worker.kubernetes.run_as_user",
        "positive",
    );
    refused(
        "dispatch:\n  rules:\n    - {name: big, match: {labels: [big]}, claude-code: {kubernetes: {image: ''}}}\n",
        "",
        "dispatch.rules[0].claude-code.kubernetes.image",
        "image reference",
    );
    refused(
        "dispatch:\n  rules:\n    - {name: big, match: {labels: [big]}, claude-code: {kubernetes: {image: a, pull: always}}}\n",
        "",
        "dispatch.rules[0].claude-code.kubernetes.pull",
        "unknown key",
    );
    refused(
        "  ssh_hosts: [build1]\n",
        "",
        "worker.kubernetes",
        "exclusive",
    );
}

#[test]
fn a_kubeconfig_that_cannot_be_used_is_refused() {
    let p = project("", "");
    p.write("kubeconfig", "apiVersion: v1\nkind: Config\n");
    let (code, stderr) = validate(&p);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("worker.kubernetes.kubeconfig"), "{stderr}");
    assert!(stderr.contains("no current-context"), "{stderr}");
    p.write(
        "kubeconfig",
        &KUBECONFIG.replace(
            "{tokenFile: token}",
            "{client-certificate: c.pem, client-key: c.key}",
        ),
    );
    let (code, stderr) = validate(&p);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("c.pem"),
        "the missing file is named: {stderr}"
    );
    p.write("c.pem", "not a certificate\n");
    p.write(
        "kubeconfig",
        &KUBECONFIG.replace("{tokenFile: token}", "{client-certificate: c.pem}"),
    );
    let (code, stderr) = validate(&p);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no client-key"), "{stderr}");
    p.write("c.key", "not a key\n");
    p.write(
        "kubeconfig",
        &KUBECONFIG.replace(
            "{tokenFile: token}",
            "{client-certificate: c.pem, client-key: c.key}",
        ),
    );
    let (code, stderr) = validate(&p);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("holds no certificate"), "{stderr}");
    p.write(
        "kubeconfig",
        &KUBECONFIG.replace("{tokenFile: token}", "{exec: {command: aws}}"),
    );
    let (code, stderr) = validate(&p);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("exec is not supported"), "{stderr}");
}

#[test]
fn without_a_kubeconfig_outside_a_cluster_it_is_refused() {
    let p = project("", "");
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    p.write(
        "WORKFLOW.md",
        &wf.replace("    kubeconfig: ./kubeconfig\n", "    namespace: agents\n"),
    );
    let (code, stderr) = validate(&p);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("does not run in a cluster"), "{stderr}");
}

#[test]
fn a_kind_that_needs_a_stdin_session_cannot_run_as_a_job() {
    let p = project("", "");
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    p.write(
        "WORKFLOW.md",
        &wf.replace("kind: claude-code", "kind: codex"),
    );
    let (code, stderr) = validate(&p);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("agent kind codex cannot run as a Kubernetes Job"),
        "{stderr}"
    );
    assert!(stderr.contains("over stdin"), "{stderr}");
}

#[test]
fn a_rule_image_needs_jobs() {
    let p = Project::new();
    p.issues(serde_json::json!([]));
    p.fake_agent_workflow(
        "",
        "dispatch:\n  rules:\n    - {name: big, match: {labels: [big]}, claude-code: {kubernetes: {image: x/y:1}}}\n",
    );
    let (code, stderr) = validate(&p);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("dispatch.rules[0].claude-code.kubernetes"),
        "{stderr}"
    );
    assert!(stderr.contains("no worker.kubernetes"), "{stderr}");
}

#[test]
fn a_rule_image_passes_with_jobs_and_is_no_unknown_key() {
    let p = project(
        "dispatch:\n  rules:\n    - {name: big, match: {labels: [big]}, claude-code: {kubernetes: {image: x/y:1}}}\n",
        "",
    );
    let (code, stderr) = validate(&p);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("unknown"), "{stderr}");
}
