//! Confirmation tokens: `v1.<id>.<expires>.<mac>`, where the MAC is HMAC-SHA256 under a
//! server-only key over the id, the expiry and the order's fingerprint (the normalized
//! order, account and mode). Each issued token is stored; using it marks it used in the
//! same transaction that reserves the order, so it is good exactly once.

use std::path::Path;

use rusqlite::{OptionalExtension, Transaction, params};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::{StoreError, hex, sql};

/// The key file in the state directory.
pub const KEY_FILE: &str = "token.key";

/// The server's MAC key.
#[derive(Clone)]
pub struct TokenKey([u8; 32]);

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

impl TokenKey {
    /// A fresh random key (tests; `load_or_create` for the server).
    ///
    /// # Errors
    /// The OS has no randomness to give.
    pub fn random() -> Result<Self, StoreError> {
        let mut key = [0_u8; 32];
        getrandom::fill(&mut key)
            .map_err(|e| StoreError::Corrupt(format!("no randomness: {e}")))?;
        Ok(Self(key))
    }

    /// Reads the key file in `dir`, creating it (owner-only) on first use.
    ///
    /// # Errors
    /// The file cannot be read or written, or has the wrong length.
    pub fn load_or_create(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join(KEY_FILE);
        let io = |source| StoreError::Io {
            path: path.display().to_string(),
            source,
        };
        match std::fs::read(&path) {
            Ok(bytes) => {
                let key: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
                    StoreError::Corrupt(format!(
                        "{} is not a 32-byte key; delete it to make a new one (outstanding tokens lapse)",
                        path.display()
                    ))
                })?;
                Ok(Self(key))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                crate::create_private_dir(dir)?;
                let key = Self::random()?;
                // Written whole under a private name, then linked into place: another process
                // never reads half a key, and two never both win.
                // A random name (never the key's own bytes): unique to this attempt, so two
                // threads of one process cannot share it either.
                let nonce = Self::random()?;
                let unique: String = nonce.0[..8].iter().map(|b| format!("{b:02x}")).collect();
                let temp = dir.join(format!(".{KEY_FILE}.{unique}.tmp"));
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::OpenOptionsExt;
                    options.mode(0o600);
                }
                {
                    use std::io::Write;
                    let mut file = options.open(&temp).map_err(io)?;
                    file.write_all(&key.0).map_err(io)?;
                    file.sync_all().map_err(io)?;
                }
                let linked = std::fs::hard_link(&temp, &path);
                let _ = std::fs::remove_file(&temp);
                match linked {
                    Ok(()) => Ok(key),
                    // Another process made it first: use theirs.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        Self::load_or_create(dir)
                    }
                    Err(e) => Err(io(e)),
                }
            }
            Err(e) => Err(io(e)),
        }
    }

    /// HMAC-SHA256 (RFC 2104) of `message`.
    pub fn mac(&self, message: &[u8]) -> [u8; 32] {
        const BLOCK: usize = 64;
        let mut inner_pad = [0x36_u8; BLOCK];
        let mut outer_pad = [0x5c_u8; BLOCK];
        for (i, k) in self.0.iter().enumerate() {
            inner_pad[i] ^= k;
            outer_pad[i] ^= k;
        }
        let inner = Sha256::new()
            .chain_update(inner_pad)
            .chain_update(message)
            .finalize();
        Sha256::new()
            .chain_update(outer_pad)
            .chain_update(inner)
            .finalize()
            .into()
    }
}

fn signed_text(id: &str, expires: i64, fingerprint: &str) -> String {
    format!("v1|{id}|{expires}|{fingerprint}")
}

/// Issues and stores a token for `fingerprint`, good until `expires` (unix seconds).
///
/// # Errors
/// No randomness, or SQLite failures.
pub fn issue(
    tx: &Transaction<'_>,
    key: &TokenKey,
    account: &str,
    fingerprint: &str,
    expires: i64,
) -> Result<String, StoreError> {
    let mut id = [0_u8; 16];
    getrandom::fill(&mut id).map_err(|e| StoreError::Corrupt(format!("no randomness: {e}")))?;
    let id = hex(&id);
    let mac = hex(&key.mac(signed_text(&id, expires, fingerprint).as_bytes()));
    // Tokens a day past their expiry can never be redeemed: keep the table small.
    tx.execute(
        "DELETE FROM tokens WHERE expires < ?1",
        params![expires - 86_400 - 3_600],
    )
    .map_err(sql)?;
    tx.execute(
        "INSERT INTO tokens (token_id, account, fingerprint, expires, used) VALUES (?1, ?2, ?3, ?4, NULL)",
        params![id, account, fingerprint, expires],
    )
    .map_err(sql)?;
    Ok(format!("v1.{id}.{expires}.{mac}"))
}

/// The token's own id (its second field), when the token has the shape this server
/// writes: what a retry of one confirmed order is keyed by, whatever else was edited.
pub fn token_id(token: &str) -> Option<&str> {
    let mut parts = token.split('.');
    let (Some("v1"), Some(id)) = (parts.next(), parts.next()) else {
        return None;
    };
    is_lower_hex(id, 32).then_some(id)
}

fn is_lower_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// An expiry written as [`issue`] writes it: decimal digits, no sign, no leading zero.
fn canonical_expiry(text: &str) -> Option<i64> {
    let value = text.parse::<i64>().ok()?;
    (value.to_string() == text).then_some(value)
}

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not a token this server issued for this order (changed, or for another order).
    Altered,
    Expired,
    AlreadyUsed,
}

/// Checks a token against the order it is presented with and, when good, marks it used
/// (inside the caller's transaction, so a rolled-back order leaves it unused).
///
/// # Errors
/// SQLite failures; a refused token is `Ok(Err(refusal))`.
pub fn redeem(
    tx: &Transaction<'_>,
    key: &TokenKey,
    token: &str,
    fingerprint: &str,
    now_unix: i64,
    now: &str,
) -> Result<Result<(), Refusal>, StoreError> {
    let parts: Vec<&str> = token.split('.').collect();
    let [version, id, expires, mac] = parts.as_slice() else {
        return Ok(Err(Refusal::Altered));
    };
    // Only the text this server writes: `+5`, `05` or ` 5` parse to the same number
    // but are another token, and must not redeem (or use up) this one.
    let Some(expires_at) = canonical_expiry(expires) else {
        return Ok(Err(Refusal::Altered));
    };
    if !is_lower_hex(id, 32) || !is_lower_hex(mac, 64) {
        return Ok(Err(Refusal::Altered));
    }
    let expected = hex(&key.mac(signed_text(id, expires_at, fingerprint).as_bytes()));
    // Constant time, so a MAC is never guessed byte by byte from timings.
    if *version != "v1" || !bool::from(expected.as_bytes().ct_eq(mac.as_bytes())) {
        return Ok(Err(Refusal::Altered));
    }
    let row: Option<(String, i64, Option<String>)> = tx
        .query_row(
            "SELECT fingerprint, expires, used FROM tokens WHERE token_id = ?1",
            params![id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(sql)?;
    let Some((stored_fingerprint, stored_expires, used)) = row else {
        return Ok(Err(Refusal::Altered));
    };
    if stored_fingerprint != fingerprint || stored_expires != expires_at {
        return Ok(Err(Refusal::Altered));
    }
    if used.is_some() {
        return Ok(Err(Refusal::AlreadyUsed));
    }
    if now_unix >= expires_at {
        return Ok(Err(Refusal::Expired));
    }
    tx.execute(
        "UPDATE tokens SET used = ?2 WHERE token_id = ?1 AND used IS NULL",
        params![id, now],
    )
    .map_err(sql)?;
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::Store;

    #[test]
    fn hmac_matches_rfc_4231_case_2_shape() {
        // RFC 4231 test case 2 uses a 4-byte key ("Jefe"); our key is 32 bytes, so check
        // against the same construction with the key zero-padded, which HMAC defines
        // as identical for keys shorter than the block.
        let mut key = [0_u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let mac = TokenKey(key).mac(b"what do ya want for nothing?");
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_token_is_good_once_for_its_order_until_it_expires() {
        let store = Store::in_memory().unwrap();
        let key = TokenKey::random().unwrap();
        let token = store
            .tx(|tx| issue(tx, &key, "SIM", "order-a", 1_000))
            .unwrap();
        let try_redeem = |token: &str, fp: &str, now: i64| {
            store
                .tx(|tx| redeem(tx, &key, token, fp, now, "t"))
                .unwrap()
        };
        assert_eq!(try_redeem(&token, "order-b", 10), Err(Refusal::Altered));
        let mut tampered = token.clone();
        tampered.replace_range(tampered.len() - 1.., "0");
        if tampered == token {
            tampered.replace_range(tampered.len() - 1.., "1");
        }
        assert_eq!(try_redeem(&tampered, "order-a", 10), Err(Refusal::Altered));
        let later = token.replace(".1000.", ".99999.");
        assert_eq!(try_redeem(&later, "order-a", 10), Err(Refusal::Altered));
        // The same number written another way is another token: refused, and it does
        // not use the real one up.
        for edited in [".01000.", ".+1000.", ".0001000."] {
            let edited = token.replace(".1000.", edited);
            assert_eq!(
                try_redeem(&edited, "order-a", 10),
                Err(Refusal::Altered),
                "{edited}"
            );
        }
        assert_eq!(
            try_redeem(&token.to_uppercase(), "order-a", 10),
            Err(Refusal::Altered)
        );
        assert_eq!(token_id(&token), token.split('.').nth(1));
        assert_eq!(try_redeem(&token, "order-a", 1_000), Err(Refusal::Expired));
        assert_eq!(try_redeem(&token, "order-a", 999), Ok(()));
        assert_eq!(
            try_redeem(&token, "order-a", 999),
            Err(Refusal::AlreadyUsed)
        );
    }

    #[test]
    fn a_key_from_another_server_is_refused() {
        let store = Store::in_memory().unwrap();
        let key = TokenKey::random().unwrap();
        let token = store.tx(|tx| issue(tx, &key, "SIM", "fp", 100)).unwrap();
        let other = TokenKey::random().unwrap();
        let result = store
            .tx(|tx| redeem(tx, &other, &token, "fp", 1, "t"))
            .unwrap();
        assert_eq!(result, Err(Refusal::Altered));
    }

    #[test]
    fn the_key_file_is_made_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let a = TokenKey::load_or_create(dir.path()).unwrap();
        let b = TokenKey::load_or_create(dir.path()).unwrap();
        assert_eq!(a.0, b.0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
