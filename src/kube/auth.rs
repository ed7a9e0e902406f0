//! Reaching the API server: the in-cluster service account or a kubeconfig file's current
//! context (server, CA, bearer token inline or in a `tokenFile`). Client certificates and exec
//! plugins are not supported; a kubeconfig that needs them is refused by name.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::{KubeError, KubeErrorKind, shown};
use super::settings::KubeAuth;

/// The largest credential or kubeconfig file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Where the bearer token comes from.
#[derive(Debug, Clone)]
pub enum TokenSource {
    None,
    /// Read again before every request: the kubelet rotates a projected token in place.
    File(PathBuf),
    Inline(String),
}

impl TokenSource {
    pub fn read(&self) -> Result<Option<String>, KubeError> {
        match self {
            TokenSource::None => Ok(None),
            TokenSource::Inline(t) => Ok(Some(t.clone())),
            TokenSource::File(p) => {
                let t = read_small(p)?;
                let t = String::from_utf8_lossy(&t).trim().to_string();
                crate::mask::register_secret(&t);
                Ok(Some(t))
            }
        }
    }
}

/// A server with its token and TLS settings.
pub struct Endpoint {
    pub server: String,
    pub token: TokenSource,
    pub tls: ureq::tls::TlsConfig,
}

/// The endpoint `auth` names.
pub fn endpoint(auth: &KubeAuth) -> Result<Endpoint, KubeError> {
    match auth {
        KubeAuth::InCluster {
            server,
            token_file,
            ca_file,
        } => Ok(Endpoint {
            server: server.clone(),
            token: TokenSource::File(token_file.clone()),
            tls: tls_with_roots(&read_small(ca_file)?)?,
        }),
        KubeAuth::Kubeconfig { path } => from_kubeconfig(path),
    }
}

/// Reads and checks a kubeconfig's current context, as `sortie validate` and a client do.
pub fn from_kubeconfig(path: &Path) -> Result<Endpoint, KubeError> {
    let cfg_err = |m: String| KubeError::new(KubeErrorKind::Config, m);
    let text = read_small(path)?;
    let doc: Value = serde_yaml::from_slice(&text)
        .map_err(|e| cfg_err(format!("{}: not YAML: {e}", shown(path))))?;
    let current = doc
        .get("current-context")
        .and_then(Value::as_str)
        .ok_or_else(|| cfg_err(format!("{}: no current-context", shown(path))))?;
    let named = |list: &str, name: &str, inner: &str| -> Result<Value, KubeError> {
        doc.get(list)
            .and_then(Value::as_array)
            .and_then(|l| {
                l.iter()
                    .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
            })
            .and_then(|e| e.get(inner))
            .cloned()
            .ok_or_else(|| cfg_err(format!("{}: no {inner} named {name:?}", shown(path))))
    };
    let context = named("contexts", current, "context")?;
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let cluster_name = field(&context, "cluster").ok_or_else(|| {
        cfg_err(format!(
            "{}: context {current:?} names no cluster",
            shown(path)
        ))
    })?;
    let cluster = named("clusters", &cluster_name, "cluster")?;
    let server = field(&cluster, "server")
        .ok_or_else(|| cfg_err(format!("{}: cluster has no server", shown(path))))?;
    let base = path.parent().unwrap_or(Path::new("/"));
    let tls = cluster_tls(&cluster, base)?;
    let token = match field(&context, "user") {
        None => TokenSource::None,
        Some(user) => user_token(&named("users", &user, "user")?, base, path)?,
    };
    Ok(Endpoint { server, token, tls })
}

fn cluster_tls(cluster: &Value, base: &Path) -> Result<ureq::tls::TlsConfig, KubeError> {
    if let Some(data) = cluster
        .get("certificate-authority-data")
        .and_then(Value::as_str)
    {
        let pem = data_encoding::BASE64
            .decode(data.trim().as_bytes())
            .map_err(|e| {
                KubeError::new(
                    KubeErrorKind::Config,
                    format!("certificate-authority-data is not base64: {e}"),
                )
            })?;
        return tls_with_roots(&pem);
    }
    if let Some(file) = cluster.get("certificate-authority").and_then(Value::as_str) {
        return tls_with_roots(&read_small(&base.join(file))?);
    }
    Ok(ureq::tls::TlsConfig::default())
}

fn user_token(user: &Value, base: &Path, path: &Path) -> Result<TokenSource, KubeError> {
    for unsupported in [
        "client-certificate",
        "client-certificate-data",
        "exec",
        "auth-provider",
    ] {
        if user.get(unsupported).is_some() {
            return Err(KubeError::new(
                KubeErrorKind::Config,
                format!(
                    "{}: the user's {unsupported} is not supported; give it a bearer token (token or tokenFile), e.g. a service account's",
                    shown(path)
                ),
            ));
        }
    }
    if let Some(t) = user.get("token").and_then(Value::as_str) {
        crate::mask::register_secret(t);
        return Ok(TokenSource::Inline(t.to_string()));
    }
    Ok(match user.get("tokenFile").and_then(Value::as_str) {
        Some(f) => TokenSource::File(base.join(f)),
        None => TokenSource::None,
    })
}

/// TLS that trusts only the certificates of `pem`.
fn tls_with_roots(pem: &[u8]) -> Result<ureq::tls::TlsConfig, KubeError> {
    let certs: Vec<_> = ureq::tls::parse_pem(pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(KubeError::new(
            KubeErrorKind::Config,
            "the CA bundle holds no certificate",
        ));
    }
    Ok(ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::new_with_certs(&certs))
        .build())
}

fn read_small(path: &Path) -> Result<Vec<u8>, KubeError> {
    let f = std::fs::File::open(path)
        .map_err(|e| KubeError::new(KubeErrorKind::Config, format!("{}: {e}", shown(path))))?;
    let mut out = Vec::new();
    std::io::Read::take(f, MAX_FILE_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| KubeError::new(KubeErrorKind::Config, format!("{}: {e}", shown(path))))?;
    if out.len() as u64 > MAX_FILE_BYTES {
        return Err(KubeError::new(
            KubeErrorKind::Config,
            format!("{}: larger than 1 MiB", shown(path)),
        ));
    }
    Ok(out)
}

use std::io::Read as _;
