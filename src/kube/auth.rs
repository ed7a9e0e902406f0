//! Reaching the API server: the in-cluster service account or a kubeconfig file's current
//! context (server, CA, a bearer token inline or in a `tokenFile`, a client certificate and key
//! inline or in files). Exec plugins and auth providers are not supported; a kubeconfig that
//! needs them is refused by name.

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
    let roots = match inline_or_file(&cluster, "certificate-authority", base)? {
        Some(pem) => Some(roots_of(&pem)?),
        None => None,
    };
    let (token, cert) = match field(&context, "user") {
        None => (TokenSource::None, None),
        Some(user) => {
            let user = named("users", &user, "user")?;
            (
                user_token(&user, base, path)?,
                client_cert(&user, base, path)?,
            )
        }
    };
    let mut tls = ureq::tls::TlsConfig::builder().client_cert(cert);
    if let Some(r) = roots {
        tls = tls.root_certs(r);
    }
    Ok(Endpoint {
        server,
        token,
        tls: tls.build(),
    })
}

/// The PEM of `<key>-data` (base64) or of the file `<key>` names (relative to `base`).
fn inline_or_file(v: &Value, key: &str, base: &Path) -> Result<Option<Vec<u8>>, KubeError> {
    if let Some(data) = v.get(format!("{key}-data")).and_then(Value::as_str) {
        return data_encoding::BASE64
            .decode(data.trim().as_bytes())
            .map(Some)
            .map_err(|e| {
                KubeError::new(
                    KubeErrorKind::Config,
                    format!("{key}-data is not base64: {e}"),
                )
            });
    }
    match v.get(key).and_then(Value::as_str) {
        Some(file) => read_small(&base.join(file)).map(Some),
        None => Ok(None),
    }
}

/// The user's client certificate and key, both or neither.
fn client_cert(
    user: &Value,
    base: &Path,
    path: &Path,
) -> Result<Option<ureq::tls::ClientCert>, KubeError> {
    let cert = inline_or_file(user, "client-certificate", base)?;
    let key = inline_or_file(user, "client-key", base)?;
    let cfg_err = |m: &str| KubeError::new(KubeErrorKind::Config, format!("{}: {m}", shown(path)));
    let (cert, key) = match (cert, key) {
        (None, None) => return Ok(None),
        (Some(c), Some(k)) => (c, k),
        (Some(_), None) => {
            return Err(cfg_err(
                "the user has a client-certificate but no client-key",
            ));
        }
        (None, Some(_)) => {
            return Err(cfg_err(
                "the user has a client-key but no client-certificate",
            ));
        }
    };
    let chain: Vec<_> = ureq::tls::parse_pem(&cert)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect();
    if chain.is_empty() {
        return Err(cfg_err(
            "the user's client-certificate holds no certificate",
        ));
    }
    let key = ureq::tls::parse_pem(&key)
        .find_map(|item| match item {
            Ok(ureq::tls::PemItem::PrivateKey(k)) => Some(k),
            _ => None,
        })
        .ok_or_else(|| cfg_err("the user's client-key holds no private key"))?;
    Ok(Some(ureq::tls::ClientCert::new_with_certs(&chain, key)))
}

fn user_token(user: &Value, base: &Path, path: &Path) -> Result<TokenSource, KubeError> {
    for unsupported in ["exec", "auth-provider"] {
        if user.get(unsupported).is_some() {
            return Err(KubeError::new(
                KubeErrorKind::Config,
                format!(
                    "{}: the user's {unsupported} is not supported; give it a bearer token (token or tokenFile), e.g. a service account's, or a client certificate and key",
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
    Ok(ureq::tls::TlsConfig::builder()
        .root_certs(roots_of(pem)?)
        .build())
}

/// The certificates of `pem` as the only roots trusted.
fn roots_of(pem: &[u8]) -> Result<ureq::tls::RootCerts, KubeError> {
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
    Ok(ureq::tls::RootCerts::new_with_certs(&certs))
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
