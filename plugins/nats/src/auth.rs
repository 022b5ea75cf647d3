//! Credentials: user/password, token, NKey, and JWT with NKey (a `.creds`
//! file), and the signing of the server's nonce.

use std::fmt;

use data_encoding::BASE64URL_NOPAD;
use nkeys::KeyPair;

use crate::error::Error;

/// How the client proves who it is, as configured by the operator.
#[derive(Clone, Default)]
pub enum Auth {
    /// No credentials.
    #[default]
    None,
    /// `user` and `pass` in CONNECT.
    UserPassword {
        /// The user name.
        user: String,
        /// The password.
        password: String,
    },
    /// `auth_token` in CONNECT.
    Token(String),
    /// An NKey user seed (`SU...`); the public key goes in CONNECT and the
    /// server's nonce is signed with the seed.
    NKey {
        /// The seed, `SU...`.
        seed: String,
    },
    /// A user JWT and the NKey seed that signs for it: the decentralised
    /// (operator mode) credentials of a `.creds` file.
    Credentials {
        /// The user JWT.
        jwt: String,
        /// The user's NKey seed, `SU...`.
        seed: String,
    },
}

// Secrets stay out of logs: only the kind of credential is shown.
impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Auth::None => "None",
            Auth::UserPassword { .. } => "UserPassword",
            Auth::Token(_) => "Token",
            Auth::NKey { .. } => "NKey",
            Auth::Credentials { .. } => "Credentials",
        };
        write!(f, "Auth::{kind}(..)")
    }
}

impl Auth {
    /// Reads a NATS `.creds` file: the user JWT and the user seed between
    /// their `-----BEGIN ...-----` and `------END ...------` lines.
    pub fn from_creds(text: &str) -> Result<Auth, Error> {
        let jwt = armored(text, "NATS USER JWT").ok_or_else(|| {
            Error::InvalidAuth("no NATS USER JWT block in the credentials".into())
        })?;
        let seed = armored(text, "USER NKEY SEED").ok_or_else(|| {
            Error::InvalidAuth("no USER NKEY SEED block in the credentials".into())
        })?;
        Ok(Auth::Credentials { jwt, seed })
    }
}

/// The first non-empty line after the BEGIN marker of `label`.
fn armored(text: &str, label: &str) -> Option<String> {
    let mut lines = text.lines().map(str::trim);
    lines.find(|l| l.starts_with("-----BEGIN") && l.contains(label))?;
    lines
        .take_while(|l| !l.starts_with("------END") && !l.starts_with("-----END"))
        .find(|l| !l.is_empty())
        .map(str::to_owned)
}

/// [`Auth`] after its seed has been decoded, so that a bad seed is refused
/// when the connection is built, not at every handshake.
pub(crate) enum Credentials {
    None,
    UserPassword { user: String, password: String },
    Token(String),
    NKey(KeyPair),
    Jwt { jwt: String, key: KeyPair },
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::NKey(key) | Credentials::Jwt { key, .. } => {
                write!(f, "Credentials({})", key.public_key())
            }
            _ => f.write_str("Credentials(..)"),
        }
    }
}

/// The auth fields of one CONNECT.
#[derive(Debug, Default)]
pub(crate) struct ConnectAuth<'a> {
    pub user: Option<&'a str>,
    pub pass: Option<&'a str>,
    pub auth_token: Option<&'a str>,
    pub nkey: Option<String>,
    pub sig: Option<String>,
    pub jwt: Option<&'a str>,
}

impl Credentials {
    pub(crate) fn new(auth: &Auth) -> Result<Self, Error> {
        Ok(match auth {
            Auth::None => Credentials::None,
            Auth::UserPassword { user, password } => Credentials::UserPassword {
                user: user.clone(),
                password: password.clone(),
            },
            Auth::Token(token) => Credentials::Token(token.clone()),
            Auth::NKey { seed } => Credentials::NKey(user_key(seed)?),
            Auth::Credentials { jwt, seed } => {
                if jwt.trim().is_empty() {
                    return Err(Error::InvalidAuth("the user JWT is empty".into()));
                }
                Credentials::Jwt {
                    jwt: jwt.trim().to_owned(),
                    key: user_key(seed)?,
                }
            }
        })
    }

    /// The CONNECT fields, signing `nonce` where a key is configured.
    pub(crate) fn connect_fields(&self, nonce: Option<&str>) -> Result<ConnectAuth<'_>, Error> {
        let sign = |key: &KeyPair| -> Result<Option<String>, Error> {
            nonce.map(|n| sign_nonce(key, n)).transpose()
        };
        Ok(match self {
            Credentials::None => ConnectAuth::default(),
            Credentials::UserPassword { user, password } => ConnectAuth {
                user: Some(user),
                pass: Some(password),
                ..ConnectAuth::default()
            },
            Credentials::Token(token) => ConnectAuth {
                auth_token: Some(token),
                ..ConnectAuth::default()
            },
            Credentials::NKey(key) => ConnectAuth {
                nkey: Some(key.public_key()),
                sig: sign(key)?,
                ..ConnectAuth::default()
            },
            // With a JWT the server reads the public key from the JWT itself.
            Credentials::Jwt { jwt, key } => ConnectAuth {
                jwt: Some(jwt),
                sig: sign(key)?,
                ..ConnectAuth::default()
            },
        })
    }
}

/// Signs the server's nonce (its UTF-8 bytes, as the server sent them) and
/// encodes the Ed25519 signature as base64url without padding, as the server
/// expects in CONNECT's `sig`.
pub(crate) fn sign_nonce(key: &KeyPair, nonce: &str) -> Result<String, Error> {
    let sig = key
        .sign(nonce.as_bytes())
        .map_err(|e| Error::InvalidAuth(format!("cannot sign the server nonce: {e}")))?;
    Ok(BASE64URL_NOPAD.encode(&sig))
}

fn user_key(seed: &str) -> Result<KeyPair, Error> {
    let key = KeyPair::from_seed(seed.trim())
        .map_err(|e| Error::InvalidAuth(format!("the NKey seed cannot be decoded: {e}")))?;
    // Servers accept only user keys from clients; saying so now beats an
    // Authorization Violation later.
    if !key.public_key().starts_with('U') {
        return Err(Error::InvalidAuth(
            "the NKey seed is not a user seed (it should start with SU)".into(),
        ));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nkeys::KeyPairType;

    fn user_seed() -> String {
        KeyPair::new_from_raw(KeyPairType::User, [7; 32])
            .unwrap()
            .seed()
            .unwrap()
    }

    #[test]
    fn creds_file() {
        let seed = user_seed();
        let text = format!(
            "-----BEGIN NATS USER JWT-----\neyJhbGciOi.body.sig\n------END NATS USER JWT------\n\n\
             ************************* IMPORTANT *************************\n\
             NKEY Seed printed below can be used to sign and prove identity.\n\n\
             -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
        );
        match Auth::from_creds(&text).unwrap() {
            Auth::Credentials { jwt, seed: s } => {
                assert_eq!(jwt, "eyJhbGciOi.body.sig");
                assert_eq!(s, seed);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Auth::from_creds("nothing"),
            Err(Error::InvalidAuth(_))
        ));
    }

    #[test]
    fn signature_verifies_with_the_public_key() {
        let creds = Credentials::new(&Auth::NKey { seed: user_seed() }).unwrap();
        let fields = creds.connect_fields(Some("lCQmdWJpL9U0Jb8")).unwrap();
        let public = fields.nkey.unwrap();
        assert!(public.starts_with('U'));
        let sig = BASE64URL_NOPAD
            .decode(fields.sig.unwrap().as_bytes())
            .unwrap();
        let verifier = KeyPair::from_public_key(&public).unwrap();
        verifier.verify(b"lCQmdWJpL9U0Jb8", &sig).unwrap();
        assert!(verifier.verify(b"other nonce", &sig).is_err());
    }

    #[test]
    fn refuses_bad_seeds_and_hides_secrets() {
        assert!(matches!(
            Credentials::new(&Auth::NKey {
                seed: "SUNOTASEED".into()
            }),
            Err(Error::InvalidAuth(_))
        ));
        let account = KeyPair::new_from_raw(KeyPairType::Account, [1; 32])
            .unwrap()
            .seed()
            .unwrap();
        assert!(matches!(
            Credentials::new(&Auth::NKey { seed: account }),
            Err(Error::InvalidAuth(_))
        ));
        let debug = format!("{:?}", Auth::Token("s3cret".into()));
        assert!(!debug.contains("s3cret"), "{debug}");
    }
}
